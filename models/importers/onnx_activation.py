"""The activations: one op, or the few an exporter writes one as (x * sigmoid(x), torch's softplus threshold,
mish), as one spec layer."""

from __future__ import annotations

import numpy as np
import onnx

from models.importers.onnx_common import (
    FIRST,
    _float,
    _Refused,
    _Tensor,
    _text,
)

ELEMENTWISE = {"Relu": "relu", "Sigmoid": "sigmoid", "HardSigmoid": "hard_sigmoid", "HardSwish": "hard_swish",
               "LeakyRelu": "leaky_relu", "Elu": "elu", "Softplus": "softplus", "Mish": "mish", "Swish": "silu"}

# The activations' attributes as the spec layer's options: op -> each (option, attribute, ONNX's default)
ELEMENTWISE_OPTIONS = {"LeakyRelu": (("negative_slope", "alpha", 0.01),), "Elu": (("alpha", "alpha", 1.0),)}

# x * gate(x) as one spec layer: a Mul of a value and its sigmoid is silu, of its hard sigmoid hard_swish (torch's
# export of Hardswish before opset 14)
GATED = {"Sigmoid": "silu", "HardSigmoid": "hard_swish"}

# HardSigmoid's max(0, min(1, alpha x + beta)) that is the spec's relu6(x + 3) / 6 (torch's export; ONNX's own
# default is 0.2 x + 0.5), as float32, ONNX's attribute type
HARD_SIGMOID = (np.float32(1 / 6), np.float32(0.5))


