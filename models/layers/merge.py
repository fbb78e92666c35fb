"""Merges: layers of two or more inputs and no weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import Shape, SpecError


class _Merge:
    """A layer of two or more inputs and no weights."""

    arity: ClassVar[tuple[int, int | None]] = (2, None)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class Add(_Merge):
    """The element-wise sum of same-shaped inputs: a residual connection."""

    kind: ClassVar[str] = "add"

    def output_shape(self, *shapes: Shape) -> Shape:
        if len(set(shapes)) != 1:
            raise SpecError(f"add needs inputs of one shape, got {', '.join(map(str, shapes))}")
        return shapes[0]


@dataclass(frozen=True)
class Concat(_Merge):
    """Joins inputs along the channel (last) axis, in the order named; the other axes must agree."""

    kind: ClassVar[str] = "concat"

    def output_shape(self, *shapes: Shape) -> Shape:
        if len({shape[:-1] for shape in shapes}) != 1:
            raise SpecError(f"concat needs inputs that differ only in channels, got {', '.join(map(str, shapes))}")
        return (*shapes[0][:-1], sum(shape[-1] for shape in shapes))


@dataclass(frozen=True)
class Multiply(_Merge):
    """The element-wise product, each axis equal or 1 and broadcast (squeeze-and-excite: (H, W, C) by (1, 1, C))."""

    kind: ClassVar[str] = "multiply"

    def output_shape(self, *shapes: Shape) -> Shape:
        if len({len(shape) for shape in shapes}) != 1 or any(len({size for size in sizes} - {1}) > 1
                                                              for sizes in zip(*shapes, strict=True)):
            raise SpecError(f"multiply needs inputs of one rank whose sizes agree or are 1, got "
                            f"{', '.join(map(str, shapes))}")
        return tuple(max(sizes) for sizes in zip(*shapes, strict=True))



@dataclass(frozen=True)
class Subtract(_Merge):
    """The first input less the second, of one shape: PoolFormer's token mixer, pool(x) - x."""

    arity: ClassVar[tuple[int, int | None]] = (2, 2)
    kind: ClassVar[str] = "subtract"

    def output_shape(self, *shapes: Shape) -> Shape:
        if len(set(shapes)) != 1:
            raise SpecError(f"subtract needs inputs of one shape, got {', '.join(map(str, shapes))}")
        return shapes[0]
