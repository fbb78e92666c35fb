"""Resizes: an image's height and width changed by repeating or interpolating its pixels, nothing learned."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import (
    INTERPOLATIONS,
    OneInput,
    Shape,
    SpecError,
    at_most,
    axes_size,
    flag,
    image_shape,
    is_real,
    per_axis,
    positive,
    shown,
)


@dataclass(frozen=True)
class Upsample2D(OneInput):
    """Height and width times `scale`: each pixel repeated (nearest) or interpolated with half-pixel centres
    (bilinear: torch's align_corners=False, Keras's and JAX's resize)."""

    scale: int = 2
    interpolation: str = "nearest"
    kind: ClassVar[str] = "upsample2d"

    def __post_init__(self) -> None:
        positive(self.scale, "upsample2d.scale")
        if self.interpolation not in INTERPOLATIONS:
            raise SpecError(f"upsample2d.interpolation must be one of {', '.join(INTERPOLATIONS)}, got "
                            f"{self.interpolation!r}")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        return (at_most(h * self.scale, "upsample2d's height"), at_most(w * self.scale, "upsample2d's width"), c)


def _float32(value: float) -> float:
    """`value` rounded to float32, the arithmetic torch's CPU kernels compute source pixels in: a nearest pixel's
    floor of 3 x (1 / 1.5) is 2 in float32 and 1 in float64."""
    return struct.unpack("f", struct.pack("f", value))[0]


@dataclass(frozen=True)
class Resize2D(OneInput):
    """Height and width resized to `size` (an int, or [height, width]) or by `scale` (a number, or [height's,
    width's]; the output floor(size x scale)), torch's F.interpolate: `nearest` takes the pixel at floor(out x step)
    (torch's legacy nearest, ONNX's asymmetric floor), `bilinear` interpolates between the two pixels around
    (out + 0.5) x step - 0.5, or with `align_corners` around out x (in - 1) / (out - 1), the corners' centres
    aligned (torch's align_corners=True: DeepLabV3+'s decoder). The step is 1 / scale where a scale is given, else
    in / out, as torch computes it, in float32."""

    size: int | tuple[int, int] | None = None
    scale: float | tuple[float, float] | None = None
    interpolation: str = "nearest"
    align_corners: bool = False
    kind: ClassVar[str] = "resize2d"

    def __post_init__(self) -> None:
        if (self.size is None) == (self.scale is None):
            raise SpecError("resize2d takes a size or a scale, one of them")
        if self.size is not None:
            object.__setattr__(self, "size", axes_size(self.size, "resize2d.size", 1))
        else:
            scales = tuple(self.scale) if isinstance(self.scale, (list, tuple)) and len(self.scale) == 2 else \
                (self.scale, self.scale)
            if not all(is_real(value) and 0 < value for value in scales):
                raise SpecError(f"resize2d.scale must be a positive number or [height's, width's], got "
                                f"{shown(self.scale)}")
            floats = tuple(float(value) for value in scales)
            object.__setattr__(self, "scale", floats[0] if floats[0] == floats[1] else floats)
        if self.interpolation not in INTERPOLATIONS:
            raise SpecError(f"resize2d.interpolation must be one of {', '.join(INTERPOLATIONS)}, got "
                            f"{shown(self.interpolation)}")
        flag(self.align_corners, "resize2d.align_corners")
        if self.align_corners and self.interpolation != "bilinear":
            raise SpecError("resize2d.align_corners goes with bilinear interpolation only (torch's rule)")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, channels = image_shape(shape, self.kind)
        if self.size is not None:
            return (*per_axis(self.size), channels)
        out = tuple(math.floor(size * scale) for size, scale in zip((h, w), per_axis(self.scale), strict=True))
        if min(out) <= 0:
            raise SpecError(f"resize2d by {self.scale} leaves no pixel of input {shape}")
        return (*(at_most(positive(size, "resize2d's output"), "resize2d's output") for size in out), channels)

    def interpolation_matrices(self, shape: Shape) -> tuple[tuple[tuple[float, ...], ...], ...]:
        """Per axis, the (out, in) matrix whose row i weighs the input pixels output pixel i is made of: the resize
        is A_h x A_w^T per channel, what JAX and Keras compute and the ONNX importer checks a Resize against."""
        out = self.output_shape(shape)[:2]
        scales = per_axis(self.scale) if self.scale is not None else (None, None)
        return tuple(self._matrix(size, wanted, scale) for size, wanted, scale in zip(
            image_shape(shape, self.kind)[:2], out, scales, strict=True))

    def _matrix(self, size: int, out: int, scale: float | None) -> tuple[tuple[float, ...], ...]:
        if self.align_corners:
            step = _float32((size - 1) / (out - 1)) if out > 1 else 0.0
        else:
            step = _float32(1 / scale if scale is not None else size / out)
        rows = []
        for at in range(out):
            row = [0.0] * size
            if self.interpolation == "nearest":
                row[min(math.floor(_float32(at * step)), size - 1)] = 1.0
            else:
                source = _float32(at * step) if self.align_corners else max(_float32(_float32(at + 0.5) * step - 0.5),
                                                                             0.0)
                first = min(math.floor(source), size - 1)
                second, weight = min(first + 1, size - 1), _float32(source - first)
                row[first] += 1.0 - weight
                row[second] += weight
            rows.append(tuple(row))
        return tuple(rows)
