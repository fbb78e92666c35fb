"""A dense layer and the dropout that goes with it: layers of any input shape's last axis."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import OneInput, SameShape, Shape, SpecError, flag, fraction, positive


@dataclass(frozen=True)
class Dense(OneInput):
    units: int
    bias: bool = True
    kind: ClassVar[str] = "dense"

    def __post_init__(self) -> None:
        positive(self.units, "dense.units")
        flag(self.bias, "dense.bias")

    def output_shape(self, shape: Shape) -> Shape:
        if len(shape) != 1:
            raise SpecError(f"dense needs a flat input (add a flatten layer), got shape {shape}")
        return (self.units,)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        kernel = {"kernel": (shape[0], self.units)}
        return kernel | ({"bias": (self.units,)} if self.bias else {})


@dataclass(frozen=True)
class Dropout(SameShape):
    """Zeroes `rate` of the values in training (the rest scaled by 1 / (1 - rate)); the identity in inference.
    `per_example` draws one value per example for all its values (Keras's noise_shape (None, 1, 1, 1): the
    stochastic depth of EfficientNet's blocks)."""

    rate: float = 0.5
    per_example: bool = False
    kind: ClassVar[str] = "dropout"

    def __post_init__(self) -> None:
        fraction(self.rate, "dropout.rate")
        flag(self.per_example, "dropout.per_example")

