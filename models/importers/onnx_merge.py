"""Add, Mul, Concat, Identity, Dropout and a Softmax at the output: the joins and the pass-throughs."""

from __future__ import annotations

import onnx

from models.importers.onnx_common import (
    FIRST,
    _axis,
    _float,
    _Refused,
)
from models.importers.onnx_dropout import DropoutMask


class MergeNodes:
    """The _Importer's merge nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _identity(self, node: onnx.NodeProto, label: str) -> None:
        """Identity passes its value on; Dropout (the identity in inference) becomes the spec's dropout."""
        if len(node.output) > 1 and node.output[1]:
            raise _Refused("outputs its mask; the spec's dropout does not")
        value = self._value(node, 0)
        if node.op_type == "Dropout":
            ratio = self._scalar(node, 1, "ratio")
            rate = 0.5 if ratio is None else _float(ratio)
            self._set(node, self._emit(label, "dropout", [value.spec], rate=rate), value.layout)
        else:
            self.tensors[node.output[0]] = value

    def _dropout(self, node: onnx.NodeProto, mask: DropoutMask, label: str) -> None:
        value = self._value(node, mask.source)
        self._set(node, self._emit(label, "dropout", [value.spec], rate=mask.rate, per_example=mask.per_example),
                  value.layout)

    def _join(self, node: onnx.NodeProto, label: str) -> None:
        """Add, Mul or Sub of two tensors of one layout, as the spec's add, multiply or subtract (PoolFormer's
        pool(x) - x); a Mul by a parameter, as the spec's layerscale; an Add of a scalar zero (timm's
        `out += identity_out`, 0 where a block has no identity branch) passes its tensor on."""
        if node.op_type == "Mul" and any(name in self.constants for name in node.input):
            self._layer_scale(node, label)
            return
        zero = next((position for position, name in enumerate(node.input) if name in self.constants
                     and self.constants[name].ndim == 0 and not self.constants[name].any()), None)
        if node.op_type == "Add" and zero is not None:
            self.tensors[node.output[0]] = self._value(node, 1 - zero)
            return
        values = [self._value(node, 0), self._value(node, 1)]
        if len({value.layout for value in values}) != 1:
            raise _Refused("joins tensors of different layouts")
        kind = {"Add": "add", "Mul": "multiply", "Sub": "subtract"}[node.op_type]
        self._set(node, self._emit(label, kind, [value.spec for value in values]), values[0].layout)

    def _concat(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Concat over the channels of tensors of one layout, the only join the spec's concat makes."""
        values = [self._value(node, i) for i in range(len(node.input))]
        if len(values) == 1:  # torch.cat of a list of one (DenseNet's first layer of a block): the tensor itself
            self.tensors[node.output[0]] = values[0]
            return
        rank = len(self.shapes[values[0].spec]) + 1
        channels = 1 if values[0].layout == FIRST else rank - 1
        if len({value.layout for value in values}) != 1 or isinstance(values[0].layout, tuple) or \
                _axis(int(attributes["axis"]), rank) != channels:
            raise _Refused(f"joins axis {attributes['axis']}; the spec's concat joins channels")
        self._set(node, self._emit(label, "concat", [value.spec for value in values]), values[0].layout)

    def _softmax(self, node: onnx.NodeProto, outputs: list[str]) -> None:
        """A softmax over the class scores at an output is the cross_entropy loss's own: it sets the loss."""
        value = self._value(node, 0)
        if node.output[0] not in outputs or len(self.shapes[value.spec]) != 1 or isinstance(value.layout, tuple):
            raise _Refused("is not over the class scores at the output; the spec's softmax is its "
                           "cross_entropy loss's own")
        self.loss = "cross_entropy"
        self.tensors[node.output[0]] = value
