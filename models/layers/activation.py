"""Activations: one value from one value, the same shape out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import SameShape, Shape, SpecError, flag, is_real, positive_number, shown


@dataclass(frozen=True)
class ReLU(SameShape):
    kind: ClassVar[str] = "relu"


@dataclass(frozen=True)
class ReLU6(SameShape):
    kind: ClassVar[str] = "relu6"


@dataclass(frozen=True)
class SiLU(SameShape):
    """x * sigmoid(x) (Keras's swish)."""

    kind: ClassVar[str] = "silu"


@dataclass(frozen=True)
class Sigmoid(SameShape):
    kind: ClassVar[str] = "sigmoid"


@dataclass(frozen=True)
class HardSigmoid(SameShape):
    """relu6(x + 3) / 6, Keras 3's, JAX's and torch's hard sigmoid (ONNX's HardSigmoid at alpha 1/6, beta 0.5; not
    Keras 2's nor ONNX's default, 0.2 x + 0.5, which the importers refuse)."""

    kind: ClassVar[str] = "hard_sigmoid"


@dataclass(frozen=True)
class HardSwish(SameShape):
    """x * relu6(x + 3) / 6 (Keras's hard_silu, torch's Hardswish, ONNX's HardSwish): MobileNetV3's activation."""

    kind: ClassVar[str] = "hard_swish"


@dataclass(frozen=True)
class GELU(SameShape):
    """x * Phi(x) with the exact normal CDF (torch's and Keras's default), or its tanh approximation."""

    approximate: bool = False
    kind: ClassVar[str] = "gelu"

    def __post_init__(self) -> None:
        flag(self.approximate, "gelu.approximate")


@dataclass(frozen=True)
class LeakyReLU(SameShape):
    """x where x >= 0, else negative_slope * x: torch's LeakyReLU (its default slope 0.01, ONNX's LeakyRelu alpha),
    Keras's LeakyReLU (its default 0.3) and ReLU(negative_slope=...). The slope is at least 0, as Keras requires."""

    negative_slope: float = 0.01
    kind: ClassVar[str] = "leaky_relu"

    def __post_init__(self) -> None:
        if not is_real(self.negative_slope) or self.negative_slope < 0:
            raise SpecError(f"leaky_relu.negative_slope must be a number >= 0, got {shown(self.negative_slope)}")


@dataclass(frozen=True)
class ELU(SameShape):
    """x where x > 0, else alpha * (exp(x) - 1): torch's, Keras's and ONNX's Elu (alpha 1 by default); alpha is
    positive, as the ELU paper's (the output then tells the slope: a backward may keep it instead of the input)."""

    alpha: float = 1.0
    kind: ClassVar[str] = "elu"

    def __post_init__(self) -> None:
        positive_number(self.alpha, "elu.alpha")


@dataclass(frozen=True)
class Softplus(SameShape):
    """log(1 + exp(x)): Keras's, JAX's and ONNX's softplus, and torch's at beta 1 (its threshold 20, past which it
    returns x, differs from it by less than float32 resolves)."""

    kind: ClassVar[str] = "softplus"


@dataclass(frozen=True)
class Mish(SameShape):
    """x * tanh(softplus(x)) (torch's Mish, Keras's and JAX's mish, ONNX's Mish): CSP nets' activation."""

    kind: ClassVar[str] = "mish"



@dataclass(frozen=True)
class PReLU(SameShape):
    """x where x >= 0, else slope * x, with a learned slope per channel (the last axis), or one slope for every value
    where `shared`: torch's PReLU (num_parameters C, or 1, its default and MONAI's), Keras's PReLU (shared over
    height and width, or over every axis), ONNX's PRelu. The slopes start at 0.25, torch's start."""

    shared: bool = False
    start: ClassVar[float] = 0.25  # every framework's first slope
    kind: ClassVar[str] = "prelu"

    def __post_init__(self) -> None:
        flag(self.shared, "prelu.shared")

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"slope": (1,) if self.shared else (shape[-1],)}
