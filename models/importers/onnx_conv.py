"""A Conv (its padding, a Pad before it owed to it) and a Gemm or MatMul as the spec's conv2d and dense."""

from __future__ import annotations

import math

import numpy as np
import onnx

from models.importers.onnx_common import (
    FIRST,
    SAME,
    _conv_kernel,
    _per_axis,
    _Refused,
    _rows_to_last,
    _square,
    _text,
    _torch_call,
)
from models.spec import Shape, positive, same_padding

# torch's calls whose third argument is the bias (`_torch_call`)
BIASED_CALLS = ("aten.conv2d", "aten.linear", "aten.convolution", "aten.conv_transpose2d")


class ConvNodes:
    """The _Importer's conv nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _conv(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        image = self._image_shape(value)
        weight, bias = self._constant(node, 1, "weight"), self._constant(node, 2, "bias")
        if bias is not None and node.input[2] in self.computed and not bias.any():
            bias = None  # the default exporter's zero bias of a conv that has none: computed, not a parameter
        if weight is None or weight.ndim != 4:
            raise _Refused("has no 2-D kernel; the spec's conv2d is 2-D")
        call = _torch_call(node)
        if call is not None and call[0] in BIASED_CALLS and len(call[1]) > 1 and call[1][1].startswith("%b_"):
            raise _Refused("convolves with a fixed kernel (a buffer in torch: timm's blur pool's filter); the spec's "
                           "conv2d learns its kernel")
        bias = _removed_bias(node, int(weight.shape[0])) if bias is None else bias
        kernel = tuple(positive(int(size), "kernel_shape") for size in attributes.get("kernel_shape", weight.shape[2:]))
        if len(kernel) != 2:
            raise _Refused(f"has kernel_shape {list(kernel)}; the spec's conv2d is 2-D")
        stride = _square(list(attributes.get("strides", [1, 1])), "strides")
        dilation = _square(list(attributes.get("dilations", [1, 1])), "dilations")
        window = tuple(dilation * (size - 1) + 1 for size in kernel)  # the pixels a dilated kernel spans
        owed = self.padding.pop(node.input[0], (0, 0, 0, 0))  # a Pad before it: `value` is the tensor it padded
        own = self._pads(attributes, (image[0] + owed[0] + owed[1], image[1] + owed[2] + owed[3]), window, stride)
        pads = tuple(a + b for a, b in zip(owed, own, strict=True))
        padding, source = self._padding(pads, image, window, stride, value.spec, label)
        weights = {"kernel": _conv_kernel(weight)} | ({} if bias is None else {"bias": bias})
        self._set(node, self._emit(label, "conv2d", [source], weights, filters=int(weight.shape[0]), kernel=kernel,
                                   stride=stride, padding=padding, bias=bias is not None,
                                   groups=int(attributes.get("group", 1)), dilation=dilation), FIRST)

    def _conv_transpose(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """ConvTranspose (torch's ConvTranspose2d): pads as torch's padding, the same before and after on each axis,
        its output_padding after; its weight (in, out / groups, kh, kw) as the spec's (kh, kw, out / groups, in)."""
        value = self._value(node, 0)
        self._image_shape(value)
        weight, bias = self._constant(node, 1, "weight"), self._constant(node, 2, "bias")
        if weight is None or weight.ndim != 4:
            raise _Refused("has no 2-D kernel; the spec's conv_transpose2d is 2-D")
        groups = int(attributes.get("group", 1))
        bias = _removed_bias(node, int(weight.shape[1]) * groups) if bias is None else bias
        if _text(attributes.get("auto_pad", "NOTSET")) != "NOTSET" or "output_shape" in attributes or \
                list(attributes.get("dilations", [1, 1])) != [1, 1]:
            raise _Refused("pads automatically, fixes its output shape or is dilated; the spec's conv_transpose2d "
                           "takes torch's padding and output_padding, undilated")
        top, left, bottom, right = (int(pad) for pad in attributes.get("pads", [0, 0, 0, 0]))
        if (top, left) != (bottom, right) or min(top, left) < 0:
            raise _Refused(f"pads {[top, left, bottom, right]}; the spec's conv_transpose2d cuts as many pixels before "
                           f"as after on each axis (torch's padding)")
        extra = [int(size) for size in attributes.get("output_padding", [0, 0])]
        self._set(node, self._emit(label, "conv_transpose2d", [value.spec],
                                   {"kernel": weight.transpose(2, 3, 1, 0)} | ({} if bias is None else {"bias": bias}),
                                   filters=int(weight.shape[1]) * groups, kernel=list(weight.shape[2:]),
                                   stride=_square(list(attributes.get("strides", [1, 1])), "strides"),
                                   padding=[top, left], output_padding=extra, groups=groups, bias=bias is not None),
                  FIRST)

    def _padding(self, pads: tuple[int, ...], image: Shape, kernel: tuple[int, ...], stride: int, source: str,
                 label: str) -> tuple[str | int | tuple[int, int], str]:
        """A conv's padding in the spec: pixels per axis when the same on both its sides, 'same' when TensorFlow's
        rule gives it; otherwise a zeropad2d layer of the difference before it. Returns the padding and the layer
        it reads."""
        top, bottom, left, right = pads
        if pads == (*same_padding(image[0], kernel[0], stride), *same_padding(image[1], kernel[1], stride)) and \
                (top, left) != (bottom, right):
            return "same", source
        rows, columns = min(top, bottom), min(left, right)
        if (top, left) != (bottom, right):
            source = self._emit(f"{label}_pad", "zeropad2d", [source], top=top - rows, bottom=bottom - rows,
                                left=left - columns, right=right - columns)
        return ([rows, columns] if any((rows, columns)) else "valid"), source

    def _pads(self, attributes: dict, image: Shape, kernel: int | tuple[int, ...],
              stride: int) -> tuple[int, int, int, int]:
        """The node's padding as (top, bottom, left, right), whether explicit or by auto_pad."""
        auto = _text(attributes.get("auto_pad", "NOTSET"))
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            (top, bottom), (left, right) = (same_padding(size, window, stride) for size, window
                                            in zip(image[:2], _per_axis(kernel), strict=True))
            return (top, bottom, left, right) if auto == "SAME_UPPER" else (bottom, top, right, left)
        if auto == "VALID":
            return (0, 0, 0, 0)
        pads = list(attributes.get("pads", [0, 0, 0, 0]))
        if len(pads) != 4 or min(pads) < 0:
            raise _Refused(f"has pads {pads}; the importer reads four (top, left, bottom, right), none negative")
        return (pads[0], pads[2], pads[1], pads[3])

    def _dense(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Gemm, or MatMul with the Add of its bias (when that Add is its one reader) folded in. A MatMul over the
        channels of an image made channels-last by a Transpose (torchvision's ConvNeXt's pointwise layers) is a 1x1
        conv's weights and arithmetic, as Keras's Dense on an image is."""
        value = self._value(node, 0)
        on_pixels = len(self.shapes[value.spec]) == 3 and value.layout == SAME and node.op_type == "MatMul"
        if len(self.shapes[value.spec]) != 1 and not on_pixels:
            raise _Refused("multiplies a tensor that is neither flat (N, F) nor an image's channels made last by a "
                           "Transpose; the spec's dense reads a flat one")
        kernel = self._constant(node, 1, "weight")
        if kernel is None or kernel.ndim != 2:
            raise _Refused("multiplies by a computed or non-2-D matrix; the spec's dense holds a weight matrix")
        bias_node, bias = node, None
        if node.op_type == "Gemm":
            if attributes.get("transA") or attributes.get("alpha", 1.0) != 1 or attributes.get("beta", 1.0) != 1:
                raise _Refused("transposes its input or scales (alpha, beta); the spec's dense does neither")
            kernel = kernel.T if attributes.get("transB") else kernel
            bias = self._constant(node, 2, "bias")
        else:
            add = self._sole_reader(node.output[0], "Add")
            other = next((name for name in add.input if name != node.output[0]), "") if add is not None else ""
            if add is not None and other in self.constants and self.constants[other].size == kernel.shape[1]:
                self.folded.add(id(add))
                bias_node = add
                bias = self._constant(add, list(add.input).index(other), "bias")
        if isinstance(value.layout, tuple):  # a flattened (C, H, W) map: the rows to the spec's (H, W, C) order
            if kernel.shape[0] != math.prod(value.layout):
                raise _Refused(f"multiplies {math.prod(value.layout)} values by a matrix of {kernel.shape[0]} rows")
            kernel = _rows_to_last(kernel, value.layout)
        bias = _removed_bias(node, int(kernel.shape[1])) if bias is None else bias
        bias_weights = {} if bias is None else {"bias": bias.reshape(-1)}
        if on_pixels:
            spec = self._emit(label, "conv2d", [value.spec], {"kernel": kernel[None, None]} | bias_weights,
                              filters=int(kernel.shape[1]), kernel=1, padding="valid", bias=bias is not None)
        else:
            spec = self._emit(label, "dense", [value.spec], {"kernel": kernel} | bias_weights,
                              units=int(kernel.shape[1]), bias=bias is not None)
        self._set(bias_node, spec, SAME)


def _removed_bias(node: onnx.NodeProto, size: int) -> np.ndarray | None:
    """The zero bias torch's exporter removed from a conv or linear its optimizer found it in (a fresh net's biases
    are zeros: timm's ConvNeXt, exported as it is by default): zeros of `size` where the node's metadata shows the
    torch call had a bias (its third argument), so the net keeps the parameters it trains; else None."""
    call = _torch_call(node)
    if call is None or call[0] not in BIASED_CALLS or len(call[1]) < 3 or call[1][2] == "None":
        return None
    return np.zeros(size, np.float32)
