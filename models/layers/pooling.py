"""Pooling: a window over an image summarized, by its maximum or its mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import (
    OneInput,
    Shape,
    SpecError,
    axes_size,
    conv_output_size,
    flag,
    image_shape,
    per_axis,
    positive,
    window_output,
)


@dataclass(frozen=True)
class _Pool2D(OneInput):
    """A pooling window over an image: `pool` pixels square, moved by `stride` (0: by `pool`), with `padding` pixels
    per side; each subclass names its `kind` and what its padding counts as. `ceil_mode` (torch's, ONNX's) rounds
    the output size up: a last window that starts inside the input (or its leading padding) hangs over its far edge
    (`overhang`), where the missing pixels count as the padding does, or not at all."""

    pool: int = 2
    stride: int = 0  # 0 means "same as pool", Keras's and torch's default
    padding: int = 0
    ceil_mode: bool = False
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        positive(self.pool, f"{self.kind}.pool")
        if self.stride:
            positive(self.stride, f"{self.kind}.stride")
        padding = self.padding
        if isinstance(padding, bool) or not isinstance(padding, int) or not 0 <= padding <= self.pool // 2:
            raise SpecError(f"{self.kind}.padding must be pixels from 0 to half the pool, got {self.padding!r}")
        flag(self.ceil_mode, f"{self.kind}.ceil_mode")

    @property
    def step(self) -> int:
        return self.stride or self.pool

    def _size(self, size: int) -> int:
        out = conv_output_size(size, self.pool, self.step, self.padding)
        if self.ceil_mode and (size + 2 * self.padding - self.pool) % self.step and out * self.step < size + \
                self.padding:
            out += 1  # torch's rule: one more window, if it starts inside the input or its leading padding
        return out

    def overhang(self, shape: Shape) -> tuple[int, int]:
        """The pixels the last window reaches past the padded input, below and to the right (0 but in ceil_mode)."""
        return tuple(max(0, (self._size(size) - 1) * self.step + self.pool - size - 2 * self.padding)
                     for size in image_shape(shape, self.kind)[:2])  # type: ignore[return-value]

    def sides(self, shape: Shape) -> tuple[tuple[int, int], tuple[int, int]]:
        """The pixels each window reaches beyond the input: (top, bottom), (left, right), the padding and overhang."""
        below, right = self.overhang(shape)
        return (self.padding, self.padding + below), (self.padding, self.padding + right)

    def output_shape(self, shape: Shape) -> Shape:
        h, w, channels = image_shape(shape, self.kind)
        window_output(shape, self.kind, self.pool, self.step, self.padding)  # the floor's own check: it fits
        return (self._size(h), self._size(w), channels)


@dataclass(frozen=True)
class MaxPool2D(_Pool2D):
    """`padding` pixels per side, and a ceil_mode window's overhang, count as minus infinity (torch's rule): they
    never win the max."""

    kind: ClassVar[str] = "maxpool2d"


@dataclass(frozen=True)
class AvgPool2D(_Pool2D):
    """`padding` pixels per side are zeros that count in the mean (torch's count_include_pad, Keras's ZeroPadding2D
    before the pool), or with `count_include_pad` false are left out of it, as a ceil_mode window's overhang always
    is (torch's count_include_pad=False; Keras's 'same', whose odd pixel after is that overhang)."""

    count_include_pad: bool = True
    kind: ClassVar[str] = "avgpool2d"

    def __post_init__(self) -> None:
        super().__post_init__()
        flag(self.count_include_pad, "avgpool2d.count_include_pad")
        if self.ceil_mode and self.count_include_pad:
            raise SpecError("avgpool2d.ceil_mode needs count_include_pad false (with it, torch divides a last window "
                            "by its size clipped to the padded input: a third rule the spec does not have)")


@dataclass(frozen=True)
class GlobalAvgPool(OneInput):
    """The mean over height and width: an image becomes one value per channel, (C,) or with `keepdims` (1, 1, C)."""

    keepdims: bool = False
    kind: ClassVar[str] = "global_avg_pool"

    def __post_init__(self) -> None:
        flag(self.keepdims, "global_avg_pool.keepdims")

    def output_shape(self, shape: Shape) -> Shape:
        channels = image_shape(shape, self.kind)[2]
        return (1, 1, channels) if self.keepdims else (channels,)


@dataclass(frozen=True)
class AdaptiveAvgPool2D(OneInput):
    """The mean over windows that tile an image into `size` (an int, or [height, width]) whatever its size, torch's
    AdaptiveAvgPool2d: output row i averages input rows floor(i H / oh) to ceil((i + 1) H / oh), uneven windows that
    overlap where oh does not divide H, and repeat rows where oh > H (VGG's and AlexNet's head at a small input)."""

    size: int | tuple[int, int]
    kind: ClassVar[str] = "adaptive_avgpool2d"

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", axes_size(self.size, "adaptive_avgpool2d.size", 1))

    def output_shape(self, shape: Shape) -> Shape:
        return (*per_axis(self.size), image_shape(shape, self.kind)[2])

    def averaging(self, shape: Shape) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]:
        """Per axis, the (out, in) matrix whose row i holds 1 / its window's size over the window: the pool is
        A_h x A_w^T per channel, what JAX computes and the ONNX importer checks a decomposed pool against."""
        return tuple(tuple(tuple(1 / (end - start) if start <= at < end else 0.0 for at in range(size))
                           for start, end in ((i * size // out, -(-(i + 1) * size // out)) for i in range(out)))
                     for size, out in zip(image_shape(shape, self.kind)[:2], per_axis(self.size),
                                          strict=True))  # type: ignore[return-value]

