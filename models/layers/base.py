"""What every layer kind shares: the checks of its options (each error one line for the user), the sizes of a
window slid over an image, and the base classes of a layer of one input."""

from __future__ import annotations

import math
import sys
from typing import ClassVar

Shape = tuple[int, ...]

PADDINGS = ("same", "valid")
INTERPOLATIONS = ("nearest", "bilinear")
# The largest size a spec may give (an axis, a count of units or filters, a window, a batch): the largest 32-bit index,
# what JAX and many GPU kernels index with. Far beyond any net, it keeps the estimate's byte counts within a float's.
MAX_SIZE = 2**31 - 1
# The most bytes of JSON a spec or a Keras config is read from (a .keras file's config.json by its declared size):
# keras.applications' largest, NASNetLarge's, is 1.0 MB; parsed, JSON takes several times its text in memory.
MAX_CONFIG_BYTES = 64 * 2**20


class SpecError(ValueError):
    """A spec that cannot describe a net; its message is one line meant for the user."""


def positive(value: object, what: str) -> int:
    """A size; the importers check a file's value with it where they compute with it before it is a layer's."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{what} must be a positive integer, got {shown(value)}")
    return at_most(value, what)


def pixels(value: object, what: str) -> int:
    """Pixels on a side of an image, 0 or more; the importers check a file's value with it where they compute with
    it before it is a layer's."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{what} must be pixels >= 0, got {shown(value)}")
    return at_most(value, what)


def at_most(value: int, what: str) -> int:
    if value > MAX_SIZE:
        raise SpecError(f"{what} must be at most {MAX_SIZE:,} (2**31 - 1), got {shown(value)}")
    return value


def shown(value: object) -> str:
    """A value for a one-line message: a number of hundreds of digits by its length."""
    text = repr(value)
    if len(text) <= 40 or not isinstance(value, int):
        return text
    return f"a number of {len(text):,} digits"


def is_real(value: object) -> bool:
    """Whether a value is a number a float holds: a file may give a bool, NaN, an infinity or an integer of hundreds
    of digits where a number belongs."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and \
        -sys.float_info.max <= value <= sys.float_info.max


def number(value: object, what: str) -> float:
    """A finite number; the importers check a file's value with it where they compute with it before it is a
    layer's (Keras's batch norm momentum, 1 minus the spec's)."""
    if not is_real(value):
        raise SpecError(f"{what} must be a finite number, got {shown(value)}")
    return float(value)


def fraction(value: object, what: str) -> float:
    if not is_real(value) or not 0 <= value < 1:
        raise SpecError(f"{what} must be a number in [0, 1), got {shown(value)}")
    return float(value)


def flag(value: object, what: str) -> None:
    """True or false, never a value read as one (a file's "no" is not true)."""
    if not isinstance(value, bool):
        raise SpecError(f"{what} must be true or false, got {shown(value)}")


def positive_number(value: object, what: str) -> None:
    if not is_real(value) or value <= 0:
        raise SpecError(f"{what} must be a positive number, got {shown(value)}")


def image_shape(shape: Shape, layer: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise SpecError(f"{layer} needs an image input (H, W, C), got shape {shape}")
    return shape  # type: ignore[return-value]


def conv_output_size(size: int, kernel: int, stride: int, padding: str | int) -> int:
    """Output length of a strided window: TensorFlow's rule for 'same'/'valid' (JAX shares it; torch is padded to
    match), torch's for an explicit padding on both sides."""
    if padding == "same":
        return math.ceil(size / stride)
    pad = 0 if padding == "valid" else int(padding)
    return (size + 2 * pad - kernel) // stride + 1


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """Padding (before, after) of TensorFlow's 'same': the odd pixel goes after."""
    total = max((conv_output_size(size, kernel, stride, "same") - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def per_axis(value: int | str | tuple[int, int]) -> tuple:
    """A size or padding for height and width: one value for both, or (height's, width's)."""
    return value if isinstance(value, tuple) else (value, value)


def axes_size(value: object, what: str, least: int) -> int | tuple[int, int]:
    """One integer of at least `least` for both axes, or [height, width] (two equal values are one)."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        height, width = (axes_size(each, what, least) for each in value)
        return height if height == width else (height, width)  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SpecError(f"{what} must be an integer >= {least}, or [height, width] of them, got {shown(value)}")
    return at_most(value, what)


def window_output(shape: Shape, kind: str, kernel: int | tuple[int, int], stride: int,
                   padding: str | int | tuple[int, int]) -> tuple[int, int]:
    h, w, _ = image_shape(shape, kind)
    out = tuple(conv_output_size(s, k, stride, p) for s, k, p in zip((h, w), per_axis(kernel), per_axis(padding),
                                                                       strict=True))
    if min(out) <= 0:
        raise SpecError(f"{kind} with window {kernel} does not fit input {shape}")
    return out  # type: ignore[return-value]


class OneInput:
    """A layer of one input; its parameters and statistics are none unless it says otherwise."""

    arity: ClassVar[tuple[int, int | None]] = (1, 1)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


class SameShape(OneInput):
    """A layer of one input whose output has the input's shape (an activation, a normalization, dropout)."""

    def output_shape(self, shape: Shape) -> Shape:
        return shape

