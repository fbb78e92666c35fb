"""Slices, splits and scatters, each shown to keep the whole batch (a channel slice, a split into parts) or refused."""

from __future__ import annotations

import numpy as np
import onnx

from models.importers.onnx_channels import channel_bounds, chunked
from models.importers.onnx_common import (
    BATCH,
    FIRST,
    _attributes,
    _axis,
    _clamped,
    _Refused,
    _Tensor,
    _text,
)
from models.importers.onnx_graph import feeding
from models.spec import MAX_SIZE

# Ops that pass the one number they read on unchanged (a Concat of one input): between a Shape and a slice's end
PASSING = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Concat"}

# Ops that keep a Range's values in their order while shaping it into ScatterND's (N, 1) indices
INDEX_SHAPING = {"Cast", "Unsqueeze", "Reshape", "Expand", "Slice"}


class BatchNodes:
    """The _Importer's batch nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _slice(self, node: onnx.NodeProto, label: str) -> None:
        """Rows and columns cut off a channels-first image, a crop2d, or some of its channels, a channel_slice: the
        starts and ends constant (ONNX clamps them to the axis, a negative one counting from its end) and every
        step 1. A slice over the batch that takes all of it (GhostNet's `out[:, :n]` in a dynamic-batch export) is
        no layer."""
        value = self._value(node, 0)
        starts, ends = self._constant(node, 1, "starts", integers=True), self._constant(node, 2, "ends", integers=True)
        axes, steps = self._constant(node, 3, "axes", integers=True), self._constant(node, 4, "steps", integers=True)
        if starts is None or ends is None:
            raise _Refused("leaves out its starts or ends")
        starts, ends = [int(start) for start in starts.reshape(-1)], [int(end) for end in ends.reshape(-1)]
        rank = len(self.shapes[value.spec]) + 1
        axes = [_axis(int(a), rank) for a in axes.reshape(-1)] if axes is not None else list(range(len(starts)))
        steps = [int(step) for step in steps.reshape(-1)] if steps is not None else [1] * len(starts)
        if len({len(starts), len(ends), len(axes), len(steps)}) > 1:
            raise _Refused(f"has {len(starts)} starts, {len(ends)} ends, {len(axes)} axes and {len(steps)} steps; "
                           f"ONNX's Slice takes one of each per axis")
        for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
            if axis == 0:
                self._whole_batch(node, start, end, step)
        kept = [i for i, axis in enumerate(axes) if axis != 0]
        if not kept:
            self.tensors[node.output[0]] = value
            return
        starts, ends, axes, steps = ([part[i] for i in kept] for part in (starts, ends, axes, steps))
        height, width, channels = self._image_shape(value)
        if axes == [1] and steps == [1]:
            start, stop = (_clamped(at, channels) for at in (starts[0], ends[0]))
            self._set(node, self._emit(label, "channel_slice", [value.spec], start=start, stop=stop), FIRST)
            return
        if set(axes) - {2, 3} or set(steps) - {1}:
            raise _Refused(f"slices axes {axes} by steps {steps}; the spec's crop2d cuts H and W (axes 2, 3), its "
                           f"channel_slice C (axis 1) alone, by steps of 1")
        sizes = {2: height, 3: width}
        kept = {axis: (0, size) for axis, size in sizes.items()}
        for axis, start, end in zip(axes, starts, ends, strict=True):
            kept[axis] = (_clamped(start, sizes[axis]), _clamped(end, sizes[axis]))
        (top, bottom), (left, right) = [(first, sizes[axis] - last) for axis, (first, last) in sorted(kept.items())]
        self._set(node, self._emit(label, "crop2d", [value.spec], top=top, bottom=bottom, left=left, right=right),
                  FIRST)

    def _whole_batch(self, node: onnx.NodeProto, start: int, end: int, step: int) -> None:
        """Refuses a slice over the batch unless it provably keeps every example: from 0 by 1 to an end no batch
        reaches (torch writes INT64_MAX; a fixed batch's own size or more), or to the batch size itself."""
        if self._keeps_batch(node.input[2], start, end, step):
            return
        computed = self._from_shapes(node.input[2])
        raise _Refused(f"slices the batch (axis 0) from {start} to {'an end computed from shapes' if computed else end}"
                       f" by {step}; the spec keeps every example (the importer maps a slice over the batch from 0 to "
                       f"INT64_MAX or to the batch size, Shape(x)[0])")

    def _keeps_batch(self, ends: str, start: int, end: int, step: int) -> bool:
        """Whether a slice over the batch from `start` to `end` (the tensor `ends` holds) by `step` keeps every
        example: see `_whole_batch`."""
        return (start, step) == (0, 1) and (self._batch_size(ends) if self._from_shapes(ends)
                                            else end >= (self.batch or MAX_SIZE))

    def _from_shapes(self, tensor: str) -> bool:
        """Whether `tensor` is computed from a Shape or Size: the folder's value holds at batch 1 alone."""
        return any(part.op_type in ("Shape", "Size") for part in feeding(self.graph.node, [tensor]))

    def _batch_size(self, tensor: str) -> bool:
        """Whether `tensor` is the batch size alone, Shape(x)[0] of a tensor x the importer maps (its axis 0 the
        batch): a Shape from axis 0 to 1, or a Gather of position 0 of a Shape from axis 0, passed on by PASSING."""
        producers = {output: node for node in self.graph.node for output in node.output}
        node = producers.get(tensor)
        while node is not None and node.op_type in PASSING and (node.op_type != "Concat" or len(node.input) == 1):
            node = producers.get(node.input[0])
        if node is not None and node.op_type == "Gather" and _attributes(node).get("axis", 0) == 0 and \
                self.constants.get(node.input[1], np.array(-1)).reshape(-1).tolist() == [0]:
            node = producers.get(node.input[0])
            last = None
        else:
            last = 1  # a Shape read whole must end after the batch
        if node is None or node.op_type != "Shape" or node.input[0] not in self.tensors:
            return False
        attributes = _attributes(node)
        return attributes.get("start", 0) == 0 and attributes.get("end") == last

    def _scatter_over_batch(self, node: onnx.NodeProto, attributes: dict) -> None:
        """torch's slice_scatter over the whole batch as the default exporter writes it (GhostNet's `x += shortcut`
        on `x = out[:, :n]`): a ScatterND of `updates` at every example of `data`, in order, replaces all of it, so
        its output is `updates`: no layer."""
        data, updates = self._value(node, 0), self._value(node, 2)
        reduction = _text(attributes.get("reduction", "none"))
        if reduction != "none" or updates.layout != data.layout or \
                self.shapes[updates.spec] != self.shapes[data.spec] or not self._enumerates_batch(node.input[1]):
            raise _Refused(f"scatters (reduction {reduction!r}) other than updates of data's shape over the whole "
                           f"batch; the importer maps a ScatterND whose indices are Range(0, Shape(x)[0], 1) as (N, "
                           f"1), with reduction 'none': its output is its updates")
        self.tensors[node.output[0]] = updates

    def _enumerates_batch(self, tensor: str) -> bool:
        """Whether `tensor` is provably 0..N-1 as (N, 1), N the batch: a Range from 0 by 1 to the batch size (or the
        file's fixed batch), then ops of INDEX_SHAPING each shown, by its constant inputs, to keep the values."""
        producers = {output: node for node in self.graph.node for output in node.output}
        shaping, node = [], producers.get(tensor)
        while node is not None and node.op_type in INDEX_SHAPING:
            shaping.append(node)
            node = producers.get(node.input[0])
        if node is None or node.op_type != "Range" or [self._numbers(node.input[at]) for at in (0, 2)] != [[0], [1]] \
                or not (self._batch_size(node.input[1]) or self._numbers(node.input[1]) == [self.batch]):
            return False
        shape: tuple[int | None, ...] | None = (BATCH,)
        for step in reversed(shaping):
            shape = self._index_shape(step, shape)
            if shape is None:
                return False
        return shape == (BATCH, 1)

    def _numbers(self, tensor: str) -> list[int] | None:
        """The whole numbers a small constant holds in order (an axis, a shape, a bound), read through PASSING ops
        (whose values the folder may leave out once it folded their reader); None where it is no such constant or
        is computed from shapes (its value known at batch 1 alone)."""
        if tensor in self.constants:
            value = self.constants[tensor]
            return value.reshape(-1).tolist() if value.dtype.kind in "iu" and not self._from_shapes(tensor) else None
        node = next((node for node in self.graph.node if tensor in node.output), None)
        if node is None or node.op_type not in PASSING:
            return None
        parts = [self._numbers(part) for part in (node.input if node.op_type == "Concat" else node.input[:1])]
        return None if None in parts else [number for part in parts for number in part]

    def _index_shape(self, node: onnx.NodeProto, shape: tuple[int | None, ...]) -> tuple[int | None, ...] | None:
        """The shape of a Range's values after `node` of INDEX_SHAPING, or None where it is not shown to keep them
        in order: an Unsqueeze, a Reshape to ones and one -1, an Expand to ones, a Slice over the batch keeping all."""
        if node.op_type == "Cast":
            return shape
        sizes = self._numbers(node.input[1]) if len(node.input) > 1 else None
        if sizes is None or shape.count(BATCH) != 1 or set(shape) - {BATCH, 1}:
            return None
        if node.op_type == "Unsqueeze":
            rank = len(shape) + len(sizes)
            axes = {_axis(axis, rank) for axis in sizes}
            kept = iter(shape)
            return tuple(1 if axis in axes else next(kept) for axis in range(rank)) if len(axes) == len(sizes) and \
                axes <= set(range(rank)) else None
        if node.op_type == "Reshape":
            return tuple(BATCH if size == -1 else size for size in sizes) if sorted(sizes)[1:] == [1] * (
                len(sizes) - 1) and -1 in sizes else None
        if node.op_type == "Expand":
            return (1,) * (len(sizes) - len(shape)) + shape if set(sizes) <= {1} else None
        return shape if self._slice_keeps_batch(node, sizes, shape) else None

    def _slice_keeps_batch(self, node: onnx.NodeProto, starts: list[int], shape: tuple[int | None, ...]) -> bool:
        """Whether a Slice of a Range's values takes all of them: one slice, of their batch axis, from 0 by 1 to
        the end (`_keeps_batch`: an end computed from shapes is the batch size itself)."""
        ends, axes, steps = (self._numbers(node.input[at]) if len(node.input) > at and node.input[at] else default
                             for at, default in ((2, None), (3, [0]), (4, [1])))
        if ends is None and self._from_shapes(node.input[2]):
            ends = [0]  # not read: _keeps_batch reads such an end as a tensor
        if ends is None or axes is None or steps is None or not len(starts) == len(ends) == len(axes) == len(
                steps) == 1 or _axis(axes[0], len(shape)) != shape.index(BATCH):
            return False
        return self._keeps_batch(node.input[2], starts[0], ends[0], steps[0])

    def _split(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """torch.chunk or split of a channels-first image's channels: Split (the legacy exporter's) makes one
        channel_slice per part read; SplitToSequence (the default exporter's) keeps the parts' bounds for the
        SequenceAt that reads each. Split's parts are equal but the last without a split; SplitToSequence's are
        single channels without one, and of the scalar split's size but the last with one."""
        value = self._value(node, 0)
        channels = self._image_shape(value)[2]
        if _axis(int(attributes.get("axis", 0)), 4) != 1:
            raise _Refused(f"splits axis {attributes.get('axis', 0)}; the spec's channel_slice takes the channels "
                           f"(axis 1) of a channels-first image")
        split = self._constant(node, 1, "split", integers=True)
        if node.op_type == "Split":
            parts = int(attributes.get("num_outputs", len(node.output)))
            sizes = chunked(channels, -(-channels // parts)) if split is None else split.reshape(-1).tolist()
        elif split is None and not attributes.get("keepdims", 1):
            raise _Refused("drops the channel axis (keepdims 0); the spec's channel_slice keeps it")
        else:
            sizes = [1] * channels if split is None else (chunked(channels, int(split)) if split.ndim == 0
                                                           else split.reshape(-1).tolist())
        bounds = channel_bounds(channels, [int(size) for size in sizes])
        if bounds is None or (node.op_type == "Split" and len(bounds) != len(node.output)):
            raise _Refused(f"splits {channels} channels into {sizes} for {len(node.output)} outputs; the parts must "
                           f"fill the channels, one output each")
        if node.op_type == "SplitToSequence":
            self.sequences[node.output[0]] = (value, bounds)
            return
        for index, (output, (start, stop)) in enumerate(zip(node.output, bounds, strict=True)):
            if output in self.readers or any(output == end.name for end in self.graph.output):
                spec = self._emit(f"{label}_{index}", "channel_slice", [value.spec], start=start, stop=stop)
                self.tensors[output] = _Tensor(spec, FIRST)

    def _sequence_at(self, node: onnx.NodeProto, label: str) -> None:
        """One part of a SplitToSequence of the channels, at a constant position: a channel_slice."""
        if node.input[0] not in self.sequences:
            raise _Refused(f"reads {node.input[0]!r}, which is no mapped SplitToSequence of the channels")
        value, bounds = self.sequences[node.input[0]]
        position = self._scalar(node, 1, "position", integers=True)
        if position is None:
            raise _Refused("leaves out its position")
        if not -len(bounds) <= position < len(bounds):
            raise _Refused(f"reads part {position} of {len(bounds)}")
        start, stop = bounds[position]
        self._set(node, self._emit(label, "channel_slice", [value.spec], start=start, stop=stop), FIRST)
