"""MaxPool, AveragePool, the global mean and an adaptive pool's decomposition as the spec's pools."""

from __future__ import annotations

import onnx

from models.importers import onnx_adaptive_pool
from models.importers.onnx_common import (
    FIRST,
    SAME,
    _axis,
    _Refused,
    _square,
    _Tensor,
)
from models.spec import MaxPool2D


class PoolingNodes:
    """The _Importer's pooling nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _pool(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        image = self._image_shape(value)
        if any(d != 1 for d in attributes.get("dilations", [1, 1])) or (len(node.output) > 1 and node.output[1]):
            raise _Refused("is dilated or outputs indices; the spec's pools do neither")
        pool = _square(list(attributes["kernel_shape"]), "kernel_shape")
        stride = _square(list(attributes.get("strides", [1, 1])), "strides")
        pads = self._pads(attributes, image, pool, stride)
        counted = bool(attributes.get("count_include_pad")) and node.op_type == "AveragePool"
        ceil_mode = bool(attributes.get("ceil_mode")) and any(MaxPool2D(pool, stride, min(pads), ceil_mode=True)
                                                              .overhang(image))  # a rounding up that adds a window
        if ceil_mode and counted:
            raise _Refused("rounds up (ceil_mode) and counts the padding (count_include_pad=1); the spec's average "
                           "pool in ceil_mode leaves the padding out of the mean")
        source, padding = value.spec, pads[0]
        if len(set(pads)) != 1:
            if not counted:
                raise _Refused(f"pads {pads} (top, bottom, left, right), not the same on every side, and the "
                               f"padding never counts (the spec's pools pad symmetrically)")
            padding = min(pads)  # zeros counted either way: the difference as a zeropad2d before
            top, bottom, left, right = (pad - padding for pad in pads)
            source = self._emit(f"{label}_pad", "zeropad2d", [source], top=top, bottom=bottom, left=left, right=right)
        options = {"ceil_mode": True} if ceil_mode else {}
        if node.op_type == "AveragePool" and not counted and (padding or ceil_mode):
            options["count_include_pad"] = False  # ONNX's default: the padding, and any overhang, left out
        kind = "maxpool2d" if node.op_type == "MaxPool" else "avgpool2d"
        self._set(node, self._emit(label, kind, [source], pool=pool, stride=stride, padding=padding, **options), FIRST)

    def _global_pool(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """GlobalAveragePool, or a ReduceMean over H and W, as the spec's global_avg_pool."""
        value = self._value(node, 0)
        self._image_shape(value)
        if node.op_type == "ReduceMean":
            axes = attributes.get("axes")
            if axes is None:  # opset 18 on: an input
                given = self._constant(node, 1, "axes", integers=True)
                axes = [] if given is None else given.reshape(-1).tolist()
            if sorted(_axis(int(a), 4) for a in axes) != [2, 3]:
                raise _Refused(f"averages axes {axes}; the spec's global_avg_pool averages H and W (2, 3)")
        keepdims = node.op_type == "GlobalAveragePool" or bool(attributes.get("keepdims", 1))
        self._set(node, self._emit(label, "global_avg_pool", [value.spec], keepdims=keepdims),
                  FIRST if keepdims else SAME)

    def _adaptive_pool(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """The Transpose that starts the exporter's decomposition of an adaptive average pool
        (models/importers/onnx_adaptive_pool.py): its nodes are taken in, the tensor that is the pool becomes one
        adaptive_avgpool2d named after its node. Anything else is refused as the Transpose it is."""
        value = self._value(node, 0)
        pool = onnx_adaptive_pool.adaptive_pool(node, self._image_shape(value), self.readers, self.constants,
                                                self.opset, {output.name for output in self.graph.output}) \
            if value.layout == FIRST and len(self.shapes[value.spec]) == 3 else None
        if pool is None:
            self._transpose(node, attributes)
            return
        self.folded.update(id(part) for part in pool.chain)
        end = next(part for part in pool.chain if pool.output in part.output)
        height, width = pool.size
        self.tensors[pool.output] = _Tensor(self._emit(end.name or pool.output, "adaptive_avgpool2d", [value.spec],
                                                       size=height if height == width else [height, width]), FIRST)
