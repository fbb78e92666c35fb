"""Framework-neutral model specs: pure data from which every framework builds the same net.

A spec is a graph of layers: each layer names its inputs (the model's input is called `input`); a layer
that names none takes the layer before it, so a plain list is a chain. Shapes exclude the batch axis and
are channels-last (H, W, C) or flat (F,); this is the canonical layout. Weights are canonical too: conv
kernels (kh, kw, in / groups, out), dense (in, out), batch norm scale, offset, mean and variance (C,).
Nothing here imports a framework, so the orchestrator and the estimate can use it anywhere.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import ClassVar

Shape = tuple[int, ...]

LOSSES = ("mse", "cross_entropy")
PADDINGS = ("same", "valid")
INTERPOLATIONS = ("nearest", "bilinear")
MODEL_INPUT = "input"  # the name by which a layer takes the model's input
INPUT = -1  # ... and its index among a layer's inputs
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
        raise SpecError(f"{what} must be a positive integer, got {_shown(value)}")
    return _at_most(value, what)


def pixels(value: object, what: str) -> int:
    """Pixels on a side of an image, 0 or more; the importers check a file's value with it where they compute with
    it before it is a layer's."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SpecError(f"{what} must be pixels >= 0, got {_shown(value)}")
    return _at_most(value, what)


def _at_most(value: int, what: str) -> int:
    if value > MAX_SIZE:
        raise SpecError(f"{what} must be at most {MAX_SIZE:,} (2**31 - 1), got {_shown(value)}")
    return value


def _shown(value: object) -> str:
    """A value for a one-line message: a number of hundreds of digits by its length."""
    text = repr(value)
    if len(text) <= 40 or not isinstance(value, int):
        return text
    return f"a number of {len(text):,} digits"


def _real(value: object) -> bool:
    """Whether a value is a number a float holds: a file may give a bool, NaN, an infinity or an integer of hundreds
    of digits where a number belongs."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and \
        -sys.float_info.max <= value <= sys.float_info.max


def number(value: object, what: str) -> float:
    """A finite number; the importers check a file's value with it where they compute with it before it is a
    layer's (Keras's batch norm momentum, 1 minus the spec's)."""
    if not _real(value):
        raise SpecError(f"{what} must be a finite number, got {_shown(value)}")
    return float(value)


def _fraction(value: object, what: str) -> float:
    if not _real(value) or not 0 <= value < 1:
        raise SpecError(f"{what} must be a number in [0, 1), got {_shown(value)}")
    return float(value)


def flag(value: object, what: str) -> None:
    """True or false, never a value read as one (a file's "no" is not true)."""
    if not isinstance(value, bool):
        raise SpecError(f"{what} must be true or false, got {_shown(value)}")


def _epsilon(value: object, what: str) -> None:
    if not _real(value) or value <= 0:
        raise SpecError(f"{what} must be a positive number, got {_shown(value)}")


def _image(shape: Shape, layer: str) -> tuple[int, int, int]:
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


def _per_axis(value: int | str | tuple[int, int]) -> tuple:
    """A size or padding for height and width: one value for both, or (height's, width's)."""
    return value if isinstance(value, tuple) else (value, value)


def _axes_size(value: object, what: str, least: int) -> int | tuple[int, int]:
    """One integer of at least `least` for both axes, or [height, width] (two equal values are one)."""
    if isinstance(value, (list, tuple)) and len(value) == 2:
        height, width = (_axes_size(each, what, least) for each in value)
        return height if height == width else (height, width)  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise SpecError(f"{what} must be an integer >= {least}, or [height, width] of them, got {_shown(value)}")
    return _at_most(value, what)


def _window_output(shape: Shape, kind: str, kernel: int | tuple[int, int], stride: int,
                   padding: str | int | tuple[int, int]) -> tuple[int, int]:
    h, w, _ = _image(shape, kind)
    out = tuple(conv_output_size(s, k, stride, p) for s, k, p in zip((h, w), _per_axis(kernel), _per_axis(padding),
                                                                       strict=True))
    if min(out) <= 0:
        raise SpecError(f"{kind} with window {kernel} does not fit input {shape}")
    return out  # type: ignore[return-value]


class _OneInput:
    """A layer of one input; its parameters and statistics are none unless it says otherwise."""

    arity: ClassVar[tuple[int, int | None]] = (1, 1)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


class _SameShape(_OneInput):
    """A layer of one input whose output has the input's shape (an activation, a normalization, dropout)."""

    def output_shape(self, shape: Shape) -> Shape:
        return shape