class ActivationNodes:
    """The _Importer's activation nodes (models.importers.onnx_file reads the graph and sends each node here)."""

    def _elementwise(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """An activation (ELEMENTWISE), folding x * sigmoid(x) and x * hard_sigmoid(x) into one layer (GATED)."""
        value = self._value(node, 0)
        if node.op_type == "HardSigmoid":
            alpha, beta = np.float32(attributes.get("alpha", 0.2)), np.float32(attributes.get("beta", 0.5))
            if (alpha, beta) != HARD_SIGMOID:
                raise _Refused(f"computes max(0, min(1, {_float(alpha)} x + {_float(beta)})); the spec's hard_sigmoid "
                               f"is alpha 1/6, beta 0.5 (torch's export)")
        if node.op_type == "Swish" and _float(attributes.get("alpha", 1.0)) != 1:  # opset 24's x * sigmoid(alpha x)
            raise _Refused(f"computes x * sigmoid({_float(attributes['alpha'])} x); the spec's silu is x * sigmoid(x)")
        if node.op_type == "Softplus" and self._mish(node, value, label):
            return
        gated = self._sole_reader(node.output[0], "Mul") if node.op_type in GATED else None
        if gated is not None and sorted(gated.input) == sorted([node.input[0], node.output[0]]):
            self.folded.add(id(gated))  # x * gate(x): one layer
            self.tensors[gated.output[0]] = _Tensor(self._emit(gated.name or label, GATED[node.op_type],
                                                               [value.spec]), value.layout)
        else:
            options = {option: _float(attributes.get(attribute, default))
                       for option, attribute, default in ELEMENTWISE_OPTIONS.get(node.op_type, ())}
            self._set(node, self._emit(label, ELEMENTWISE[node.op_type], [value.spec], **options), value.layout)

    def _mish(self, node: onnx.NodeProto, value: _Tensor, label: str) -> bool:
        """x * tanh(softplus(x)), the legacy exporter's Mish, as one mish layer (its Tanh and Mul taken in)."""
        tanh = self._sole_reader(node.output[0], "Tanh")
        gated = self._sole_reader(tanh.output[0], "Mul") if tanh else None
        if gated is None or sorted(gated.input) != sorted([node.input[0], tanh.output[0]]):
            return False
        self.folded.update((id(tanh), id(gated)))
        self.tensors[gated.output[0]] = _Tensor(self._emit(gated.name or label, "mish", [value.spec]), value.layout)
        return True

    def _by_one(self, node: onnx.NodeProto) -> int | None:
        """The position of the input a Mul or Div passes on unchanged: a layer's output times (or divided by) the
        number 1, a constant, not a parameter (torch's unoptimized export of elu's scales and softplus's beta at
        1); None for any other."""
        for position in (1, 0) if node.op_type == "Mul" else (1,):
            factor, other = node.input[position], node.input[1 - position]
            value = self.constants.get(factor)
            if value is not None and factor not in self.parameters and other not in self.constants \
                    and value.size == 1 and value.dtype.kind in "fiu" and value.reshape(-1)[0] == 1:
                return 1 - position
        return None

    def _threshold(self, node: onnx.NodeProto) -> None:
        """x > threshold, read only by Wheres: torch's softplus, which returns x past its threshold (20)."""
        value, threshold = self._value(node, 0), self._scalar(node, 1, "threshold")
        readers = self.readers.get(node.output[0], [])
        if threshold is None or not readers or any(reader.op_type != "Where" or reader.input[0] != node.output[0]
                                                   for reader in readers):
            raise _Refused("compares values; the spec has no comparison (torch's softplus threshold, a Where of x "
                           "past it, is read as softplus)")
        self.thresholds[node.output[0]] = (value.spec, float(threshold))

    def _softplus_threshold(self, node: onnx.NodeProto) -> None:
        """Where(x > threshold, x, softplus(x)), torch's softplus: the spec's softplus where float32 cannot tell
        softplus(x) from x past the threshold (torch's 20: they differ by 2e-9)."""
        compared, threshold = self.thresholds[node.input[0]]
        value, softplus = self._value(node, 1), self._value(node, 2)
        made = next((entry for entry in self.entries if entry["name"] == softplus.spec), {})
        if (made.get("type"), made.get("inputs")) != ("softplus", [compared]) or value.spec != compared \
                or value.layout != softplus.layout:
            raise _Refused("selects between values other than x and its softplus by x > threshold (torch's "
                           "softplus); the spec has no selection")
        if np.float32(threshold) != np.float32(np.logaddexp(threshold, 0)):
            raise _Refused(f"returns x past {threshold}, where softplus(x) differs from x in float32; the spec's "
                           f"softplus has no threshold (torch's 20 has none it shows)")
        self.tensors[node.output[0]] = softplus

    def _clip(self, node: onnx.NodeProto, label: str) -> None:
        """Clip as the spec's relu (0, None) or relu6 (0, 6), the only bounds it has."""
        value = self._value(node, 0)
        low, high = self._scalar(node, 1, "min"), self._scalar(node, 2, "max")
        bounds = (None if low is None else _float(low), None if high is None else _float(high))
        if bounds not in ((0.0, 6.0), (0.0, None)):
            raise _Refused(f"clips to {bounds}; the spec has relu (0, None) and relu6 (0, 6)")
        self._set(node, self._emit(label, "relu6" if bounds[1] else "relu", [value.spec]), value.layout)

    def _gelu(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Gelu, exact or with the tanh approximation as its attribute says."""
        value = self._value(node, 0)
        approximate = _text(attributes.get("approximate", "none")) == "tanh"
        self._set(node, self._emit(label, "gelu", [value.spec], approximate=approximate), value.layout)

    def _prelu(self, node: onnx.NodeProto, label: str) -> None:
        """PRelu of a channels-first image or flat features by a parameter: one slope per channel ((C, 1, 1), with
        leading 1s: torch's PReLU(C)) or one for every value (a single value: PReLU(), MONAI's default)."""
        value, slope = self._value(node, 0), self._constant(node, 1, "slope")
        shape = self.shapes[value.spec]
        per_channel = (shape[-1], 1, 1) if value.layout == FIRST and len(shape) == 3 else (shape[-1],)
        leading = slope.shape[:max(slope.ndim - len(per_channel), 0)]
        shared = slope.size == 1
        if isinstance(value.layout, tuple) or (value.layout != FIRST and len(shape) != 1) or set(leading) - {1} or \
                not (shared or slope.shape[len(leading):] == per_channel) or node.input[1] not in self.parameters:
            raise _Refused(f"multiplies by a slope of shape {list(slope.shape)}; the spec's prelu learns one slope, "
                           f"or one per channel, {list(per_channel)} here (or with leading 1s)")
        self._set(node, self._emit(label, "prelu", [value.spec], {"slope": slope.reshape(-1)}, shared=shared),
                  value.layout)
