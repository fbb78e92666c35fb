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
    "plain stack": (TUNED, ("VGG16", "VGG19", "vgg11", "vgg11_bn", "alexnet")),
    "resnet": (TUNED, ("ResNet50", "ResNet101", "ResNet152", "ResNet50V2", "ResNet101V2", "ResNet152V2", "resnet18",
                       "resnet50", "resnext50_32x4d", "wide_resnet50_2")),
    "mobilenet": (TUNED, ("MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large", "mobilenet_v2",
                          "mobilenet_v3_small", "mobilenet_v3_large")),
    "densenet": (TUNED, ("DenseNet121", "DenseNet169", "DenseNet201", "densenet121")),
    "convnext": (HELD_OUT, ("ConvNeXtTiny", "ConvNeXtSmall", "ConvNeXtBase", "ConvNeXtLarge", "ConvNeXtXLarge",
                            "convnext_tiny")),
    "efficientnet": (HELD_OUT, (*(f"EfficientNetB{index}" for index in range(8)), "efficientnet_b0")),
    "efficientnetv2": (HELD_OUT, (*(f"EfficientNetV2{size}" for size in ("B0", "B1", "B2", "B3", "S", "M", "L")),
                                  "efficientnet_v2_s")),
    "inception": (HELD_OUT, ("InceptionV3", "InceptionResNetV2", "inception_v3", "googlenet")),
    "xception": (HELD_OUT, ("Xception",)),
    "nasnet": (HELD_OUT, ("NASNetMobile", "NASNetLarge")),
    "mnasnet": (HELD_OUT, ("mnasnet0_5",)),
    "squeezenet": (HELD_OUT, ("squeezenet1_1",)),
    "shufflenet": (HELD_OUT, ("shufflenet_v2_x0_5",)),
    "regnet": (HELD_OUT, ("regnet_y_400mf",)),
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
