"""The named models. Adding a model is adding one builder here."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from models.importers.files import load_spec_file
from models.layer_kinds import PROBED
from models.spec import (
    GELU,
    INPUT,
    Add,
    AvgPool2D,
    BatchNorm,
    Concat,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    Layer,
    LayerNorm,
    MaxPool2D,
    ModelSpec,
    ReLU,
    ReLU6,
    SiLU,
    SpecError,
    at_input_size,
)


class Graph:
    """Builds a graph spec layer by layer: `add` appends one layer reading the given layers (by default the last
    one added) and returns its index, so a builder reads like the net's forward pass."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []
        self.inputs: list[tuple[int, ...]] = []
        self.names: list[str] = []
        self.blocks: list[str] = []
        self.block = ""

    def add(self, layer: Layer, *sources: int, name: str = "") -> int:
        self.inputs.append(sources or ((len(self.layers) - 1) if self.layers else INPUT,))
        self.names.append(f"{name or layer.kind}{len(self.layers)}")  # the block is its own field
        self.blocks.append(self.block)
        self.layers.append(layer)
        return len(self.layers) - 1

    def conv_bn(self, filters: int, kernel: int, stride: int = 1, groups: int = 1, source: int | None = None,
                activation: type | None = ReLU) -> int:
        """Conv (no bias, torch's symmetric padding of kernel // 2), batch norm, then the activation if any."""
        sources = () if source is None else (source,)
        self.add(Conv2D(filters, kernel, stride, kernel // 2, bias=False, groups=groups), *sources)
        last = self.add(BatchNorm())
        return self.add(activation()) if activation else last

    def spec(self, name: str, input_shape: tuple[int, ...], loss: str, description: str, batch: int,
             outputs: tuple[int, ...] | None = None) -> ModelSpec:
        """The spec; `outputs`: the layers it returns where it returns several (the last layer alone otherwise)."""
        return ModelSpec(name, input_shape, tuple(self.layers), loss, default_batch=batch, description=description,
                         inputs=tuple(self.inputs), names=tuple(self.names), blocks=tuple(self.blocks),
                         outputs=outputs)


def keras200m() -> ModelSpec:
    """Story 3: a deep conv net with no activations, 206,538,153 parameters on a 16x16 image."""
    layers = (
        Conv2D(256), MaxPool2D(2), Conv2D(512), MaxPool2D(2),
        *(Conv2D(1024) for _ in range(22)), MaxPool2D(2),
        Conv2D(256), Conv2D(32), MaxPool2D(2), Flatten(), Dense(4), Dense(1),
    )
    return ModelSpec("keras200m", (16, 16, 1), layers, "mse", default_batch=1,
                     description="story 3: 22 linear 1024-filter convs, one 16x16 image")


def keras_small() -> ModelSpec:
    """Story 3's batch-sweep net: small weights, so what grows with the batch is easy to see."""
    layers = (Conv2D(100), Conv2D(256), Conv2D(32), MaxPool2D(2), Flatten(), Dense(4), Dense(1))
    return ModelSpec("keras-small", (16, 16, 1), layers, "mse", default_batch=10,
                     description="story 3: the batch-sweep answer's net (Conv 100, 256, 32)")


def vgg16() -> ModelSpec:
    """Standard VGG-16 (configuration D), the net of the CS231n hand count in story 4."""
    layers: list = []
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            layers += [Conv2D(width), ReLU()]
        layers.append(MaxPool2D(2))
    layers += [Flatten(), Dense(4096), ReLU(), Dense(4096), ReLU(), Dense(1000)]
    return ModelSpec("vgg16", (224, 224, 3), tuple(layers), "cross_entropy", default_batch=1,
                     description="VGG-16, 224x224x3, 1000 classes")


def heatmap68() -> ModelSpec:
    """Story 1: tiny fp32 weights (about 1.6 MB), large activation maps, 68 heatmaps of 64x64."""
    layers = (
        Conv2D(32, stride=2), ReLU(), Conv2D(64, stride=2), ReLU(),
        Conv2D(128), ReLU(), Conv2D(128), ReLU(), Conv2D(128), ReLU(),
        Conv2D(68, kernel=1),
    )
    return ModelSpec("heatmap68", (256, 256, 3), layers, "mse", default_batch=1,
                     description="story 1: fully convolutional, 256x256x3 in, 68x64x64 heatmaps out")


def probe() -> ModelSpec:
    """One layer of each kind at minimal size: its memory is each framework's fixed cost per phase.

    Every suite runs it first; what it measures beyond its few tensors becomes the measured constants
    the estimate adds (suites.analysis.constants).
    """
    layers = (Conv2D(2), ReLU(), MaxPool2D(2), Flatten(), Dense(1))
    return ModelSpec("probe", (8, 8, 1), layers, "mse", default_batch=1,
                     description="overhead probe: one small layer of each kind, for the measured constants")


def probe_deep() -> ModelSpec:
    """The probe's tiny tensors through about a hundred layers in the mix real conv nets have (conv, depthwise conv,
    batch norm, ReLU and ReLU6, residual add, concat, pooling): what it measures beyond the probe, per layer, is the
    runtime that grows with a net's depth (compiled code, traced graphs), which the estimate adds per layer.

    Compilers share code between layers of the same shape, so the cost per layer depends on how many differ: 17 of
    the probe's 98 layers are distinct (ResNet-50: 54 of 174). A probe that widens every three blocks (44 of 104
    distinct) measured more per layer and fitted ResNet-50's build worse, its step better (README)."""
    net = Graph()
    x = net.conv_bn(8, 3)
    for block in range(12):
        net.block = f"block{block}"
        if block % 2:  # a depthwise block, MobileNet's kind
            y = net.conv_bn(8, 3, groups=8, source=x, activation=ReLU6)
        else:
            y = net.conv_bn(8, 3, source=x)
        y = net.conv_bn(8, 1, activation=None)
        x = net.add(ReLU(), net.add(Add(), y, x))
    net.block = "join"
    joined = net.add(Concat(), x, net.conv_bn(4, 1, source=x), net.conv_bn(4, 3, source=x))
    net.block = ""
    net.add(MaxPool2D(2), joined)
    net.add(AvgPool2D(2))
    net.add(GlobalAvgPool())
    net.add(Dense(1))
    return net.spec("probe-deep", (8, 8, 1), "mse", "depth probe: the probe's tiny tensors through ~100 layers, for the"
                    " measured runtime per layer", batch=1)


def probe_conv() -> ModelSpec:
    """Convolutions only, at the probe's size: a 3x3 conv and a 1x1 head to one map, trained on an image (mse), as
    heatmap68 is. No dense layer, so no BLAS workspace: on a GPU what it holds beyond its tensors is cuDNN's
    convolution workspace and the modules its kernels load, which the probe's figure mixes with cuBLAS's."""
    layers = (Conv2D(2), Conv2D(1, kernel=1))
    return ModelSpec("probe-conv", (8, 8, 1), layers, "mse", default_batch=1,
                     description="conv probe: two tiny convs and no dense layer, for cuDNN's conv workspace")


def probe_dense() -> ModelSpec:
    """Dense layers only, on a flat input at the probe's size: what it holds beyond its tensors is the BLAS
    workspace (cuBLAS's on a GPU, one per thread that multiplies) and the modules its kernels load, with no
    convolution beside it."""
    layers = (Dense(2), Dense(1))
    return ModelSpec("probe-dense", (64,), layers, "mse", default_batch=1,
                     description="dense probe: two tiny dense layers and nothing else, for the BLAS workspace")


def probe_norm() -> ModelSpec:
    """One batch norm on the probe's input image (mse on its output): its statistics, the per-channel values its
    backward pass saves, and on a GPU cuDNN's batch-norm kernels and any reserve space they take."""
    return ModelSpec("probe-norm", (8, 8, 1), (BatchNorm(),), "mse", default_batch=1,
                     description="norm probe: one batch norm alone, for what batch norm's kernels hold")


def probe_pool() -> ModelSpec:
    """Max, average and global average pooling after one 1x1 conv, the weight that makes the gradient run back
    through every pool: beyond its tensors, the pooling kernels' cost (torch's int64 max-pool indices are
    tensors the rules count); the 1x1 conv's own part is what probe-conv measures."""
    layers = (Conv2D(1, kernel=1), MaxPool2D(2), AvgPool2D(2), GlobalAvgPool())
    return ModelSpec("probe-pool", (8, 8, 1), layers, "mse", default_batch=1,
                     description="pool probe: max, average and global pooling behind one 1x1 conv")


KIND_PROBE_BLOCKS = 16
# What each block of a kind probe adds after its 3x3 conv (models.estimate.kinds.PROBED), given the conv's width.
_KIND_BLOCKS: dict[str, Callable[[int], tuple[Layer, ...]]] = {
    "conv": lambda width: (),
    "depthwise": lambda width: (Conv2D(width, 3, padding=1, bias=False, groups=width),),
    "elementwise": lambda width: (ReLU(),),
    "silu": lambda width: (SiLU(),),
    "gelu": lambda width: (GELU(),),
    "dropout": lambda width: (Dropout(0.2),),
    "layernorm": lambda width: (LayerNorm(),),
    "batchnorm": lambda width: (BatchNorm(),),
}
assert tuple(_KIND_BLOCKS) == PROBED


def probe_kind(kind: str, same: int = 0) -> ModelSpec:
    """What a layer of one kind costs a compiling framework (models.estimate.kinds): `KIND_PROBE_BLOCKS` blocks of
    a 3x3 conv, each followed by one layer of the kind, on an 8x8x4 image, then a global pool and a dense layer of
    4. Each block's conv has its own width (8, 9, ...), so every layer is distinct and compiled for; with `same`,
    that many identical blocks of width 16, so all but the first repeat it. Its tensors are a few KiB: what it holds
    beyond them, against the conv probes', is the kind's cost (suites.analysis.kind_costs)."""
    if kind not in _KIND_BLOCKS or same < 0:
        raise SpecError(f"no kind probe {kind!r}; valid kinds: {', '.join(PROBED)}")
    widths = [16] * same if same else [8 + block for block in range(KIND_PROBE_BLOCKS)]
    layers = [layer for width in widths for layer in (Conv2D(width, 3, padding=1, bias=False),
                                                      *_KIND_BLOCKS[kind](width))]
    name = f"probe-kind-{kind}" + (f"-same{same}" if same else "")
    return ModelSpec(name, (8, 8, 4), (*layers, GlobalAvgPool(), Dense(4)), "cross_entropy", default_batch=8,
                     description=f"kind probe: {len(widths)} {'identical' if same else 'distinct'} conv blocks with "
                                 f"{kind}, for what each such layer costs a compiling framework")


# The kind probes whose figures determine each probed kind's costs (suites.analysis.kind_costs): every kind's
# distinct blocks and its identical ones, and the convs alone at a second count of identical blocks.
KIND_COST_PROBES = (*(f"probe-kind-{kind}{same}" for kind in PROBED for same in ("", f"-same{KIND_PROBE_BLOCKS}")),
                    f"probe-kind-conv-same{KIND_PROBE_BLOCKS // 2}")


def plain(depth: int) -> ModelSpec:
    """Depth family for sweeps: `depth` 3x3 convs with ReLU at width 64 on 32x32, a small head."""
    body = tuple(layer for _ in range(depth) for layer in (Conv2D(64), ReLU()))
    layers = (*body, MaxPool2D(4), Flatten(), Dense(10))
    return ModelSpec(f"plain-{depth}", (32, 32, 3), layers, "cross_entropy", default_batch=8,
                     description=f"{depth} 3x3 convs of width 64 with ReLU on 32x32x3")


def resnet50() -> ModelSpec:
    """ResNet-50 v1.5 (torchvision's layout): bottlenecks 3, 4, 6, 3 with the stride on the 3x3 conv, convs without
    bias, batch norm after every conv, a 1x1 projection where the shape changes."""
    net = Graph()
    x = net.conv_bn(64, 7, 2)
    x = net.add(MaxPool2D(3, 2, padding=1))
    channels = 64
    for stage, (width, blocks, stride) in enumerate(((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)), start=1):
        for block in range(blocks):
            net.block = f"layer{stage}.{block}"
            step = stride if block == 0 else 1
            shortcut = x
            if block == 0 and (step != 1 or channels != width * 4):
                shortcut = net.conv_bn(width * 4, 1, step, source=x, activation=None)
            y = net.conv_bn(width, 1, source=x)
            y = net.conv_bn(width, 3, step)
            y = net.conv_bn(width * 4, 1, activation=None)
            x = net.add(ReLU(), net.add(Add(), y, shortcut))
            channels = width * 4
    net.block = ""
    net.add(GlobalAvgPool(), x)
    net.add(Dense(1000))
    return net.spec("resnet50", (224, 224, 3), "cross_entropy", "ResNet-50 v1.5, 224x224x3, 1000 classes", batch=8)


# torchvision's inverted-residual settings: expansion t, channels c, repeats n, first stride s
MOBILENETV2_SETTINGS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                        (6, 320, 1, 1))


def mobilenetv2() -> ModelSpec:
    """MobileNetV2 at width 1.0 (torchvision's layout): inverted residuals with depthwise 3x3 convs and ReLU6,
    a linear bottleneck, dropout 0.2 before the classifier."""
    net = Graph()
    x = net.conv_bn(32, 3, 2, activation=ReLU6)
    channels = 32
    for stage, (expansion, width, repeats, stride) in enumerate(MOBILENETV2_SETTINGS, start=1):
        for repeat in range(repeats):
            net.block = f"features{stage}.{repeat}"
            step = stride if repeat == 0 else 1
            hidden = channels * expansion
            y = net.conv_bn(hidden, 1, source=x, activation=ReLU6) if expansion != 1 else x
            y = net.conv_bn(hidden, 3, step, groups=hidden, source=y, activation=ReLU6)
            y = net.conv_bn(width, 1, activation=None)
            x = net.add(Add(), x, y) if step == 1 and channels == width else y
            channels = width
    net.block = ""
    net.conv_bn(1280, 1, source=x, activation=ReLU6)
    net.add(GlobalAvgPool())
    net.add(Dropout(0.2))
    net.add(Dense(1000))
    return net.spec("mobilenetv2", (224, 224, 3), "cross_entropy", "MobileNetV2 width 1.0, 224x224x3, 1000 classes",
                    batch=8)


def densenet121() -> ModelSpec:
    """DenseNet-121 (torchvision's layout): dense blocks 6, 12, 24, 16 of BN-ReLU-conv1x1(4k)-BN-ReLU-conv3x3(k),
    growth k = 32, each layer reading the concatenation of every earlier feature map of its block; transitions
    halve the channels (BN-ReLU-conv1x1) and the size (2x2 average pool)."""
    growth, net = 32, Graph()
    net.conv_bn(64, 7, 2)
    x = net.add(MaxPool2D(3, 2, padding=1))
    channels = 64
    for number, layers in enumerate((6, 12, 24, 16), start=1):
        features = [x]
        for layer in range(layers):
            net.block = f"denseblock{number}.layer{layer + 1}"
            joined = net.add(Concat(), *features) if len(features) > 1 else features[0]
            net.add(BatchNorm(), joined)
            net.add(ReLU())
            net.add(Conv2D(4 * growth, 1, padding=0, bias=False))
            net.add(BatchNorm())
            net.add(ReLU())
            features.append(net.add(Conv2D(growth, 3, padding=1, bias=False)))
        channels += layers * growth
        net.block = f"transition{number}" if number < 4 else ""
        x = net.add(Concat(), *features)
        net.add(BatchNorm())
        x = net.add(ReLU())
        if number < 4:
            channels //= 2
            net.add(Conv2D(channels, 1, padding=0, bias=False))
            x = net.add(AvgPool2D(2))
    net.block = ""
    net.add(GlobalAvgPool(), x)
    net.add(Dense(1000))
    return net.spec("densenet121", (224, 224, 3), "cross_entropy", "DenseNet-121, 224x224x3, 1000 classes", batch=8)


CATALOGUE: dict[str, Callable[[], ModelSpec]] = {
    "keras200m": keras200m,
    "keras-small": keras_small,
    "vgg16": vgg16,
    "heatmap68": heatmap68,
    "probe-deep": probe_deep,
    "resnet50": resnet50,
    "mobilenetv2": mobilenetv2,
    "densenet121": densenet121,
    "probe": probe,
    "probe-conv": probe_conv,
    "probe-dense": probe_dense,
    "probe-norm": probe_norm,
    "probe-pool": probe_pool,
}
FAMILIES: dict[str, tuple[re.Pattern, Callable[[re.Match], ModelSpec]]] = {
    "plain-N": (re.compile(r"plain-(\d+)"), lambda match: plain(int(match.group(1)))),
    "probe-kind-K[-sameN]": (re.compile(r"probe-kind-([a-z]+)(?:-same(\d+))?"),
                             lambda match: probe_kind(match.group(1), int(match.group(2) or 0))),
}
EXAMPLE_FAMILY_MEMBERS = ("plain-8",)


def model_names() -> list[str]:
    """The names a user may give, families shown by their pattern."""
    return [*CATALOGUE, *FAMILIES]


def get_model(name: str) -> ModelSpec:
    if name in CATALOGUE:
        return CATALOGUE[name]()
    for pattern, build in FAMILIES.values():
        match = pattern.fullmatch(name)
        if match and all(int(number) > 0 for number in match.groups() if number and number.isdigit()):
            return build(match)
    raise SpecError(f"unknown model {name!r}; valid: {', '.join(model_names())}")


MODEL_FILE_SUFFIXES = (".json", ".keras", ".onnx")


# A model file at another input size, as `--size` names it: `unet.onnx@512x512`
AT_SIZE = re.compile(r"(?P<path>.+)@(?P<height>[0-9]+)x(?P<width>[0-9]+)")


def sized_name(path: str, height: int, width: int) -> str:
    """The name of model file `path` rebuilt at `height` x `width` (`--size`): a model of its own in every record."""
    return f"{path}@{height}x{width}"


def is_model_file(name: str) -> bool:
    """Whether a model name is a file's path (`bench --models resnet50,my_net.keras`), at its own size or another
    (`sized_name`): it has a model file's suffix or names a folder. No catalogue name does either."""
    found = AT_SIZE.fullmatch(name)
    path = found["path"] if found else name
    return path.endswith(MODEL_FILE_SUFFIXES) or os.sep in path


def load_model(name: str) -> ModelSpec:
    """A catalogue name or, where a name goes, a model file (a spec, a Keras or an ONNX file), at another input size
    where the name says one (`sized_name`)."""
    if not is_model_file(name):
        return get_model(name)
    found = AT_SIZE.fullmatch(name)
    if found and not os.path.exists(name):
        return at_input_size(load_spec_file(found["path"]), int(found["height"]), int(found["width"]))
    return load_spec_file(name)


def listed_models() -> list[ModelSpec]:
    """The catalogue as shown and tested: every named model and one member of each family."""
    return [get_model(name) for name in (*CATALOGUE, *EXAMPLE_FAMILY_MEMBERS)]
