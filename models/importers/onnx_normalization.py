"""BatchNormalization, LayerNormalization and a per-channel Mul (a layer scale) as the spec's normalizations."""

from __future__ import annotations

import onnx

from models.importers.fixes import Fix
from models.importers.onnx_common import (
    FIRST,
    SAME,
    _axis,
    _float,
    _Refused,
)


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
