"""BatchNormalization, LayerNormalization, GroupNormalization, InstanceNormalization (torch's group norm written
with one) and a per-channel Mul (a layer scale) as the spec's normalizations."""

from __future__ import annotations

import numpy as np
import onnx

from models.importers.fixes import Fix
from models.importers.onnx_common import (
    FIRST,
    SAME,
    _attributes,
    _axis,
    _float,
    _Refused,
    _torch_call,
)
from models.spec import positive

# the position of a torch norm call's weight among its arguments (`_torch_call`): whether the norm learns one
WEIGHT_ARGUMENT = {"aten.group_norm": 2, "aten.native_group_norm": 1, "aten.instance_norm": 1}


class NormalizationNodes:
    """The _Importer's normalization nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _batchnorm(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        if attributes.get("training_mode") or (len(node.output) > 1 and any(node.output[1:])):
            raise _Refused(f"runs in training mode; the importer reads inference graphs; fix: {Fix.EVAL_EXPORT}")
        if value.layout not in (FIRST, SAME) or (value.layout == SAME and len(self.shapes[value.spec]) != 1):
            raise _Refused("normalizes an axis other than the channels")
        weights = {name: self._constant(node, position, name)
                   for position, name in enumerate(("scale", "offset", "mean", "variance"), start=1)}
        self._set(node, self._emit(label, "batchnorm", [value.spec], weights,  # type: ignore[arg-type]
                                   epsilon=_float(attributes.get("epsilon", 1e-5)),
                                   momentum=round(1 - _float(attributes.get("momentum", 0.9)), 12)), value.layout)

    def _layernorm(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        rank = len(self.shapes[value.spec]) + 1
        if value.layout != SAME or _axis(int(attributes.get("axis", -1)), rank) != rank - 1:
            raise _Refused("normalizes other axes than the channels alone (a flat tensor's last axis, or an image "
                           "made channels-last by a Transpose)")
        scale, offset = self._constant(node, 1, "scale"), self._constant(node, 2, "bias")
        if offset is None:
            raise _Refused("has no bias; the spec's layernorm holds an offset")
        weights = {"scale": scale.reshape(-1), "offset": offset.reshape(-1)}
        self._set(node, self._emit(label, "layernorm", [value.spec], weights,
                                   epsilon=_float(attributes.get("epsilon", 1e-5))), SAME)

    def _layer_scale(self, node: onnx.NodeProto, label: str) -> None:
        """A tensor times a parameter (an initializer, or one reshaped: not the exporter's arithmetic) of one value
        per channel: (C, 1, 1) on a channels-first image (torchvision's ConvNeXt's layer_scale), or (1, C, 1, 1)
        (timm's), (C,) on the last axis of a flat or channels-last tensor, each with leading 1s up to the tensor's
        rank. Its values are the layer scale's trainable weights."""
        position = next(i for i, name in enumerate(node.input) if name in self.constants)
        value, gamma = self._value(node, 1 - position), self._constant(node, position, "scale")
        shape = self.shapes[value.spec]
        wanted = (shape[-1], 1, 1) if value.layout == FIRST else (shape[-1],)
        leading = gamma.shape[:gamma.ndim - len(wanted)]  # 1s over the batch (and the rows of a channels-last map)
        if isinstance(value.layout, tuple) or gamma.shape[len(leading):] != wanted or set(leading) - {1} or \
                len(leading) > len(shape) + 1 - len(wanted) or node.input[position] not in self.parameters:
            raise _Refused(f"multiplies by a constant of shape {list(gamma.shape)}; the spec's layerscale multiplies "
                           f"by a parameter (an initializer, or one reshaped) of one value per channel, "
                           f"{list(wanted)} here (or with leading 1s)")
        self._set(node, self._emit(label, "layerscale", [value.spec], {"scale": gamma.reshape(-1)}), value.layout)

    def _find_group_norms(self, nodes: list[onnx.NodeProto]) -> None:
        """torch's group norm as both its exporters write it (onnxscript's aten_group_norm): a Reshape of the image
        to (N, G, -1), an InstanceNormalization over the G groups, a Reshape back (to a constant shape, or to the
        Shape of the image), then a Mul and an Add per channel. Each such Reshape becomes one group norm
        (`_group_norm`): the nodes after it are taken in here, before any is read as a layer of its own."""
        producer = {tensor: node for node in nodes for tensor in node.output}
        for node in nodes:
            norm = self._sole_reader(node.output[0], "InstanceNormalization") if node.op_type == "Reshape" else None
            back = self._sole_reader(norm.output[0], "Reshape") if norm is not None else None
            if back is None:
                continue
            shape = producer.get(back.input[1])
            taken = [norm, back, *([shape] if shape is not None and shape.op_type == "Shape" else [])]
            mul = self._sole_reader(back.output[0], "Mul")
            add = self._sole_reader(mul.output[0], "Add") if mul is not None else None
            self.group_norms[id(node)] = (norm, back, mul, add)
            self.folded.update(id(part) for part in (*taken, mul, add) if part is not None)

    def _group_norm(self, node: onnx.NodeProto, label: str) -> None:
        """One group norm of `_find_group_norms`: its groups from the first Reshape, its epsilon from the
        InstanceNormalization (whose scale and bias are ones and zeros over the groups), its scale and offset from
        the Mul and Add, or none where torch's call had none (its metadata) or the graph has no Mul."""
        norm, back, mul, add = self.group_norms[id(node)]
        value = self._value(node, 0)
        h, w, channels = self._image_shape(value)
        target = [int(size) for size in self._constant(node, 1, "shape", integers=True).reshape(-1)]
        groups = target[1] if len(target) == 3 else 0
        if len(target) != 3 or target[0] not in (0, self.batch) or groups <= 0 or channels % groups or \
                target[2] not in (-1, channels // groups * h * w):
            raise _Refused(f"reshapes the image to {target} before an InstanceNormalization; torch's group norm "
                           f"reshapes (N, C, H, W) to (N, groups, -1)")
        ones, zeros = self._constant(norm, 1, "scale"), self._constant(norm, 2, "bias")
        if ones.shape != (groups,) or zeros.shape != (groups,) or (ones != 1).any() or zeros.any():
            raise _Refused("normalizes the groups with a scale or bias of its own; torch's group norm scales each "
                           "channel after the Reshape back")
        weights, out = {}, back
        affine = _torch_affine(norm)
        if mul is not None and add is not None:
            scale, offset = (self._per_channel(part, channels) for part in (mul, add))
            learned = mul.input[1 - self._value_position(mul)] in self.parameters
            if affine or (affine is None and learned):
                weights = {"scale": scale, "offset": offset}
            elif (scale != 1).any() or offset.any():
                raise _Refused("scales and shifts its groups by constants that are not learned; the spec's group "
                               "norm learns them or has none")
            out = add
        elif mul is not None:
            raise _Refused("scales its groups but adds no offset; the spec's group norm learns both or neither")
        epsilon = _float(_attributes(norm).get("epsilon", 1e-5))
        self._set(out, self._emit(label, "groupnorm", [value.spec], weights or None, groups=groups, epsilon=epsilon,
                                  affine=bool(weights)), FIRST)

    def _value_position(self, node: onnx.NodeProto) -> int:
        """Which of a Mul's or Add's two inputs is the computed one (the other a constant)."""
        return 0 if node.input[1] in self.constants else 1

    def _per_channel(self, node: onnx.NodeProto, channels: int) -> np.ndarray:
        """The constant a Mul or Add applies per channel of a channels-first image: (C, 1, 1), with leading 1s."""
        position = 1 - self._value_position(node)
        values = self._constant(node, position, "scale" if node.op_type == "Mul" else "offset")
        if values.size != channels or values.shape[-3:] != (channels, 1, 1):
            raise _Refused(f"applies a constant of shape {list(values.shape)} after a group norm; torch's is "
                           f"(C, 1, 1), one value per channel ({channels})")
        return values.reshape(-1)

    def _instance_norm(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """InstanceNormalization of a channels-first image: the spec's instancenorm, learning the node's scale and
        bias where torch's call had them (its metadata), else where they are the file's parameters; otherwise they
        must be ones and zeros (torch's exporter writes them for an instance norm without its own)."""
        value = self._value(node, 0)
        self._image_shape(value)
        scale, bias = self._constant(node, 1, "scale"), self._constant(node, 2, "bias")
        affine = _torch_affine(node)
        affine = node.input[1] in self.parameters if affine is None else affine
        if not affine and ((scale != 1).any() or bias.any()):
            raise _Refused("scales and shifts by constants that are not learned; the spec's instance norm learns them "
                           "or has none")
        self._set(node, self._emit(label, "instancenorm", [value.spec],
                                   {"scale": scale, "offset": bias} if affine else None,
                                   epsilon=_float(attributes.get("epsilon", 1e-5)), affine=affine), FIRST)

    def _group_normalization(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """ONNX's own GroupNormalization (opset 21's, a scale and bias per channel) as the spec's groupnorm."""
        value = self._value(node, 0)
        channels = self._image_shape(value)[2]
        scale, bias = self._constant(node, 1, "scale"), self._constant(node, 2, "bias")
        if scale.shape != (channels,) or bias.shape != (channels,):
            raise _Refused(f"scales per group ({list(scale.shape)}: GroupNormalization before opset 21); the spec's "
                           f"group norm scales each of the {channels} channels")
        affine = _torch_affine(node)
        affine = node.input[1] in self.parameters if affine is None else affine
        if not affine and ((scale != 1).any() or bias.any()):
            raise _Refused("scales and shifts by constants that are not learned; the spec's group norm learns them "
                           "or has none")
        groups = positive(int(attributes.get("num_groups", 0)), "num_groups")
        self._set(node, self._emit(label, "groupnorm", [value.spec], {"scale": scale, "offset": bias} if affine
                                   else None, groups=groups, epsilon=_float(attributes.get("epsilon", 1e-5)),
                                   affine=affine), FIRST)


def _torch_affine(node: onnx.NodeProto) -> bool | None:
    """Whether the torch call a node was exported from had a weight (a group or instance norm that learns its scale),
    where torch's exporter wrote the call into the node's metadata; None where it did not. torch writes ones and zeros
    for a norm without weights, which its optimizer may store as one initializer with a parameter of equal values."""
    call = _torch_call(node)
    if call is None or call[0] not in WEIGHT_ARGUMENT:
        return None
    target, arguments = call
    return WEIGHT_ARGUMENT[target] < len(arguments) and arguments[WEIGHT_ARGUMENT[target]] != "None"
