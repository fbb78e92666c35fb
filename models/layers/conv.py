"""Convolutions: a kernel slid over an image."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from models.layers.base import (
    PADDINGS,
    OneInput,
    Shape,
    SpecError,
    at_most,
    axes_size,
    flag,
    image_shape,
    per_axis,
    positive,
    same_padding,
    shown,
    window_output,
)


@dataclass(frozen=True)
class Conv2D(OneInput):
    """`groups` splits the channels (depthwise when it equals them); `padding` is 'same', 'valid' or pixels per side.
    A kernel, and pixels of padding, may differ between height and width: [height, width] (Inception's 1x7). A
    `dilation` over 1 spreads the kernel's taps that many pixels apart (the segmentation nets' atrous convs), its
    window then dilation * (kernel - 1) + 1 pixels; only at stride 1, as Keras builds it (torchvision's are)."""

    filters: int
    kernel: int | tuple[int, int] = 3
    stride: int = 1
    padding: str | int | tuple[int, int] = "same"
    bias: bool = True
    groups: int = 1
    dilation: int = 1
    kind: ClassVar[str] = "conv2d"

    def __post_init__(self) -> None:
        positive(self.filters, "conv2d.filters")
        object.__setattr__(self, "kernel", axes_size(self.kernel, "conv2d.kernel", 1))
        positive(self.stride, "conv2d.stride")
        positive(self.groups, "conv2d.groups")
        if positive(self.dilation, "conv2d.dilation") > 1 and self.stride > 1:
            raise SpecError(f"conv2d.dilation {self.dilation} needs stride 1 (Keras builds no strided dilated conv), "
                            f"got stride {self.stride}")
        flag(self.bias, "conv2d.bias")
        if not isinstance(self.padding, str) or self.padding not in PADDINGS:
            try:
                object.__setattr__(self, "padding", axes_size(self.padding, "conv2d.padding", 0))
            except SpecError:
                raise SpecError(f"conv2d.padding must be one of {', '.join(PADDINGS)}, pixels >= 0 or [height, "
                                f"width] of them, got {shown(self.padding)}") from None

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.filters

    @property
    def kernel_size(self) -> tuple[int, int]:
        """(height, width)."""
        return per_axis(self.kernel)

    @property
    def window(self) -> tuple[int, int]:
        """The pixels the kernel spans, (height, width): its size where not dilated."""
        return tuple(self.dilation * (size - 1) + 1 for size in self.kernel_size)  # type: ignore[return-value]

    @property
    def pixels(self) -> tuple[int, int] | None:
        """Explicit padding per side, (height's, width's); None for 'same' or 'valid'."""
        return None if isinstance(self.padding, str) else per_axis(self.padding)

    def same_sides(self, shape: Shape) -> tuple[tuple[int, int], tuple[int, int]]:
        """'same' as pixels: (top, bottom), (left, right), the odd pixel after."""
        return tuple(same_padding(size, kernel, self.stride)  # type: ignore[return-value]
                     for size, kernel in zip(image_shape(shape, self.kind)[:2], self.window, strict=True))

    def output_shape(self, shape: Shape) -> Shape:
        channels = image_shape(shape, self.kind)[2]
        if channels % self.groups or self.filters % self.groups:
            raise SpecError(f"conv2d groups {self.groups} must divide its {channels} input channels and its "
                            f"{self.filters} filters")
        return (*window_output(shape, self.kind, self.window, self.stride, self.padding), self.filters)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        channels = image_shape(shape, self.kind)[2]
        kernel = {"kernel": (*self.kernel_size, channels // self.groups, self.filters)}
        return kernel | ({"bias": (self.filters,)} if self.bias else {})



@dataclass(frozen=True)
class ConvTranspose2D(OneInput):
    """torch's ConvTranspose2d, the decoders' upsampling (U-Net's, LinkNet's): each input pixel spreads its kernel
    over the output, `stride` pixels apart, so the output is (size - 1) * stride + kernel pixels, less `padding` on
    each side, plus `output_padding` after (less than the stride: the pixels a strided conv's floor lost); or with
    padding `same` (Keras's Conv2DTranspose, TensorFlow's rule) size * stride pixels, kernel - stride cut off (the
    odd one after) or stride - kernel added after. `groups` splits the channels (depthwise when it equals them). Its
    kernel is (kh, kw, filters / groups, in): Keras's Conv2DTranspose kernel, torch's weight (in, filters / groups,
    kh, kw) permuted."""

    filters: int
    kernel: int | tuple[int, int] = 2
    stride: int = 2
    padding: str | int | tuple[int, int] = 0
    output_padding: int | tuple[int, int] = 0
    groups: int = 1
    bias: bool = True
    kind: ClassVar[str] = "conv_transpose2d"

    def __post_init__(self) -> None:
        positive(self.filters, "conv_transpose2d.filters")
        object.__setattr__(self, "kernel", axes_size(self.kernel, "conv_transpose2d.kernel", 1))
        positive(self.stride, "conv_transpose2d.stride")
        positive(self.groups, "conv_transpose2d.groups")
        flag(self.bias, "conv_transpose2d.bias")
        if self.padding != "same":
            object.__setattr__(self, "padding", axes_size(self.padding, "conv_transpose2d.padding", 0))
        object.__setattr__(self, "output_padding", axes_size(self.output_padding, "conv_transpose2d.output_padding", 0))
        if self.padding == "same" and self.output_padding != 0:
            raise SpecError("conv_transpose2d.output_padding goes with torch's padding in pixels, not with 'same'")
        if max(per_axis(self.output_padding)) >= self.stride:
            raise SpecError(f"conv_transpose2d.output_padding must be less than its stride {self.stride} (torch's and "
                            f"Keras's rule), got {shown(self.output_padding)}")

    @property
    def kernel_size(self) -> tuple[int, int]:
        """(height, width)."""
        return per_axis(self.kernel)

    @property
    def cut(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Per axis, (height's, width's), the pixels taken off the full output, (size - 1) * stride + kernel, before
        and after it (negative: pixels added, which only the bias reaches)."""
        if self.padding == "same":
            return tuple((max(size - self.stride, 0) // 2, size - self.stride - max(size - self.stride, 0) // 2)
                         for size in self.kernel_size)  # type: ignore[return-value]
        return tuple((pad, pad - extra) for pad, extra in zip(per_axis(self.padding), per_axis(self.output_padding),
                                                               strict=True))  # type: ignore[return-value]

    def output_shape(self, shape: Shape) -> Shape:
        h, w, channels = image_shape(shape, self.kind)
        if channels % self.groups or self.filters % self.groups:
            raise SpecError(f"conv_transpose2d groups {self.groups} must divide its {channels} input channels and its "
                            f"{self.filters} filters")
        out = tuple((size - 1) * self.stride + kernel - before - after for size, kernel, (before, after) in zip(
            (h, w), self.kernel_size, self.cut, strict=True))
        if min(out) <= 0:
            raise SpecError(f"conv_transpose2d with kernel {self.kernel} and padding {self.padding} leaves no pixel of "
                            f"input {shape}")
        return (*(at_most(size, "conv_transpose2d's output") for size in out), self.filters)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        channels = image_shape(shape, self.kind)[2]
        kernel = {"kernel": (*self.kernel_size, self.filters // self.groups, channels)}
        return kernel | ({"bias": (self.filters,)} if self.bias else {})
