"""The zoo split once, by family, into the nets the estimate's rules may be tuned on and the nets they may not.

An estimate is judged on nets it was not tuned on. The rules and the measured constants were shaped on the
catalogue's runs (vgg16, resnet50, mobilenetv2, densenet121), so those nets' families are the tuned half; every
other family of the zoo is held out, and so is any net not named here (a user's own). Committed with the zoo at
its first evaluation (issue 47): a net never moves across it. `errors` and the zoo's table report the halves apart.
"""

from __future__ import annotations

from pathlib import Path

from models import catalogue

TUNED, HELD_OUT = "tuned", "held-out"
HALVES = (HELD_OUT, TUNED)

# family -> its half and its members, by the zoo's names (Keras's class names, torchvision's functions)
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "plain stack": (TUNED, ("VGG16", "VGG19", "vgg11", "vgg11_bn", "alexnet", "hub_VGG16")),
    "resnet": (TUNED, ("ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2", "resnet18",
                       "hub_ResNet18", "hub_ResNet50",
                       "resnet50", "resnext50_32x4d", "wide_resnet50_2", "resnet10t", "resnet14t", "resnet26d",
                       "resnet34d", "resnetv2_50", "resnet33ts")),
    "mobilenet": (TUNED, ("MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large", "mobilenet_v2",
                          "mobilenet_v3_small", "mobilenet_v3_large", "mobilenetv2_050", "mobilenetv3_large_100",
                          "mobilenetv3_small_050", "mobilenetv4_conv_small", "mobilenetv1_100")),
    "densenet": (TUNED, ("DenseNet121", "DenseNet169", "DenseNet201", "densenet121", "monai_DenseNet121",
                         "hub_DenseNet121")),
    "efficientnet": (HELD_OUT, (*(f"EfficientNetB{index}" for index in range(8)), "efficientnet_b0",
                                "efficientnet_lite0", "efficientnet_es", "tf_efficientnet_b0", "tinynet_a")),
    "efficientnetv2": (HELD_OUT, (*(f"EfficientNetV2{size}" for size in ("B0", "B1", "B2", "B3", "S", "M", "L")),
                                  "efficientnet_v2_s", "efficientnetv2_rw_t")),
    "inception": (HELD_OUT, ("InceptionV3", "InceptionResNetV2", "inception_v3", "googlenet")),
    "xception": (HELD_OUT, ("Xception", "xception41")),
    "nasnet": (HELD_OUT, ("NASNetMobile", "NASNetLarge")),
    "mnasnet": (HELD_OUT, ("mnasnet0_5", "mnasnet_100", "semnasnet_050")),
    "squeezenet": (HELD_OUT, ("squeezenet1_1",)),
    "shufflenet": (HELD_OUT, ("shufflenet_v2_x0_5",)),
    "regnet": (HELD_OUT, ("regnet_y_400mf", "regnetx_002", "regnety_002", "regnetz_b16")),
    "convnext": (HELD_OUT, ("ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge",
                            "convnext_tiny", "convnext_atto")),
    # added with timm and torchvision's segmentation nets (issue 66): every family new to the zoo is held out
    "senet": (HELD_OUT, ("seresnet18", "seresnext26d_32x4d", "resnetrs50")),
    "channel-attention resnet": (HELD_OUT, ("ecaresnet26t", "gcresnet33ts")),
    "sknet": (HELD_OUT, ("skresnet18",)),
    "res2net": (HELD_OUT, ("res2net50_14w_8s",)),
    "resnest": (HELD_OUT, ("resnest14d",)),
    "cspnet": (HELD_OUT, ("cspresnet50", "cspresnext50", "cspdarknet53", "cs3darknet_s")),
    "darknet": (HELD_OUT, ("darknet53",)),
    "dla": (HELD_OUT, ("dla34", "dla46_c", "dla46x_c")),
    "dpn": (HELD_OUT, ("dpn68",)),
    "ghostnet": (HELD_OUT, ("ghostnet_100", "ghostnetv2_100", "repghostnet_050", "ghostnetv3_050")),
    "hrnet": (HELD_OUT, ("hrnet_w18_small",)),
    "rexnet": (HELD_OUT, ("rexnet_100",)),
    "selecsls": (HELD_OUT, ("selecsls42b",)),
    "vovnet": (HELD_OUT, ("ese_vovnet19b_dw", "ese_vovnet19b_slim_dw")),
    "gernet": (HELD_OUT, ("gernet_s",)),
    "repvgg": (HELD_OUT, ("repvgg_a0",)),
    "mobileone": (HELD_OUT, ("mobileone_s0",)),
    "mixnet": (HELD_OUT, ("mixnet_s",)),
    "fbnet": (HELD_OUT, ("fbnetc_100",)),
    "spnasnet": (HELD_OUT, ("spnasnet_100",)),
    "lcnet": (HELD_OUT, ("lcnet_050",)),
    "hardcorenas": (HELD_OUT, ("hardcorenas_a",)),
    "convnextv2": (HELD_OUT, ("convnextv2_atto",)),
    "inceptionnext": (HELD_OUT, ("inception_next_atto",)),
    "hgnet": (HELD_OUT, ("hgnet_tiny", "hgnetv2_b0")),
    "starnet": (HELD_OUT, ("starnet_s1",)),
    "fastvit": (HELD_OUT, ("fastvit_t8",)),
    "nfnet": (HELD_OUT, ("nf_resnet26", "nf_regnet_b0")),
    "segmentation": (HELD_OUT, ("fcn_resnet50", "deeplabv3_mobilenet_v3_large", "lraspp_mobilenet_v3_large")),
    # added with dense prediction and the model libraries (issue 71), held out as every family new to the zoo; a
    # library's classifier of a tuned family (MONAI's DenseNet-121, timm's MobileNetV1) stays in its family
    "dense prediction": (HELD_OUT, (*(f"smp_{arch}" for arch in ("Unet", "UnetPlusPlus", "FPN", "Linknet",
                                                                 "DeepLabV3Plus", "PSPNet", "PAN", "MAnet")),
                                    "monai_UNet", "monai_BasicUNet", "monai_SegResNet", "monai_AttentionUnet")),
    "detection": (HELD_OUT, ("fpn_resnet18", "fpn_mobilenet_v3_large", "yolov8n", "yolov8n-seg")),
    "yolo classifier": (HELD_OUT, ("yolov8n-cls",)),
    "metaformer": (HELD_OUT, ("poolformer_s12", "convformer_s18")),
    "group-norm resnet": (HELD_OUT, ("resnet50_gn",)),
    "bit": (HELD_OUT, ("resnetv2_50x1_bit",)),
    "rdnet": (HELD_OUT, ("rdnet_tiny",)),
    "convmixer": (HELD_OUT, ("convmixer_768_32",)),
    "mambaout": (HELD_OUT, ("mambaout_femto",)),
    "pnasnet": (HELD_OUT, ("pnasnet5large",)),
    "repvit": (HELD_OUT, ("repvit_m0_9",)),
    "tresnet": (HELD_OUT, ("tresnet_m",)),
    "focalnet": (HELD_OUT, ("focalnet_tiny_srf",)),
    "mix transformer": (HELD_OUT, ("hub_MiT_B0",)),
}
_HALF_OF = {name: half for half, members in FAMILIES.values() for name in members}


def half_of(net: str) -> str:
    """The half a zoo net (or a catalogue net: tuned) belongs to; any other net was never tuned on: held out."""
    in_catalogue = net in catalogue.CATALOGUE or any(pattern.fullmatch(net)
                                                     for pattern, _ in catalogue.FAMILIES.values())
    return TUNED if in_catalogue else _HALF_OF.get(net, HELD_OUT)


def net_of(scenario: dict) -> str:
    """A record's net as the split names it: a model from a file by its file's name (the zoo names its files by
    net; two sources' models may share a name, as Keras's and torchvision's resnet50)."""
    model_file = scenario.get("model_file")
    return Path(model_file).stem if model_file else scenario["model"]
