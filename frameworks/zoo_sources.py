"""The zoo's nets as their users have them: `keras.applications` saved as `.keras`, torchvision's conv nets exported
to ONNX the way that keeps the training graph (suites/bench/zoo.py runs this, then imports each file).

    python -m frameworks.zoo_sources keras OUT NAME=SIZE ...        (a Keras interpreter)
    python -m frameworks.zoo_sources torchvision OUT NAME=SIZE ...  (torch with torchvision, the zoo-torch env)
    python -m frameworks.zoo_sources timm OUT NAME=SIZE ...         (the same env, with timm)
    python -m frameworks.zoo_sources smp|monai|detection|ultralytics OUT NAME=SIZE ...  (the same env)
    python -m frameworks.zoo_sources keras-hub OUT NAME=SIZE ...    (Keras with keras-hub, the zoo-keras env)

Each net is built with weights=None and its source's defaults at a SIZExSIZE RGB input; one JSON line per net on
stdout: its file and the source's own counts (parameters; statistics: Keras's non-trainable weights, torch's
floating-point buffers), or the one-line reason the source could not build or save it. With `--saved-batch=B`, a
torch module's line has `saved_bytes` too: what its own training step keeps for the backward at batch B, the proof
the rebuild keeps what the user's module keeps.
"""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported only where a torch source runs: Keras's interpreter has none
    import torch

EXPORT_BATCH = 2  # the sample the exporter traces; the batch axis stays symbolic


def keras_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A keras.applications net saved as `.keras` (`saved_batch` is a torch module's: Keras's nets have none)."""
    import keras
    import numpy as np

    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    path = out / f"{name}.keras"
    model.save(path)
    return {"file": str(path), "parameters": sum(int(np.prod(w.shape)) for w in model.trainable_weights),
            "statistics": sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)}


# keras-hub's vision backbones, built from their arguments (a preset's download is out of reach), as its presets
# build them: ResNet-18 and -50, VGG-16, DenseNet-121 and SegFormer's MiT-B0
KERAS_HUB_NETS: dict[str, Callable[[object, int], object]] = {
    "hub_ResNet18": lambda hub, size: hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[7], stackwise_num_filters=[64, 128, 256, 512],
        stackwise_num_blocks=[2, 2, 2, 2], stackwise_num_strides=[1, 2, 2, 2], block_type="basic_block",
        image_shape=(size, size, 3)),
    "hub_ResNet50": lambda hub, size: hub.models.ResNetBackbone(
        input_conv_filters=[64], input_conv_kernel_sizes=[7], stackwise_num_filters=[64, 128, 256, 512],
        stackwise_num_blocks=[3, 4, 6, 3], stackwise_num_strides=[1, 2, 2, 2], block_type="bottleneck_block",
        image_shape=(size, size, 3)),
    "hub_VGG16": lambda hub, size: hub.models.VGGBackbone(
        stackwise_num_repeats=[2, 2, 3, 3, 3], stackwise_num_filters=[64, 128, 256, 512, 512],
        image_shape=(size, size, 3)),
    "hub_DenseNet121": lambda hub, size: hub.models.DenseNetBackbone(stackwise_num_repeats=[6, 12, 24, 16],
                                                                     image_shape=(size, size, 3)),
    "hub_MiT_B0": lambda hub, size: hub.models.MiTBackbone(
        layerwise_depths=[2, 2, 2, 2], num_layers=4, layerwise_num_heads=[1, 2, 5, 8], layerwise_sr_ratios=[8, 4, 2, 1],
        max_drop_path_rate=0.1, layerwise_patch_sizes=[7, 3, 3, 3], layerwise_strides=[4, 2, 2, 2],
        hidden_dims=[32, 64, 160, 256], image_shape=(size, size, 3)),
}


def keras_hub_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A keras-hub backbone saved as itself, `backbone.save(...)`, as its users save one (the zoo imports it through
    the rewrap, suites/run/keras_rewrap.py)."""
    import keras_hub
    import numpy as np

    model = KERAS_HUB_NETS[name](keras_hub, size)
    path = out / f"{name}.keras"
    model.save(path)
    return {"file": str(path), "parameters": sum(int(np.prod(w.shape)) for w in model.trainable_weights),
            "statistics": sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)}


