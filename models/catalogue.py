"""The named models. Adding a model is adding one builder here."""

from __future__ import annotations

import re
from collections.abc import Callable

from models.spec import Conv2D, Dense, Flatten, MaxPool2D, ModelSpec, ReLU, SpecError


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
    the estimate adds (suites.constants).
    """
    layers = (Conv2D(2), ReLU(), MaxPool2D(2), Flatten(), Dense(1))
    return ModelSpec("probe", (8, 8, 1), layers, "mse", default_batch=1,
                     description="overhead probe: one small layer of each kind, for the measured constants")


def plain(depth: int) -> ModelSpec:
    """Depth family for sweeps: `depth` 3x3 convs with ReLU at width 64 on 32x32, a small head."""
    body = tuple(layer for _ in range(depth) for layer in (Conv2D(64), ReLU()))
    layers = (*body, MaxPool2D(4), Flatten(), Dense(10))
    return ModelSpec(f"plain-{depth}", (32, 32, 3), layers, "cross_entropy", default_batch=8,
                     description=f"{depth} 3x3 convs of width 64 with ReLU on 32x32x3")


CATALOGUE: dict[str, Callable[[], ModelSpec]] = {
    "keras200m": keras200m,
    "keras-small": keras_small,
    "vgg16": vgg16,
    "heatmap68": heatmap68,
    "probe": probe,
}
FAMILIES = {"plain-N": (re.compile(r"plain-(\d+)"), plain)}
EXAMPLE_FAMILY_MEMBERS = ("plain-8",)


def model_names() -> list[str]:
    """The names a user may give, families shown by their pattern."""
    return [*CATALOGUE, *FAMILIES]


def get_model(name: str) -> ModelSpec:
    if name in CATALOGUE:
        return CATALOGUE[name]()
    for pattern, build in FAMILIES.values():
        match = pattern.fullmatch(name)
        if match and int(match.group(1)) > 0:
            return build(int(match.group(1)))
    raise SpecError(f"unknown model {name!r}; valid: {', '.join(model_names())}")


def listed_models() -> list[ModelSpec]:
    """The catalogue as shown and tested: every named model and one member of each family."""
    return [get_model(name) for name in (*CATALOGUE, *EXAMPLE_FAMILY_MEMBERS)]
