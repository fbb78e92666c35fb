"""Normalizations and per-channel scales: a tensor's values brought to a scale, with learned or fixed statistics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import (
    SameShape,
    Shape,
    SpecError,
    flag,
    image_shape,
    is_real,
    number,
    positive,
    positive_number,
    shown,
)


@dataclass(frozen=True)
class BatchNorm(SameShape):
    """Batch normalization over the channel axis, in torch's convention: `momentum` is the weight of the new batch's
    statistic in the running one (Keras's momentum is 1 minus it); `epsilon` is added to the variance. `scale` and
    `center` (Keras's names): whether it learns a scale and an offset (InceptionV3's learn no scale)."""

    epsilon: float = 1e-5
    momentum: float = 0.1
    scale: bool = True
    center: bool = True
    kind: ClassVar[str] = "batchnorm"

    def __post_init__(self) -> None:
        positive_number(self.epsilon, "batchnorm.epsilon")
        if not is_real(self.momentum) or not 0 < self.momentum <= 1:
            raise SpecError(f"batchnorm.momentum must be a number in (0, 1], got {shown(self.momentum)}")
        flag(self.scale, "batchnorm.scale")
        flag(self.center, "batchnorm.center")

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return ({"scale": (shape[-1],)} if self.scale else {}) | ({"offset": (shape[-1],)} if self.center else {})

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"mean": (shape[-1],), "variance": (shape[-1],)}


@dataclass(frozen=True)
class LayerNorm(SameShape):
    """Normalizes each position over its channels (the last axis), then scales and shifts per channel; the variance
    is the biased one, `epsilon` added to it."""

    epsilon: float = 1e-5
    kind: ClassVar[str] = "layernorm"

    def __post_init__(self) -> None:
        positive_number(self.epsilon, "layernorm.epsilon")

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"scale": (shape[-1],), "offset": (shape[-1],)}


@dataclass(frozen=True)
class LayerScale(SameShape):
    """x * scale, a learned scale per channel (the last axis): ConvNeXt's layer scale on each block's branch. Its
    scale is trainable and starts at 1, as a norm's does (ConvNeXt starts it near 0; an imported net loads its own)."""

    kind: ClassVar[str] = "layerscale"

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"scale": (shape[-1],)}


@dataclass(frozen=True)
class Rescale(SameShape):
    """x * scale + offset, constants of the net (Keras's Rescaling: pixels from [0, 255] to [0, 1])."""

    scale: float = 1.0
    offset: float = 0.0
    kind: ClassVar[str] = "rescale"

    def __post_init__(self) -> None:
        for value, what in ((self.scale, "rescale.scale"), (self.offset, "rescale.offset")):
            number(value, what)


@dataclass(frozen=True)
class Normalize(SameShape):
    """(x - mean) / max(sqrt(variance), 1e-7) per channel, with the mean and variance fixed state (Keras's
    Normalization; `count`, the examples its adapt() saw, is state it holds too, so it is counted). Or, given
    `mean` and `variance` per channel, those constants: no state (Keras's Normalization built with them, as the
    preprocessing of ConvNeXt and EfficientNetV2 is)."""

    mean: tuple[float, ...] = ()
    variance: tuple[float, ...] = ()
    least_deviation: ClassVar[float] = 1e-7  # Keras's backend.epsilon(), the divisor's floor
    kind: ClassVar[str] = "normalize"

    def __post_init__(self) -> None:
        for what in ("mean", "variance"):
            values = getattr(self, what)
            if not isinstance(values, (list, tuple)) or not all(is_real(value) for value in values):
                raise SpecError(f"normalize.{what} must be a list of numbers, one per channel, got {values!r}")
            object.__setattr__(self, what, tuple(float(value) for value in values))  # JSON gives a list
        if len(self.mean) != len(self.variance) or any(value < 0 for value in self.variance):
            raise SpecError("normalize.mean and normalize.variance must be given together, one per channel, the "
                            "variances at least 0")

    def output_shape(self, shape: Shape) -> Shape:
        if self.mean and len(self.mean) != shape[-1]:
            raise SpecError(f"normalize holds {len(self.mean)} means for {shape[-1]} channels")
        return shape

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {} if self.mean else {"mean": (shape[-1],), "variance": (shape[-1],), "count": ()}



class _GroupedNorm(SameShape):
    """A norm over groups of an image's channels, each example's apart: no running statistics, so training and
    inference compute alike; `affine` learns a scale and an offset per channel."""

    affine: bool
    kind: ClassVar[str]

    def groups_of(self, shape: Shape) -> int:
        """How many groups an image of `shape` is normalized in."""
        raise NotImplementedError

    def output_shape(self, shape: Shape) -> Shape:
        channels = image_shape(shape, self.kind)[2]
        if channels % self.groups_of(shape):
            raise SpecError(f"{self.kind} of {channels} channels in {self.groups_of(shape)} groups: they do not divide")
        return shape

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"scale": (shape[-1],), "offset": (shape[-1],)} if self.affine else {}


@dataclass(frozen=True)
class GroupNorm(_GroupedNorm):
    """Each example's channels in `groups` groups, each normalized over its pixels and its channels (the biased
    variance, `epsilon` added), then scaled and shifted per channel where `affine`: torch's GroupNorm (PoolFormer's
    GroupNorm(1) normalizes a whole image), Keras's GroupNormalization, ONNX's GroupNormalization."""

    groups: int
    epsilon: float = 1e-5
    affine: bool = True
    kind: ClassVar[str] = "groupnorm"

    def __post_init__(self) -> None:
        positive(self.groups, "groupnorm.groups")
        positive_number(self.epsilon, "groupnorm.epsilon")
        flag(self.affine, "groupnorm.affine")

    def groups_of(self, shape: Shape) -> int:
        return self.groups


@dataclass(frozen=True)
class InstanceNorm(_GroupedNorm):
    """Each example's channels normalized one by one over their pixels, a group norm of a channel a group: torch's
    InstanceNorm2d (affine false by default; its running statistics, off by default, the importers refuse), ONNX's
    InstanceNormalization (which always scales), Keras's GroupNormalization(groups=-1)."""

    epsilon: float = 1e-5
    affine: bool = False
    kind: ClassVar[str] = "instancenorm"

    def __post_init__(self) -> None:
        positive_number(self.epsilon, "instancenorm.epsilon")
        flag(self.affine, "instancenorm.affine")

    def groups_of(self, shape: Shape) -> int:
        return image_shape(shape, self.kind)[2]
