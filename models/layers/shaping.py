"""Resizes, paddings and reshapes: the same values moved, repeated or cut, nothing learned."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import (
    OneInput,
    SameShape,
    Shape,
    SpecError,
    at_most,
    image_shape,
    pixels,
    positive,
    shown,
)


@dataclass(frozen=True)
class Flatten(OneInput):
    """Flattens in channels-last order; frameworks that compute channels-first permute first."""

    kind: ClassVar[str] = "flatten"

    def output_shape(self, shape: Shape) -> Shape:
        return (math.prod(shape),)


@dataclass(frozen=True)
class _Sides(OneInput):
    """Pixels on each side of an image, each checked alike: what a zero padding adds or a crop removes."""

    top: int = 0
    bottom: int = 0
    left: int = 0
    right: int = 0
    kind: ClassVar[str]

    def __post_init__(self) -> None:
        for side in ("top", "bottom", "left", "right"):
            pixels(getattr(self, side), f"{self.kind}.{side}")


@dataclass(frozen=True)
class ZeroPad2D(_Sides):
    """Zeros around an image, per side: the padding a conv or pool cannot take itself (uneven, as EfficientNet's
    ((0, 1), (0, 1)) before a stride-2 conv)."""

    kind: ClassVar[str] = "zeropad2d"

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        return (at_most(h + self.top + self.bottom, "zeropad2d's height"),
                at_most(w + self.left + self.right, "zeropad2d's width"), c)


PAD_MODES = ("reflect", "replicate")


@dataclass(frozen=True)
class Pad2D(_Sides):
    """An image's edge continued per side, by `mode`: "reflect" mirrors it without repeating the edge pixel (torch's
    ReflectionPad2d, ONNX's Pad mode reflect: timm's blur pools), "replicate" repeats the edge pixel (torch's
    ReplicationPad2d, ONNX's mode edge). A reflection takes fewer pixels than the side has."""

    mode: str = "reflect"
    kind: ClassVar[str] = "pad2d"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in PAD_MODES:
            raise SpecError(f"pad2d.mode must be one of {', '.join(PAD_MODES)}, got {shown(self.mode)}")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        if self.mode == "reflect" and (max(self.top, self.bottom) >= h or max(self.left, self.right) >= w):
            raise SpecError(f"pad2d reflects {self.top}, {self.bottom}, {self.left}, {self.right} pixels (top, bottom, "
                            f"left, right) of an image of {h} by {w}: a reflection takes fewer than the side has")
        return (at_most(h + self.top + self.bottom, "pad2d's height"), at_most(w + self.left + self.right,
                                                                              "pad2d's width"), c)


@dataclass(frozen=True)
class Crop2D(_Sides):
    """Pixels cut off an image's sides: NASNet's one-pixel shift (a zero row and column padded after, one cropped
    before) that moves a stride-2 pool's windows onto the odd pixels."""

    kind: ClassVar[str] = "crop2d"

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        if self.top + self.bottom >= h or self.left + self.right >= w:
            raise SpecError(f"crop2d removes {self.top} + {self.bottom} of {h} rows or {self.left} + {self.right} of "
                            f"{w} columns, leaving none")
        return h - self.top - self.bottom, w - self.left - self.right, c


@dataclass(frozen=True)
class ChannelSlice(OneInput):
    """Channels start to stop of an image, (H, W, stop - start): one half of ShuffleNetV2's chunk in two (a spec
    layer has one output, so a split is one slice per part, each reading the same input)."""

    start: int
    stop: int
    kind: ClassVar[str] = "channel_slice"

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 0:
            raise SpecError(f"channel_slice.start must be a channel >= 0, got {shown(self.start)}")
        positive(self.stop, "channel_slice.stop")
        if self.stop <= self.start:
            raise SpecError(f"channel_slice.stop must be past its start {self.start}, got {self.stop}")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        if self.stop > c:
            raise SpecError(f"channel_slice stops at channel {self.stop} of an image of {c}")
        return h, w, self.stop - self.start


@dataclass(frozen=True)
class ChannelShuffle(SameShape):
    """An image's channels read as (groups, C / groups) and written transposed, output channel j * groups + i
    being input channel i * C / groups + j: ShuffleNet's mixing of its branches' channels."""

    groups: int
    kind: ClassVar[str] = "channel_shuffle"

    def __post_init__(self) -> None:
        positive(self.groups, "channel_shuffle.groups")

    def output_shape(self, shape: Shape) -> Shape:
        _, _, c = image_shape(shape, self.kind)
        if c % self.groups:
            raise SpecError(f"channel_shuffle of {c} channels into {self.groups} groups: they do not divide")
        return shape


@dataclass(frozen=True)
class Reshape(OneInput):
    """The same values in a new shape (without the batch axis), read in channels-last order: (C,) to (1, 1, C)
    before a squeeze-and-excite multiply."""

    shape: tuple[int, ...]
    kind: ClassVar[str] = "reshape"

    def __post_init__(self) -> None:
        if not isinstance(self.shape, (list, tuple)) or len(self.shape) not in (1, 3):
            raise SpecError(f"reshape.shape must be a list of 1 or 3 sizes, got {shown(self.shape)}")
        for size in self.shape:
            positive(size, "reshape.shape entries")
        object.__setattr__(self, "shape", tuple(self.shape))  # JSON gives a list; a frozen layer keeps a tuple

    def output_shape(self, shape: Shape) -> Shape:
        if math.prod(shape) != math.prod(self.shape):
            raise SpecError(f"reshape of {shape} to {self.shape} changes the number of values")
        return self.shape



SPACE_TO_DEPTH_ORDERS = ("block_major", "channel_major")


@dataclass(frozen=True)
class SpaceToDepth(OneInput):
    """Each `block` x `block` tile of pixels folded into the channels: (H / block, W / block, block^2 x C). The
    channels' order: `block_major`, the tile's position outer and the channel inner (ONNX's SpaceToDepth,
    TensorFlow's space_to_depth), or `channel_major`, the channel outer (torch's pixel_unshuffle)."""

    block: int = 2
    order: str = "block_major"
    kind: ClassVar[str] = "space_to_depth"

    def __post_init__(self) -> None:
        positive(self.block, "space_to_depth.block")
        if self.order not in SPACE_TO_DEPTH_ORDERS:
            raise SpecError(f"space_to_depth.order must be one of {', '.join(SPACE_TO_DEPTH_ORDERS)}, got "
                            f"{shown(self.order)}")

    @property
    def permutation(self) -> tuple[int, ...]:
        """How the axes (H / block, block, W / block, block, C) are transposed before they are joined."""
        return (0, 2, 1, 3, 4) if self.order == "block_major" else (0, 2, 4, 1, 3)

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = image_shape(shape, self.kind)
        if h % self.block or w % self.block:
            raise SpecError(f"space_to_depth of block {self.block} needs a height and width it divides, got {h}x{w}")
        return h // self.block, w // self.block, at_most(c * self.block**2, "space_to_depth's channels")