def _exported(net: torch.nn.Module, name: str, size: int, out: Path, saved_batch: int | None) -> dict:
    """torch.onnx.export's default (dynamo) exporter from train() with optimize=False: its batch norms stay
    (optimize=True would fuse them into the convs, docs/models.md), with the batch axis dynamic; and, at
    `saved_batch`, what the module's own training step keeps (`saved_by_the_module`)."""
    import torch

    net = net.train()
    path = out / f"{name}.onnx"
    torch.onnx.export(net, (torch.randn(EXPORT_BATCH, 3, size, size),), str(path), optimize=False,
                      external_data=False, input_names=["image"], dynamic_axes={"image": {0: "N"}})
    return {"file": str(path), "parameters": sum(p.numel() for p in net.parameters()),
            "statistics": sum(b.numel() for b in net.buffers() if b.is_floating_point())} | (
        {"saved_bytes": saved_by_the_module(net, size, saved_batch)} if saved_batch else {})


def saved_by_the_module(net: torch.nn.Module, size: int, batch: int) -> int:
    """The bytes the module's own training step keeps for its backward, as autograd's saved-tensor hooks list them
    (each storage once; its weights, buffers, batch and targets left out), with the rebuild's loss: the mean squared
    error of each output against targets of its own, summed. The zoo sets it beside the rebuild's own figure in
    torch, which the same hooks measure (`frameworks.torch_adapter.saved_activation_bytes`)."""
    import torch

    from frameworks.torch_adapter import saved_activation_bytes

    torch.manual_seed(0)
    inputs = torch.randn(batch, 3, size, size)
    with torch.no_grad():
        targets = [torch.randn_like(output) for output in _outputs(net(inputs))]

    def step() -> None:
        outputs = _outputs(net(inputs))
        sum(torch.nn.functional.mse_loss(output, target) for output, target in zip(outputs, targets, strict=True)
            ).backward()

    net.zero_grad(set_to_none=True)
    _, saved = saved_activation_bytes([*net.parameters(), *net.buffers(), inputs, *targets], step)
    net.zero_grad(set_to_none=True)
    return saved


def _outputs(result: object) -> list[torch.Tensor]:
    """A module's outputs as a flat list, in the order the exporter writes them: a tensor, a tuple (GoogLeNet's in
    train()), a dict (a segmentation net's), or these nested (a YOLO head's list of scales)."""
    if isinstance(result, dict):
        result = list(result.values())
    if isinstance(result, (tuple, list)):
        return [tensor for each in result for tensor in _outputs(each)]
    return [result]


def torchvision_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A torchvision classifier, or one of its segmentation nets (`torchvision.models.segmentation`, without a
    backbone's weights), as it trains: a segmentation net with its auxiliary head where it has one (`aux_loss=True`:
    its dict's "out" and "aux" export as two outputs), GoogLeNet and Inception v3 with their auxiliary logits (in
    train() a tuple: three outputs, and two). Their init_weights is off: it draws from scipy's truncated normal, which
    the zoo env need not hold, and the weights' values change no figure."""
    import torchvision.models

    if hasattr(torchvision.models.segmentation, name):
        segmentation = getattr(torchvision.models.segmentation, name)
        auxiliary = "aux_loss" in inspect.signature(segmentation).parameters  # LR-ASPP has no auxiliary head
        net = segmentation(weights=None, weights_backbone=None, **({"aux_loss": True} if auxiliary else {}))
        return _exported(net, name, size, out, saved_batch)
    options = {"init_weights": False} if name in ("googlenet", "inception_v3") else {}
    return _exported(getattr(torchvision.models, name)(weights=None, **options), name, size, out, saved_batch)


def timm_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A timm net as `timm.create_model(name, pretrained=False)` makes it."""
    import timm

    return _exported(timm.create_model(name, pretrained=False), name, size, out, saved_batch)


def smp_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A segmentation-models-pytorch architecture (`smp_<Arch>`) over a ResNet-34 encoder, no encoder weights."""
    import segmentation_models_pytorch as smp

    net = getattr(smp, name.removeprefix("smp_"))(encoder_name="resnet34", encoder_weights=None)
    return _exported(net, name, size, out, saved_batch)


