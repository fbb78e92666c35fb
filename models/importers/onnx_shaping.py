"""Flatten, Reshape, Transpose, Pad and Resize: the same values moved, padded or repeated."""

from __future__ import annotations

import math

import numpy as np
import onnx

from models.importers.onnx_channels import SHUFFLE_PERM, shuffle_tail
from models.importers.onnx_common import (
    FIRST,
    SAME,
    TO_FIRST,
    TO_LAST,
    _attributes,
    _axis,
    _Refused,
    _Tensor,
    _text,
)
from models.spec import Shape, positive

UNSHUFFLE_PERM = (0, 1, 3, 5, 2, 4)  # torch's pixel_unshuffle: (N, C, H / b, b, W / b, b) to (N, C, b, b, H / b, W / b)
# ONNX's Pad modes the spec has: zeros (its zeropad2d), and the spec's pad2d modes
PAD_MODES = {"constant": None, "reflect": "reflect", "edge": "replicate"}


class ShapingNodes:
    """The _Importer's shaping nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _flatten(self, node: onnx.NodeProto, label: str) -> None:
        value = self._value(node, 0)
        shape = self.shapes[value.spec]
        if len(shape) == 1:
            self.tensors[node.output[0]] = value
            return
        # (C, H, W) flattens channels-first; only a 1 x 1 map reads the same in the spec's (H, W, C) order
        layout = shape if value.layout == FIRST and shape[:2] != (1, 1) else SAME
        self._set(node, self._emit(label, "flatten", [value.spec]), layout)

    def _target(self, node: onnx.NodeProto, attributes: dict, onnx_shape: Shape) -> list[int]:
        """A Reshape's constant target sizes, the batch left out: a 0 copied from `onnx_shape` (unless allowzero),
        a -1 worked out."""
        target = self._constant(node, 1, "shape", integers=True)
        sizes = [int(size) for size in target.reshape(-1)][1:] if target is not None else []
        if not attributes.get("allowzero"):
            sizes = [onnx_shape[i] if size == 0 and i < len(onnx_shape) else size for i, size in enumerate(sizes)]
        if sizes.count(-1) == 1:
            known = math.prod(size for size in sizes if size != -1)
            sizes[sizes.index(-1)] = math.prod(onnx_shape) // max(known, 1)
        return sizes

    def _reshape(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Only a flatten, a flat (C) to (C, 1, 1) (or channels-last (1, 1, C)) before a per-channel multiply, the
        (C, H, W) to (g, C / g, H, W) that begins a channel shuffle, or every value flattened for torch's
        as_strided."""
        value = self._value(node, 0)
        shape = self.shapes[value.spec]
        onnx_shape = (shape[2], *shape[:2]) if value.layout == FIRST else shape
        sizes = self._target(node, attributes, onnx_shape)
        target = self._constant(node, 1, "shape", integers=True)
        if target is not None and target.reshape(-1).tolist() == [-1]:
            self._strided_restore(node, value, onnx_shape)
        elif sizes == [math.prod(shape)]:
            self._flatten(node, label)
        elif len(shape) == 1 and not isinstance(value.layout, tuple) and sizes in ([shape[0], 1, 1],
                                                                                  [1, 1, shape[0]]):
            spec = self._emit(label, "reshape", [value.spec], shape=[1, 1, shape[0]])
            self._set(node, spec, FIRST if sizes[0] != 1 or shape[0] == 1 else SAME)
        elif value.layout == FIRST and len(sizes) == 4 and sizes[0] * sizes[1] == onnx_shape[0] and \
                sizes[2:] == list(onnx_shape[1:]):
            self._channel_shuffle(node, value, sizes, label)
        elif value.layout == FIRST and len(sizes) == 5 and sizes[0] == onnx_shape[0] and sizes[2] == sizes[4] and \
                sizes[1] * sizes[2] == onnx_shape[1] and sizes[3] * sizes[4] == onnx_shape[2]:
            self._pixel_unshuffle(node, value, sizes, label)
        elif value.layout == FIRST and sizes == list(onnx_shape):
            self.tensors[node.output[0]] = value  # to the shape it has: no layer (the end of torch's pixel_unshuffle)
        else:
            raise _Refused(f"reshapes {list(onnx_shape)} to {sizes}; the importer maps a flatten, (C) -> (C, 1, 1) "
                           f"and a channel shuffle")

    def _reshaped_parameter(self, node: onnx.NodeProto, attributes: dict) -> None:
        """A parameter reshaped to a constant shape (ONNX's 0 copying its size, unless allowzero): the same values,
        which the node that reads them (a layer scale's Mul) takes as its weights."""
        value = self.constants[node.input[0]]
        sizes = [int(size) for size in self._constant(node, 1, "shape", integers=True).reshape(-1)]
        if not attributes.get("allowzero"):
            sizes = [value.shape[i] if size == 0 and i < value.ndim else size for i, size in enumerate(sizes)]
        try:
            self.constants[node.output[0]] = value.reshape(sizes)
        except ValueError as exc:
            raise _Refused(f"reshapes a parameter of shape {list(value.shape)} to {sizes}") from exc

    def _channel_shuffle(self, node: onnx.NodeProto, value: _Tensor, sizes: list[int], label: str) -> None:
        """(C, H, W) viewed as (g, C / g, H, W), its two channel axes transposed and viewed back as (C, H, W): one
        channel_shuffle of g groups, the nodes after this one taken in (models/importers/onnx_channels.py)."""
        groups, per_group, height, width = sizes
        tail = shuffle_tail(node, self._sole_reader)
        back = None if tail is None else self._target(tail[0], _attributes(tail[0]), (per_group, groups, height,
                                                                                        width))
        if tail is None or back != [groups * per_group, height, width]:
            raise _Refused(f"reshapes {[groups * per_group, height, width]} to {sizes}, then is no channel shuffle "
                           f"(a Transpose {list(SHUFFLE_PERM)} and a Reshape back, each read by the next alone)")
        self.folded.update(id(part) for part in (tail[0], *tail[1]))
        self._set(tail[0], self._emit(label, "channel_shuffle", [value.spec], groups=groups), FIRST)

    def _pixel_unshuffle(self, node: onnx.NodeProto, value: _Tensor, sizes: list[int], label: str) -> None:
        """(C, H, W) viewed as (C, H / b, b, W / b, b), transposed to (C, b, b, H / b, W / b) and viewed back as
        (C b b, H / b, W / b): torch's pixel_unshuffle as its exporter writes it, one channel-major space_to_depth,
        the nodes after this one taken in."""
        channels, rows, block, columns, _ = sizes
        transpose = self._sole_reader(node.output[0], "Transpose")
        back = self._sole_reader(transpose.output[0], "Reshape") if transpose is not None and tuple(
            _attributes(transpose).get("perm", ())) == UNSHUFFLE_PERM else None
        joined = [channels * block * block, rows, columns]
        if back is None or self._target(back, _attributes(back), (channels, block, block, rows, columns)) != joined:
            raise _Refused(f"reshapes the image to {sizes}, then is no pixel_unshuffle (a Transpose "
                           f"{list(UNSHUFFLE_PERM)} and a Reshape to {joined}, each read by the next alone)")
        self.folded.update((id(transpose), id(back)))
        self._set(back, self._emit(label, "space_to_depth", [value.spec], block=block, order="channel_major"), FIRST)

    def _space_to_depth(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """ONNX's SpaceToDepth (block-major: the tile's position outer, the channel inner)."""
        value = self._value(node, 0)
        self._image_shape(value)
        self._set(node, self._emit(label, "space_to_depth", [value.spec],
                                   block=positive(int(attributes.get("blocksize", 0)), "blocksize")), FIRST)

    def _strided_restore(self, node: onnx.NodeProto, value: _Tensor, shape: Shape) -> None:
        """torch's as_strided written by the default exporter (after ConvNeXt's global pool): every value flattened,
        batch and all, then a Gather of indices computed from the batch size. Where those indices are each example's
        values in their own order, at batch 1 and at batch 2 alike, it gives back the tensor it read: no layer. A
        file that fixes its batch (exported without dynamic axes: its example's) holds them as constants for that
        batch alone, and there they are shown at it, as every layer of such a file is."""
        gather = self._sole_reader(node.output[0], "Gather")
        indices = self.constants.get(gather.input[1]) if gather is not None else None
        size = math.prod(shape)

        def restores(found: np.ndarray | None, batch: int) -> bool:
            return found is not None and found.shape == (batch, *shape) and np.array_equal(
                found.reshape(-1), np.arange(batch * size))

        shown = restores(indices, self.batch) if self.batch else restores(indices, 1) and restores(
            self.computed_at_batch_2.get(gather.input[1]) if gather is not None else None, 2)
        if gather is None or _attributes(gather).get("axis", 0) != 0 or not shown:
            raise _Refused("flattens the batch with the values, other than for torch's as_strided giving back the "
                           "same tensor; the importer maps a flatten and (C) -> (C, 1, 1)")
        self.folded.add(id(gather))
        self.tensors[gather.output[0]] = value

    def _transpose(self, node: onnx.NodeProto, attributes: dict) -> None:
        """A transpose between NCHW and NHWC changes only the layout the importer tracks; no layer is made."""
        value = self._value(node, 0)
        perm = tuple(attributes.get("perm", ()))
        moves = {(FIRST, TO_LAST): SAME, (SAME, TO_FIRST): FIRST}
        if (value.layout, perm) in moves and len(self.shapes[value.spec]) == 3:
            self._set(node, value.spec, moves[(value.layout, perm)])
        elif perm != (0, 1):
            raise _Refused(f"permutes {list(perm)}; the importer follows only NCHW <-> NHWC transposes (and NCHW to "
                           f"HWNC where an adaptive average pool's decomposition starts)")
        else:
            self.tensors[node.output[0]] = value

    def _pad(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Zeros around H and W: taken in by the Conv that is its one reader, else a zeropad2d layer; the edge
        mirrored or repeated (modes reflect and edge: torch's ReflectionPad2d and ReplicationPad2d), a pad2d layer."""
        value = self._value(node, 0)
        self._image_shape(value)
        pads, fill = self._constant(node, 1, "pads", integers=True), self._scalar(node, 2, "constant value")
        axes = self._constant(node, 3, "axes", integers=True)
        mode = _text(attributes.get("mode", "constant"))
        if mode not in PAD_MODES or (fill is not None and float(fill) != 0):
            raise _Refused(f"pads with {mode} values other than zeros; the spec pads zeros (zeropad2d), or reflects "
                           f"or repeats the edge (pad2d)")
        pads = [int(pad) for pad in pads.reshape(-1)] if pads is not None else []
        axes = [_axis(int(a), 4) for a in axes.reshape(-1)] if axes is not None else [0, 1, 2, 3]
        by_axis = {axis: (pads[i], pads[i + len(axes)]) for i, axis in enumerate(axes)} if len(pads) == \
            2 * len(axes) else {}
        if not by_axis or any(by_axis.get(axis, (0, 0)) != (0, 0) for axis in (0, 1)) or min(pads) < 0:
            raise _Refused(f"pads {pads}; the spec's zeropad2d adds pixels >= 0 on H and W only")
        (top, bottom), (left, right) = by_axis.get(2, (0, 0)), by_axis.get(3, (0, 0))
        if PAD_MODES[mode]:
            self._set(node, self._emit(label, "pad2d", [value.spec], top=top, bottom=bottom, left=left, right=right,
                                       mode=PAD_MODES[mode]), FIRST)
            return
        if self._sole_reader(node.output[0], "Conv") is not None:
            self.padding[node.output[0]] = (top, bottom, left, right)
            self.tensors[node.output[0]] = value
            return
        self._set(node, self._emit(label, "zeropad2d", [value.spec], top=top, bottom=bottom, left=left,
                                   right=right), FIRST)

    def _resize(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        image = self._image_shape(value)
        mode, where = _text(attributes.get("mode", "nearest")), _text(attributes.get("coordinate_transformation_mode",
                                                                                     "half_pixel"))
        nearest = _text(attributes.get("nearest_mode", "round_prefer_floor"))
        scales, sizes = self._constant(node, 2, "scales"), self._constant(node, 3, "sizes", integers=True)
        if attributes.get("axes") is not None or attributes.get("antialias"):
            raise _Refused("names its axes or antialiases; the importer reads plain 4-D scales or sizes")
        if scales is not None and scales.size:
            factors = [float(s) for s in scales.reshape(-1)]
        elif sizes is not None and sizes.size == 4:
            factors = [1.0, float(sizes[1]) / image[2], float(sizes[2]) / image[0], float(sizes[3]) / image[1]]
        else:
            raise _Refused("has neither constant scales nor sizes")
        if len(factors) != 4 or factors[:2] != [1.0, 1.0] or min(factors) <= 0:
            raise _Refused(f"scales by {factors}; the spec resizes height and width only")
        # the modes whose integer-scale result is the spec's upsample2d: each pixel repeated, or torch's bilinear
        repeats = (where in ("half_pixel", "pytorch_half_pixel") and nearest.startswith("round_prefer")) or \
            (where in ("asymmetric", "tf_half_pixel_for_nn") and nearest == "floor")
        factor = factors[2]
        if factors[2] == factors[3] == int(factor) >= 1 and (mode == "nearest" and repeats or mode == "linear" and
                                                             where in ("half_pixel", "pytorch_half_pixel")):
            self._set(node, self._emit(label, "upsample2d", [value.spec], scale=int(factor),
                                       interpolation="nearest" if mode == "nearest" else "bilinear"), FIRST)
            return
        # any other size or scale, as torch's F.interpolate computes it (its legacy nearest, its bilinear)
        if mode == "nearest" and where == "asymmetric" and nearest == "floor":
            options = {"interpolation": "nearest"}
        elif mode == "linear" and where in ("half_pixel", "pytorch_half_pixel", "align_corners"):
            options = {"interpolation": "bilinear", "align_corners": where == "align_corners"}
        else:
            raise _Refused(f"resizes by mode {mode!r}, {where!r} ({nearest!r}); the spec resizes as torch does: "
                           f"nearest (asymmetric, floor), or linear with half-pixel centres or the corners aligned")
        if scales is not None and scales.size:
            options["scale"] = [float(scales.reshape(-1)[2]), float(scales.reshape(-1)[3])]
        else:
            options["size"] = [int(sizes[2]), int(sizes[3])]
        self._set(node, self._emit(label, "resize2d", [value.spec], **options), FIRST)