@dataclass(frozen=True)
class Conv2D(_OneInput):
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
        object.__setattr__(self, "kernel", _axes_size(self.kernel, "conv2d.kernel", 1))
        positive(self.stride, "conv2d.stride")
        positive(self.groups, "conv2d.groups")
        if positive(self.dilation, "conv2d.dilation") > 1 and self.stride > 1:
            raise SpecError(f"conv2d.dilation {self.dilation} needs stride 1 (Keras builds no strided dilated conv), "
                            f"got stride {self.stride}")
        flag(self.bias, "conv2d.bias")
        if not isinstance(self.padding, str) or self.padding not in PADDINGS:
            try:
                object.__setattr__(self, "padding", _axes_size(self.padding, "conv2d.padding", 0))
            except SpecError:
                raise SpecError(f"conv2d.padding must be one of {', '.join(PADDINGS)}, pixels >= 0 or [height, "
                                f"width] of them, got {_shown(self.padding)}") from None

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.filters

    @property
    def kernel_size(self) -> tuple[int, int]:
        """(height, width)."""
        return _per_axis(self.kernel)

    @property
    def window(self) -> tuple[int, int]:
        """The pixels the kernel spans, (height, width): its size where not dilated."""
        return tuple(self.dilation * (size - 1) + 1 for size in self.kernel_size)  # type: ignore[return-value]

    @property
    def pixels(self) -> tuple[int, int] | None:
        """Explicit padding per side, (height's, width's); None for 'same' or 'valid'."""
        return None if isinstance(self.padding, str) else _per_axis(self.padding)

    def same_sides(self, shape: Shape) -> tuple[tuple[int, int], tuple[int, int]]:
        """'same' as pixels: (top, bottom), (left, right), the odd pixel after."""
        return tuple(same_padding(size, kernel, self.stride)  # type: ignore[return-value]
                     for size, kernel in zip(_image(shape, self.kind)[:2], self.window, strict=True))

    def output_shape(self, shape: Shape) -> Shape:
        channels = _image(shape, self.kind)[2]
        if channels % self.groups or self.filters % self.groups:
            raise SpecError(f"conv2d groups {self.groups} must divide its {channels} input channels and its "
                            f"{self.filters} filters")
        return (*_window_output(shape, self.kind, self.window, self.stride, self.padding), self.filters)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        channels = _image(shape, self.kind)[2]
        kernel = {"kernel": (*self.kernel_size, channels // self.groups, self.filters)}
        return kernel | ({"bias": (self.filters,)} if self.bias else {})


@dataclass(frozen=True)
class _Pool2D(_OneInput):
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
                     for size in _image(shape, self.kind)[:2])  # type: ignore[return-value]

    def sides(self, shape: Shape) -> tuple[tuple[int, int], tuple[int, int]]:
        """The pixels each window reaches beyond the input: (top, bottom), (left, right), the padding and overhang."""
        below, right = self.overhang(shape)
        return (self.padding, self.padding + below), (self.padding, self.padding + right)

    def output_shape(self, shape: Shape) -> Shape:
        h, w, channels = _image(shape, self.kind)
        _window_output(shape, self.kind, self.pool, self.step, self.padding)  # the floor's own check: it fits
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
class GlobalAvgPool(_OneInput):
    """The mean over height and width: an image becomes one value per channel, (C,) or with `keepdims` (1, 1, C)."""

    keepdims: bool = False
    kind: ClassVar[str] = "global_avg_pool"

    def __post_init__(self) -> None:
        flag(self.keepdims, "global_avg_pool.keepdims")

    def output_shape(self, shape: Shape) -> Shape:
        channels = _image(shape, self.kind)[2]
        return (1, 1, channels) if self.keepdims else (channels,)


@dataclass(frozen=True)
class AdaptiveAvgPool2D(_OneInput):
    """The mean over windows that tile an image into `size` (an int, or [height, width]) whatever its size, torch's
    AdaptiveAvgPool2d: output row i averages input rows floor(i H / oh) to ceil((i + 1) H / oh), uneven windows that
    overlap where oh does not divide H, and repeat rows where oh > H (VGG's and AlexNet's head at a small input)."""

    size: int | tuple[int, int]
    kind: ClassVar[str] = "adaptive_avgpool2d"

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", _axes_size(self.size, "adaptive_avgpool2d.size", 1))

    def output_shape(self, shape: Shape) -> Shape:
        return (*_per_axis(self.size), _image(shape, self.kind)[2])

    def averaging(self, shape: Shape) -> tuple[tuple[tuple[float, ...], ...], tuple[tuple[float, ...], ...]]:
        """Per axis, the (out, in) matrix whose row i holds 1 / its window's size over the window: the pool is
        A_h x A_w^T per channel, what JAX computes and the ONNX importer checks a decomposed pool against."""
        return tuple(tuple(tuple(1 / (end - start) if start <= at < end else 0.0 for at in range(size))
                           for start, end in ((i * size // out, -(-(i + 1) * size // out)) for i in range(out)))
                     for size, out in zip(_image(shape, self.kind)[:2], _per_axis(self.size),
                                          strict=True))  # type: ignore[return-value]


@dataclass(frozen=True)
class BatchNorm(_SameShape):
    """Batch normalization over the channel axis, in torch's convention: `momentum` is the weight of the new batch's
    statistic in the running one (Keras's momentum is 1 minus it); `epsilon` is added to the variance. `scale` and
    `center` (Keras's names): whether it learns a scale and an offset (InceptionV3's learn no scale)."""

    epsilon: float = 1e-5
    momentum: float = 0.1
    scale: bool = True
    center: bool = True
    kind: ClassVar[str] = "batchnorm"

    def __post_init__(self) -> None:
        _epsilon(self.epsilon, "batchnorm.epsilon")
        if not _real(self.momentum) or not 0 < self.momentum <= 1:
            raise SpecError(f"batchnorm.momentum must be a number in (0, 1], got {_shown(self.momentum)}")
        flag(self.scale, "batchnorm.scale")
        flag(self.center, "batchnorm.center")

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return ({"scale": (shape[-1],)} if self.scale else {}) | ({"offset": (shape[-1],)} if self.center else {})

    def statistics_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"mean": (shape[-1],), "variance": (shape[-1],)}


@dataclass(frozen=True)
class Dense(_OneInput):
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
class Dropout(_SameShape):
    """Zeroes `rate` of the values in training (the rest scaled by 1 / (1 - rate)); the identity in inference.
    `per_example` draws one value per example for all its values (Keras's noise_shape (None, 1, 1, 1): the
    stochastic depth of EfficientNet's blocks)."""

    rate: float = 0.5
    per_example: bool = False
    kind: ClassVar[str] = "dropout"

    def __post_init__(self) -> None:
        _fraction(self.rate, "dropout.rate")
        flag(self.per_example, "dropout.per_example")


@dataclass(frozen=True)
class Flatten(_OneInput):
    """Flattens in channels-last order; frameworks that compute channels-first permute first."""

    kind: ClassVar[str] = "flatten"

    def output_shape(self, shape: Shape) -> Shape:
        return (math.prod(shape),)


@dataclass(frozen=True)
class ReLU(_SameShape):
    kind: ClassVar[str] = "relu"


@dataclass(frozen=True)
class ReLU6(_SameShape):
    kind: ClassVar[str] = "relu6"


@dataclass(frozen=True)
class SiLU(_SameShape):
    """x * sigmoid(x) (Keras's swish)."""

    kind: ClassVar[str] = "silu"


@dataclass(frozen=True)
class Sigmoid(_SameShape):
    kind: ClassVar[str] = "sigmoid"


@dataclass(frozen=True)
class HardSigmoid(_SameShape):
    """relu6(x + 3) / 6, Keras 3's, JAX's and torch's hard sigmoid (ONNX's HardSigmoid at alpha 1/6, beta 0.5; not
    Keras 2's nor ONNX's default, 0.2 x + 0.5, which the importers refuse)."""

    kind: ClassVar[str] = "hard_sigmoid"


@dataclass(frozen=True)
class HardSwish(_SameShape):
    """x * relu6(x + 3) / 6 (Keras's hard_silu, torch's Hardswish, ONNX's HardSwish): MobileNetV3's activation."""

    kind: ClassVar[str] = "hard_swish"


@dataclass(frozen=True)
class GELU(_SameShape):
    """x * Phi(x) with the exact normal CDF (torch's and Keras's default), or its tanh approximation."""

    approximate: bool = False
    kind: ClassVar[str] = "gelu"

    def __post_init__(self) -> None:
        flag(self.approximate, "gelu.approximate")


@dataclass(frozen=True)
class LeakyReLU(_SameShape):
    """x where x >= 0, else negative_slope * x: torch's LeakyReLU (its default slope 0.01, ONNX's LeakyRelu alpha),
    Keras's LeakyReLU (its default 0.3) and ReLU(negative_slope=...). The slope is at least 0, as Keras requires."""

    negative_slope: float = 0.01
    kind: ClassVar[str] = "leaky_relu"

    def __post_init__(self) -> None:
        if not _real(self.negative_slope) or self.negative_slope < 0:
            raise SpecError(f"leaky_relu.negative_slope must be a number >= 0, got {_shown(self.negative_slope)}")


@dataclass(frozen=True)
class ELU(_SameShape):
    """x where x > 0, else alpha * (exp(x) - 1): torch's, Keras's and ONNX's Elu (alpha 1 by default); alpha is
    positive, as the ELU paper's (the output then tells the slope: a backward may keep it instead of the input)."""

    alpha: float = 1.0
    kind: ClassVar[str] = "elu"

    def __post_init__(self) -> None:
        _epsilon(self.alpha, "elu.alpha")


@dataclass(frozen=True)
class Softplus(_SameShape):
    """log(1 + exp(x)): Keras's, JAX's and ONNX's softplus, and torch's at beta 1 (its threshold 20, past which it
    returns x, differs from it by less than float32 resolves)."""

    kind: ClassVar[str] = "softplus"


@dataclass(frozen=True)
class Mish(_SameShape):
    """x * tanh(softplus(x)) (torch's Mish, Keras's and JAX's mish, ONNX's Mish): CSP nets' activation."""

    kind: ClassVar[str] = "mish"


@dataclass(frozen=True)
class LayerNorm(_SameShape):
    """Normalizes each position over its channels (the last axis), then scales and shifts per channel; the variance
    is the biased one, `epsilon` added to it."""

    epsilon: float = 1e-5
    kind: ClassVar[str] = "layernorm"

    def __post_init__(self) -> None:
        _epsilon(self.epsilon, "layernorm.epsilon")

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"scale": (shape[-1],), "offset": (shape[-1],)}


@dataclass(frozen=True)
class LayerScale(_SameShape):
    """x * scale, a learned scale per channel (the last axis): ConvNeXt's layer scale on each block's branch. Its
    scale is trainable and starts at 1, as a norm's does (ConvNeXt starts it near 0; an imported net loads its own)."""

    kind: ClassVar[str] = "layerscale"

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {"scale": (shape[-1],)}


@dataclass(frozen=True)
class Rescale(_SameShape):
    """x * scale + offset, constants of the net (Keras's Rescaling: pixels from [0, 255] to [0, 1])."""

    scale: float = 1.0
    offset: float = 0.0
    kind: ClassVar[str] = "rescale"

    def __post_init__(self) -> None:
        for value, what in ((self.scale, "rescale.scale"), (self.offset, "rescale.offset")):
            number(value, what)


@dataclass(frozen=True)
class Normalize(_SameShape):
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
            if not isinstance(values, (list, tuple)) or not all(_real(value) for value in values):
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


@dataclass(frozen=True)
class _Sides(_OneInput):
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
        h, w, c = _image(shape, self.kind)
        return (_at_most(h + self.top + self.bottom, "zeropad2d's height"),
                _at_most(w + self.left + self.right, "zeropad2d's width"), c)


@dataclass(frozen=True)
class Crop2D(_Sides):
    """Pixels cut off an image's sides: NASNet's one-pixel shift (a zero row and column padded after, one cropped
    before) that moves a stride-2 pool's windows onto the odd pixels."""

    kind: ClassVar[str] = "crop2d"

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = _image(shape, self.kind)
        if self.top + self.bottom >= h or self.left + self.right >= w:
            raise SpecError(f"crop2d removes {self.top} + {self.bottom} of {h} rows or {self.left} + {self.right} of "
                            f"{w} columns, leaving none")
        return h - self.top - self.bottom, w - self.left - self.right, c


@dataclass(frozen=True)
class ChannelSlice(_OneInput):
    """Channels start to stop of an image, (H, W, stop - start): one half of ShuffleNetV2's chunk in two (a spec
    layer has one output, so a split is one slice per part, each reading the same input)."""

    start: int
    stop: int
    kind: ClassVar[str] = "channel_slice"

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 0:
            raise SpecError(f"channel_slice.start must be a channel >= 0, got {_shown(self.start)}")
        positive(self.stop, "channel_slice.stop")
        if self.stop <= self.start:
            raise SpecError(f"channel_slice.stop must be past its start {self.start}, got {self.stop}")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = _image(shape, self.kind)
        if self.stop > c:
            raise SpecError(f"channel_slice stops at channel {self.stop} of an image of {c}")
        return h, w, self.stop - self.start


@dataclass(frozen=True)
class ChannelShuffle(_SameShape):
    """An image's channels read as (groups, C / groups) and written transposed, output channel j * groups + i
    being input channel i * C / groups + j: ShuffleNet's mixing of its branches' channels."""

    groups: int
    kind: ClassVar[str] = "channel_shuffle"

    def __post_init__(self) -> None:
        positive(self.groups, "channel_shuffle.groups")

    def output_shape(self, shape: Shape) -> Shape:
        _, _, c = _image(shape, self.kind)
        if c % self.groups:
            raise SpecError(f"channel_shuffle of {c} channels into {self.groups} groups: they do not divide")
        return shape


@dataclass(frozen=True)
class Upsample2D(_OneInput):
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
        h, w, c = _image(shape, self.kind)
        return (_at_most(h * self.scale, "upsample2d's height"), _at_most(w * self.scale, "upsample2d's width"), c)


@dataclass(frozen=True)
class Reshape(_OneInput):
    """The same values in a new shape (without the batch axis), read in channels-last order: (C,) to (1, 1, C)
    before a squeeze-and-excite multiply."""

    shape: tuple[int, ...]
    kind: ClassVar[str] = "reshape"

    def __post_init__(self) -> None:
        if not isinstance(self.shape, (list, tuple)) or len(self.shape) not in (1, 3):
            raise SpecError(f"reshape.shape must be a list of 1 or 3 sizes, got {_shown(self.shape)}")
        for size in self.shape:
            positive(size, "reshape.shape entries")
        object.__setattr__(self, "shape", tuple(self.shape))  # JSON gives a list; a frozen layer keeps a tuple

    def output_shape(self, shape: Shape) -> Shape:
        if math.prod(shape) != math.prod(self.shape):
            raise SpecError(f"reshape of {shape} to {self.shape} changes the number of values")
        return self.shape


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


Layer = (Conv2D | MaxPool2D | AvgPool2D | AdaptiveAvgPool2D | GlobalAvgPool | BatchNorm | Dense | Dropout | Flatten
         | ReLU | ReLU6 | SiLU | Sigmoid | HardSigmoid | HardSwish | GELU | LeakyReLU | ELU | Softplus | Mish
         | LayerNorm | LayerScale | Rescale | Normalize | ZeroPad2D | Crop2D | ChannelSlice | ChannelShuffle
         | Upsample2D | Reshape | Add | Concat | Multiply)
LAYER_TYPES: dict[str, type] = {cls.kind: cls for cls in (
    Conv2D, MaxPool2D, AvgPool2D, AdaptiveAvgPool2D, GlobalAvgPool, BatchNorm, Dense, Dropout, Flatten, ReLU, ReLU6,
    SiLU, Sigmoid, HardSigmoid, HardSwish, GELU, LeakyReLU, ELU, Softplus, Mish, LayerNorm, LayerScale, Rescale,
    Normalize, ZeroPad2D, Crop2D, ChannelSlice, ChannelShuffle, Upsample2D, Reshape, Add, Concat, Multiply)}
# The layers that compute one value from one value: the same shape out, nothing held (the estimate's activations)
ELEMENTWISE = ("relu", "relu6", "silu", "sigmoid", "hard_sigmoid", "hard_swish", "gelu", "leaky_relu", "elu",
               "softplus", "mish", "layerscale", "rescale", "normalize")
NODE_KEYS = ("name", "inputs", "block")  # what a layer entry may say besides its type and options
# Options a compiler's code takes as a mere number: a dropout's rate is a threshold and a scale, so dropouts that differ
# in nothing else (EfficientNet's stochastic depth, its rate rising block by block) cost XLA's CPU about what a repeat
# does, not what a new layer does (docs/estimate.md).
CODE_NUMBERS: dict[str, tuple[str, ...]] = {"dropout": ("rate",)}


@dataclass(frozen=True)
class LayerShapes:
    """One layer with the shapes it sees, so adapters and estimates never re-derive them.

    `inputs` are indices of earlier layers, INPUT (-1) for the model's input; `params` are trainable,
    `statistics` are state the layer updates itself (batch norm's running mean and variance)."""

    index: int
    layer: Layer
    name: str
    block: str
    inputs: tuple[int, ...]
    input_shapes: tuple[Shape, ...]
    output_shape: Shape
    params: dict[str, Shape]
    statistics: dict[str, Shape]

    @property
    def input_shape(self) -> Shape:
        return self.input_shapes[0]

    @property
    def param_count(self) -> int:
        return sum(math.prod(s) for s in self.params.values())

    @property
    def statistics_count(self) -> int:
        return sum(math.prod(s) for s in self.statistics.values())

    @property
    def weights(self) -> dict[str, Shape]:
        """Every array the layer holds, in the order the canonical weights list them."""
        return self.params | self.statistics

    @property
    def compiled_as(self) -> tuple[str, tuple[Shape, ...]]:
        """What a compiler's code for the layer depends on: its kind and options, but those it takes as a mere number
        (CODE_NUMBERS), and its input shapes. Layers alike in this reuse one layer's code."""
        numbers = {name: getattr(type(self.layer), name) for name in CODE_NUMBERS.get(self.layer.kind, ())}
        return repr(replace(self.layer, **numbers)), self.input_shapes


@dataclass(frozen=True)
class ModelSpec:
    """`inputs[i]` are the indices layer i reads (INPUT for the model's input), in topological order; None is a
    chain. The last layer is the output; `names` and `blocks` (a label a block-wise technique cuts at) are
    optional."""

    name: str
    input_shape: Shape
    layers: tuple[Layer, ...]
    loss: str
    default_batch: int = 1
    description: str = ""
    inputs: tuple[tuple[int, ...], ...] | None = None
    names: tuple[str, ...] | None = None
    blocks: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("a spec needs a non-empty name")
        for size in self.input_shape:
            positive(size, "input_shape entries")
        if len(self.input_shape) not in (1, 3):
            raise SpecError(f"input_shape must be (H, W, C) or (F,), got {self.input_shape}")
        if not self.layers:
            raise SpecError("a spec needs at least one layer")
        if self.loss not in LOSSES:
            raise SpecError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        positive(self.default_batch, "default_batch")
        for extra, what in ((self.inputs, "inputs"), (self.names, "names"), (self.blocks, "blocks")):
            if extra is not None and len(extra) != len(self.layers):
                raise SpecError(f"spec {what} must name one entry per layer")
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise SpecError("layer names must be unique")
        self._check_graph()
        out = self.output_shape
        if self.loss == "cross_entropy" and len(out) != 1:
            raise SpecError(f"cross_entropy needs a flat output of class scores, got shape {out}")

    def layer_name(self, index: int) -> str:
        return self.names[index] if self.names else f"layer{index}"

    def layer_inputs(self, index: int) -> tuple[int, ...]:
        return self.inputs[index] if self.inputs is not None else (index - 1 if index else INPUT,)

    def _check_graph(self) -> None:
        """Inputs come before their reader and each layer's count fits its type; every layer feeds the output."""
        for index, layer in enumerate(self.layers):
            sources = self.layer_inputs(index)
            least, most = layer.arity
            fits = least <= len(sources) and (most is None or len(sources) <= most)
            if fits and all(INPUT <= source < index for source in sources):
                continue
            where = f"layer {self.layer_name(index)!r} ({layer.kind})"  # named only when wrong: a deep net has many
            if not fits:
                wanted = "one input" if most == 1 else f"at least {least} inputs"
                raise SpecError(f"{where} takes {wanted}, got {len(sources)}")
            raise SpecError(f"{where} reads a layer that does not come before it")
        needed, pending = {len(self.layers) - 1}, [len(self.layers) - 1]
        while pending:
            for source in self.layer_inputs(pending.pop()):
                if source != INPUT and source not in needed:
                    needed.add(source)
                    pending.append(source)
        unused = [self.layer_name(index) for index in range(len(self.layers)) if index not in needed]
        if unused:
            raise SpecError(f"layer {unused[0]!r} feeds no output (the output is the last layer, "
                            f"{self.layer_name(len(self.layers) - 1)!r})")

    def walk(self) -> list[LayerShapes]:
        """Every layer with its input, output and parameter shapes (raises SpecError naming the layer on a mismatch).

        Worked out once per spec (it is frozen): the sizes, counts and the estimate walk it many times, which for a
        deep net would cost more than the estimate itself. The LayerShapes are shared: read them, never change them."""
        return list(self._shapes)

    @cached_property
    def _shapes(self) -> tuple[LayerShapes, ...]:
        result: list[LayerShapes] = []
        for index, layer in enumerate(self.layers):
            sources = self.layer_inputs(index)
            shapes = tuple(self.input_shape if source == INPUT else result[source].output_shape for source in sources)
            try:
                out = layer.output_shape(*shapes)
                params, statistics = layer.param_shapes(shapes[0]), layer.statistics_shapes(shapes[0])
            except SpecError as error:
                raise SpecError(f"layer {self.layer_name(index)!r}: {error}") from error
            result.append(LayerShapes(index, layer, self.layer_name(index), self.blocks[index] if self.blocks else "",
                                      sources, shapes, out, params, statistics))
        return tuple(result)

    def consumers(self) -> dict[int, list[int]]:
        """The layers that read each layer's output (and INPUT's), in order. Worked out once per spec, as `walk`: the
        graph runner and the techniques ask for it per layer. Shared: read it, never change it."""
        return self._readers

    @cached_property
    def _readers(self) -> dict[int, list[int]]:
        readers: dict[int, list[int]] = {INPUT: []} | {index: [] for index in range(len(self.layers))}
        for index in range(len(self.layers)):
            for source in self.layer_inputs(index):
                readers[source].append(index)
        return readers

    @property
    def is_chain(self) -> bool:
        return self.inputs is None

    @property
    def output_shape(self) -> Shape:
        return self._shapes[-1].output_shape

    @cached_property
    def distinct_layers(self) -> int:
        """How many layers differ in kind, options or input shapes (`LayerShapes.compiled_as`): a compiler builds
        code for each, which a layer that repeats one (a ResNet's identical blocks) reuses; XLA's runtime grows with
        these (docs/estimate.md)."""
        return len({shapes.compiled_as for shapes in self.walk()})

    @cached_property
    def param_count(self) -> int:
        """Trainable values: what torch's parameters() and Keras's trainable weights count (counted once, as walk)."""
        return sum(step.param_count for step in self._shapes)

    @cached_property
    def statistics_count(self) -> int:
        """Non-trainable state (batch norm's running statistics): torch's buffers, Keras's non-trainable weights."""
        return sum(step.statistics_count for step in self._shapes)

    def weight_bytes(self, bytes_per_value: int = 4) -> int:
        """The trainable weights' bytes (what gradients and optimizer state are sized by)."""
        return self.param_count * bytes_per_value

    def statistics_bytes(self, bytes_per_value: int = 4) -> int:
        return self.statistics_count * bytes_per_value

    def _reads_the_layer_before(self, index: int) -> bool:
        return self.layer_inputs(index) == ((index - 1 if index else INPUT),)

    def to_dict(self) -> dict:
        """The JSON form, as short as the format allows (records carry it): options at their default and inputs
        that are the layer before are left out, as a user may leave them out."""
        layers = []
        linked = not all(self._reads_the_layer_before(index) for index in range(len(self.layers)))
        for index, layer in enumerate(self.layers):
            entry = {"type": layer.kind} | _layer_fields(layer)
            if not self.is_chain or self.names:
                entry["name"] = self.layer_name(index)
            if not self.is_chain and not (linked and self._reads_the_layer_before(index)):
                entry["inputs"] = [MODEL_INPUT if source == INPUT else self.layer_name(source)
                                   for source in self.layer_inputs(index)]
            if self.blocks and self.blocks[index]:
                entry["block"] = self.blocks[index]
            layers.append(entry)
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "loss": self.loss,
            "default_batch": self.default_batch,
            "description": self.description,
            "layers": layers,
        }

    @classmethod
    def from_dict(cls, data: object) -> ModelSpec:
        if not isinstance(data, dict):
            raise SpecError("a spec must be a JSON object")
        allowed = {"name", "input_shape", "loss", "layers", "default_batch", "description"}
        _reject_unknown(data, allowed, "spec")
        missing = sorted({"name", "input_shape", "loss", "layers"} - data.keys())
        if missing:
            raise SpecError(f"spec is missing {', '.join(missing)}")
        if not isinstance(data["layers"], list) or not isinstance(data["input_shape"], list):
            raise SpecError("spec 'layers' and 'input_shape' must be lists")
        if not all(isinstance(entry, dict) and "type" in entry for entry in data["layers"]):
            raise SpecError("each layer must be an object with a 'type'")
        entries = _topological(data["layers"])
        graph = any("inputs" in entry for entry in entries)
        names = tuple(entry.get("name", f"layer{index}") for index, entry in enumerate(entries))
        index_of = {name: index for index, name in enumerate(names)} | {MODEL_INPUT: INPUT}
        blocks = tuple(str(entry.get("block", "")) for entry in entries)
        return cls(
            name=str(data["name"]),
            input_shape=tuple(data["input_shape"]),
            layers=tuple(_layer_from_dict(entry, index) for index, entry in enumerate(entries)),
            loss=data["loss"],
            default_batch=data.get("default_batch", 1),
            description=str(data.get("description", "")),
            inputs=tuple(tuple(index_of[name] for name in _input_names(entries, index))
                         for index in range(len(entries))) if graph else None,
            names=names if any("name" in entry for entry in entries) else None,
            blocks=blocks if any(blocks) else None,
        )


def _input_names(entries: list[dict], index: int) -> list[str]:
    """A layer's inputs as written, or the layer before it (the model's input for the first)."""
    if "inputs" in entries[index]:
        return entries[index]["inputs"]
    return [entries[index - 1].get("name", f"layer{index - 1}") if index else MODEL_INPUT]


def _topological(entries: list[dict]) -> list[dict]:
    """The layers in an order where each comes after its inputs, as close to the written one as that allows.

    Checks what only names can show: names that are unique strings, inputs that exist, no cycle."""
    names = [entry.get("name", f"layer{index}") for index, entry in enumerate(entries)]
    for index, (entry, name) in enumerate(zip(entries, names, strict=True)):
        if not isinstance(name, str) or not name or name == MODEL_INPUT:
            raise SpecError(f"layer {index}: name must be a non-empty string other than {MODEL_INPUT!r}, got {name!r}")
        inputs = entry.get("inputs", [])
        if not isinstance(inputs, list) or not all(isinstance(source, str) for source in inputs):
            raise SpecError(f"layer {name!r}: inputs must be a list of layer names, got {inputs!r}")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SpecError(f"layer name {name!r} is used twice")
        seen.add(name)
    position = {name: index for index, name in enumerate(names)}
    for index in range(len(entries)):
        for source in _input_names(entries, index):
            if source != MODEL_INPUT and source not in position:
                raise SpecError(f"layer {names[index]!r}: unknown input {source!r}")
    order = _inputs_first(entries, names, position)
    placed = [entries[index] for index in order]
    if order != list(range(len(entries))):  # reordered: a chain link (no 'inputs') must keep its written input
        placed = [entry if "inputs" in entry else entry | {"inputs": _input_names(entries, index)}
                  for entry, index in zip(placed, order, strict=True)]
    return placed


def _inputs_first(entries: list[dict], names: list[str], position: dict[str, int]) -> list[int]:
    """The layers' indices, each after its inputs: a depth-first walk from each layer in the written order through
    its inputs. It keeps its own stack (a deep net written out of order would pass Python's recursion limit) and
    names a cycle it meets."""
    order: list[int] = []
    state: dict[int, int] = {}  # 1 while on the path being walked, 2 once placed
    for start in range(len(entries)):
        if start in state:
            continue
        state[start] = 1
        path = [(start, iter(_input_names(entries, start)))]  # each layer on it with the inputs it has yet to place
        while path:
            index, sources = path[-1]
            source = next(sources, None)
            if source is None:
                state[index] = 2
                order.append(index)
                path.pop()
            elif source != MODEL_INPUT and state.get(position[source]) != 2:
                found = position[source]
                if state.get(found) == 1:
                    walked = [names[step] for step, _ in path]
                    cycle = walked[walked.index(names[found]):] + [names[found]]
                    raise SpecError(f"layer {names[found]!r} is in a cycle: {' -> '.join(cycle)}")
                state[found] = 1
                path.append((found, iter(_input_names(entries, found))))
    return order


def _layer_fields(layer: Layer) -> dict:
    """The options that differ from their defaults (required ones always)."""
    return {f.name: getattr(layer, f.name) for f in fields(layer) if getattr(layer, f.name) != f.default}


def written_channels_last(spec: ModelSpec) -> ModelSpec:
    """`spec`, as a person wrote it (a JSON spec), where its image input is not channels-first. Images are height,
    width, channels; a channels-first [3, 32, 32] would otherwise run, silently, as a 3-pixel-high image of 32
    channels. A first axis of 1, 3 or 4 (grey, RGB, RGBA) before a last one over 4 is almost surely that, where a
    person wrote it: an importer converts a file's own layout, so its (4, 4, 512) is what the file says."""
    shape = spec.input_shape
    if len(shape) == 3 and shape[0] in (1, 3, 4) and shape[2] > 4 and \
            any(isinstance(layer, Conv2D) for layer in spec.layers):
        raise SpecError(f"input_shape is height, width, channels (channels last); {list(shape)} looks channels-first: "
                        f"give {[shape[1], shape[2], shape[0]]}")
    return spec


def _reject_unknown(data: dict, allowed: set[str], what: str) -> None:
    unknown = sorted(data.keys() - allowed)
    if unknown:
        raise SpecError(f"unknown {what} key(s) {', '.join(unknown)}; valid: {', '.join(sorted(allowed)) or 'none'}")


def _layer_from_dict(entry: dict, index: int) -> Layer:
    """One layer's options; an error names the layer: by its name, else its position (in the order it runs)."""
    cls = LAYER_TYPES.get(entry["type"])
    where = f"layer {entry['name']!r}: " if "name" in entry else f"layer {index}: "
    if cls is None:
        raise SpecError(f"{where}unknown layer type {entry['type']!r}; valid: {', '.join(LAYER_TYPES)}")
    options = {key: value for key, value in entry.items() if key not in ("type", *NODE_KEYS)}
    try:
        _reject_unknown(options, {f.name for f in fields(cls)}, f"{cls.kind}")
        return cls(**options)
    except SpecError as error:
        raise SpecError(f"{where}{error}") from error
    except TypeError as error:  # a required option missing
        raise SpecError(f"{where}{cls.kind}: {error}") from error