# MONAI's nets built 2D, three channels in, its defaults but those a 2D net needs (UNet's channels and strides)
MONAI_NETS: dict[str, Callable[[], torch.nn.Module]] = {
    "monai_UNet": lambda: _monai().UNet(2, 3, 2, (16, 32, 64, 128, 256), (2, 2, 2, 2)),
    "monai_BasicUNet": lambda: _monai().BasicUNet(2, 3, 2),
    "monai_SegResNet": lambda: _monai().SegResNet(2, in_channels=3, out_channels=2),
    "monai_AttentionUnet": lambda: _monai().AttentionUnet(2, 3, 2, (16, 32, 64, 128), (2, 2, 2)),
    "monai_DenseNet121": lambda: _monai().DenseNet121(2, 3, 2),
}


def _monai() -> object:
    from monai.networks import nets

    return nets


def monai_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A MONAI net built 2D (MONAI_NETS)."""
    return _exported(MONAI_NETS[name](), name, size, out, saved_batch)


def detection_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """A torchvision detection backbone with its feature pyramid (`fpn_<backbone>`) as its detectors build it to
    train from scratch (`weights=None, weights_backbone=None`: trainable batch norms, every layer trained; frozen
    ones come with pretrained weights): its dict of levels exports as one output per level."""
    import torch
    from torchvision.models.detection import backbone_utils

    backbone, norm = name.removeprefix("fpn_"), torch.nn.BatchNorm2d
    if backbone.startswith("resnet"):
        net = backbone_utils.resnet_fpn_backbone(backbone_name=backbone, weights=None, norm_layer=norm,
                                                 trainable_layers=5)
    else:
        net = backbone_utils.mobilenet_backbone(backbone_name=backbone, weights=None, fpn=True, norm_layer=norm,
                                                trainable_layers=6)
    return _exported(net, name, size, out, saved_batch)


def ultralytics_net(name: str, size: int, out: Path, saved_batch: int | None = None) -> dict:
    """An Ultralytics YOLO net built from its yaml, the net its users train (its batch norms kept, unlike its own
    export's), exported from train(): a detection head's three scales are three outputs."""
    import os

    os.environ.setdefault("YOLO_CONFIG_DIR", str(out / "ultralytics-settings"))  # not the user's home
    from ultralytics.nn import tasks

    kind = {"seg": tasks.SegmentationModel, "cls": tasks.ClassificationModel}.get(name.rpartition("-")[2],
                                                                                    tasks.DetectionModel)
    return _exported(kind(f"{name}.yaml", verbose=False), name, size, out, saved_batch)


def _torchvision_on_a_cpu_torch() -> None:
    """PyPI's torchvision for Linux is a CUDA build: beside the CPU torch its compiled ops do not load, and the fake
    registrations of those ops fail at import. The model definitions need neither; the registrations are skipped."""
    import types

    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))


SOURCES: dict[str, Callable[[str, int, Path, int | None], dict]] = {
    "keras": keras_net, "torchvision": torchvision_net, "timm": timm_net, "smp": smp_net, "monai": monai_net,
    "detection": detection_net, "ultralytics": ultralytics_net, "keras-hub": keras_hub_net}


def main(argv: list[str]) -> int:
    source, out = argv[0], Path(argv[1])
    options = dict(entry.removeprefix("--").split("=") for entry in argv[2:] if entry.startswith("--"))
    nets = [entry.split("=") for entry in argv[2:] if not entry.startswith("--")]
    saved_batch = int(options["saved-batch"]) if "saved-batch" in options else None
    if source not in ("keras", "keras-hub"):  # timm, smp, MONAI and Ultralytics import torchvision
        _torchvision_on_a_cpu_torch()
    out.mkdir(parents=True, exist_ok=True)
    for name, size in nets:
        try:
            found = SOURCES[source](name, int(size), out, saved_batch)
        except Exception as error:  # noqa: BLE001 - a net its own source cannot build is a row of the table
            found = {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]}
        print(json.dumps({"name": name} | found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
