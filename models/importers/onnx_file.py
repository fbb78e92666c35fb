"""ONNX models as specs: a `.onnx` file becomes a ModelSpec, and its initializers the spec's canonical weights.

The file is read with the `onnx` package and numpy (no framework), so the orchestrator can estimate and run a
net exported from anywhere in every framework. ONNX computes channels-first (N, C, H, W); the spec is
channels-last, so each tensor is followed with its layout: an image the spec holds as (H, W, C) is, in the ONNX
graph, (C, H, W) unless a Transpose made it channels-last. A flatten of a real (C, H, W) map orders its values
channels-first; the dense layer reading it gets its weight rows permuted to the spec's (H, W, C) order.

Each node maps to the spec layers that hold the same weights and compute the same values; a node with none (an
LSTM, attention, a custom op) is refused in one line naming the file, the node and its op type, rather than
approximated: an estimate of a different net would be silently wrong.

Counts: the spec's weights are exactly the constants (initializers, or Constant nodes) that a Conv, Gemm,
MatMul (with the Add of its bias), BatchNormalization or LayerNormalization reads as weights (and the initializer a
Mul multiplies by per channel, itself or reshaped: a layer scale's), so the spec's param_count + statistics_count is
their total size. Constants that only shape the computation (Reshape's shape, Clip's bounds, Pad's pads, Resize's
scales, Dropout's ratio) are not weights and are not counted. A constant
two nodes read counts once per reader: the spec shares no weights, and an exporter may store equal values once
(torch's stores a fresh batch norm's scale and running variance, all ones, as one initializer).

The loss: ONNX has none. A Softmax or LogSoftmax over class scores at the output is the spec's cross_entropy
(which takes the scores and applies the softmax itself); any other output gets mse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from models.importers import onnx_adaptive_pool
from models.importers.fixes import Fix
from models.importers.onnx_channels import SHUFFLE_PERM, channel_bounds, chunked, shuffle_tail
from models.importers.onnx_checks import malformed
from models.importers.onnx_dropout import DropoutMask, dropout_mask
from models.importers.onnx_external import array, missing_data, read_model
from models.importers.onnx_folding import NUMBERS, computed_constants, constant_value
from models.importers.onnx_fusions import fused_batch_norm
from models.importers.onnx_graph import feeding
from models.spec import (
    LAYER_TYPES,
    MAX_SIZE,
    MODEL_INPUT,
    MaxPool2D,
    ModelSpec,
    Shape,
    SpecError,
    positive,
    same_padding,
)

MIN_OPSET = 13
# How the ONNX tensor's axes (batch left out) hold the spec's value: a channels-first image (C, H, W) of the
# spec's (H, W, C); the same axes as the spec (a flat vector, or an image a Transpose made channels-last); or a
# flat vector in channels-first order of the spec's image of this shape (what Flatten makes of a real map).
FIRST, SAME = "channels-first", "as-spec"
Layout = str | Shape
TO_LAST, TO_FIRST = (0, 2, 3, 1), (0, 3, 1, 2)
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
MAPPED = "docs/models.md lists the ONNX nodes the importer maps"
# Ops that pass the one number they read on unchanged (a Concat of one input): between a Shape and a slice's end
PASSING = {"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Concat"}
# Ops that keep a Range's values in their order while shaping it into ScatterND's (N, 1) indices
INDEX_SHAPING = {"Cast", "Unsqueeze", "Reshape", "Expand", "Slice"}
BATCH = None  # the batch's entry in a shape known up to the batch size


class _Refused(Exception):
    """A node with no counterpart: the message says why, the caller adds the file and the node."""


@dataclass(frozen=True)
class _Tensor:
    """An ONNX tensor as the spec sees it: the spec layer whose output it is, and how its axes hold that value."""

    spec: str
    layout: Layout


def load_onnx_file(path: str | Path) -> ModelSpec:
    """A `.onnx` file's spec; its weights are read (to check their shapes) but not kept, and those stored beside it
    (external data) counted from their declared shapes (`onnx_external`)."""
    return _import(_read(path, values=False), str(path), Path(path).stem).spec()


@dataclass(frozen=True)
class OnnxProof:
    """What `models --check` needs of an ONNX file, from one import of it."""

    spec: ModelSpec
    graph: onnx.ModelProto  # the file's graph as the spec's frameworks compute it in inference
    scores: str  # the tensor the spec's output is
    weights: dict[str, np.ndarray]  # the initializers as the spec's canonical arrays


def load_onnx_proof(path: str | Path) -> OnnxProof:
    """The spec, the reference graph and the weights, the file read and imported once."""
    model = _read(path, values=True)
    importer = _import(model, str(path), Path(path).stem)
    spec = importer.spec()
    return OnnxProof(spec, *_inference_graph(model, importer), _canonical(importer, spec))


def _inference_graph(model: onnx.ModelProto, importer: _Importer) -> tuple[onnx.ModelProto, str]:
    """The graph for the reference runtime (each dropout the importer found, ONNX's Dropout or torch's mask
    arithmetic, the identity), and the tensor the spec's output is (the scores a softmax at the output reads: the
    loss takes the softmax in)."""
    masked = {mask.output: mask.source for mask in importer.dropouts.values()}
    inference = onnx.ModelProto()
    inference.CopyFrom(model)
    for node in inference.graph.node:
        if node.op_type == "Dropout" or node.output[0] in masked:
            source = node.input[masked.get(node.output[0], 0)]
            node.ClearField("attribute")
            node.op_type, node.domain = "Identity", ""
            del node.input[:]
            node.input.append(source)
            del node.output[1:]
    output = model.graph.output[0].name
    final = next((node for node in model.graph.node if output in node.output), None)
    scores = final.input[0] if importer.loss == "cross_entropy" and final is not None else output
    inference.graph.output[0].name = scores  # a softmax keeps its input's type and shape; a runtime gives outputs only
    return inference, scores


def canonical_weights(path_or_model: str | Path | onnx.ModelProto, spec: ModelSpec) -> dict[str, np.ndarray]:
    """The initializers as the spec's canonical arrays, named `layer{index}_{name}` (what the workers load):
    conv (out, in / groups, kh, kw) -> (kh, kw, in / groups, out), dense (out, in) or (in, out) -> (in, out),
    rows permuted from (C, H, W) to (H, W, C) order after the flatten of a real map."""
    if isinstance(path_or_model, onnx.ModelProto):
        importer = _import(path_or_model, path_or_model.graph.name or "the ONNX model", spec.name)
    else:
        importer = _import(_read(path_or_model, values=True), str(path_or_model), Path(path_or_model).stem)
    importer.spec()
    return _canonical(importer, spec)


def _canonical(importer: _Importer, spec: ModelSpec) -> dict[str, np.ndarray]:
    arrays = {}
    for step in spec.walk():
        held = importer.weights.get(step.name, {})
        if {name: value.shape for name, value in held.items()} != step.weights:
            raise SpecError(f"{importer.source}: spec {spec.name!r} layer {step.name!r} is not the one imported "
                            f"from this file")
        arrays |= {f"layer{step.index}_{name}": value.astype(np.float32) for name, value in held.items()}
    return arrays


def _read(path: str | Path, values: bool) -> onnx.ModelProto:
    try:
        return read_model(path, values)
    except OSError as exc:
        raise SpecError(f"cannot read ONNX file {path}: {exc.strerror or exc}") from exc
    except (DecodeError, onnx.checker.ValidationError, ValueError) as exc:  # its bytes, its external data's place
        # (outside its folder, a link, not there), or that data's offset or length (not a number)
        missing = missing_data(path) if isinstance(exc, onnx.checker.ValidationError) else None
        if missing:
            raise SpecError(f"{path}: its weights are stored in a file beside it, {missing!r}, which is not there; "
                            f"fix: {Fix.DATA_BESIDE}") from exc
        raise SpecError(f"{path} is not an ONNX model ({type(exc).__name__}: {' '.join(str(exc).split())})") from exc


def _import(model: onnx.ModelProto, source: str, name: str) -> _Importer:
    opset = next((entry.version for entry in model.opset_import if entry.domain in ("", "ai.onnx")), 0)
    if opset < MIN_OPSET:
        raise SpecError(f"{source}: uses ONNX opset {opset}; the importer reads opset {MIN_OPSET} and later; "
                        f"fix: {Fix.NEWER_OPSET}")
    wrong = malformed(model)
    if wrong:
        raise SpecError(f"{source}: {wrong}")
    fused = fused_batch_norm(model)
    if fused:
        raise SpecError(f"{source}: {fused}")
    try:
        computed, known = computed_constants(model)
    except SpecError as exc:
        raise SpecError(f"{source}: {exc}") from exc
    return _Importer(source, name, model, computed, known, opset)


def _attributes(node: onnx.NodeProto) -> dict[str, object]:
    return {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in node.attribute}


def _text(value: object) -> object:
    return value.decode() if isinstance(value, bytes) else value


def _square(values: list[int], what: str) -> int:
    """ONNX's per-axis list as the spec's one size; a non-square one has no counterpart."""
    if len(values) != 2 or values[0] != values[1]:
        raise _Refused(f"has {what} {list(values)}, not square (the spec has one size for both axes)")
    return positive(int(values[0]), what)  # checked before the importer computes with it (its padding)


def _per_axis(size: int | tuple[int, ...]) -> tuple[int, ...]:
    return size if isinstance(size, tuple) else (size, size)


def _float(value: object) -> float:
    """A float attribute (float32 in ONNX) as the shortest decimal that is it: 1e-3, not 0.0010000000474974513."""
    return float(str(np.float32(value)))


def _axis(value: int, rank: int) -> int:
    return value + rank if value < 0 else value


def _clamped(at: int, size: int) -> int:
    """A Slice's start or end on an axis of `size`, as ONNX reads it: a negative one from the end, then clamped."""
    return min(max(at + size if at < 0 else at, 0), size)


def _conv_kernel(weight: np.ndarray) -> np.ndarray:
    """(out, in / groups, kh, kw) -> the spec's (kh, kw, in / groups, out)."""
    return weight.transpose(2, 3, 1, 0)


def _rows_to_last(kernel: np.ndarray, image: Shape) -> np.ndarray:
    """A dense kernel (in, out) whose rows are in (C, H, W) order, reordered to the spec's (H, W, C)."""
    h, w, c = image
    return kernel.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(h * w * c, -1)


@dataclass
class _Importer:
    source: str
    name: str
    model: onnx.ModelProto
    computed: dict[str, np.ndarray]  # what the graph computes from constants alone: the exporter's arithmetic
    known: set[str]  # those values' names, with the ones the folder left out once unread: none is a layer's
    opset: int  # the default domain's
    entries: list[dict] = field(default_factory=list)
    batch: int | None = None  # the input's batch where the file fixes it
    shapes: dict[str, Shape] = field(default_factory=dict)  # each spec name's output shape
    weights: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # spec name -> canonical arrays
    tensors: dict[str, _Tensor] = field(default_factory=dict)  # ONNX tensor name -> its spec value
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    parameters: set[str] = field(default_factory=set)  # the constants that are the file's initializers (or alias one)
    readers: dict[str, list[onnx.NodeProto]] = field(default_factory=dict)
    dropouts: dict[int, DropoutMask] = field(default_factory=dict)  # Muls (by id) that are a dropout's arithmetic
    folded: set[int] = field(default_factory=set)  # nodes (by id) an earlier node took in: an Add of a bias, a Mul
    padding: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)  # a Pad's pixels owed to its Conv
    # a SplitToSequence's output -> the image it splits and each part's channels (start, stop), for its SequenceAts
    sequences: dict[str, tuple[_Tensor, list[tuple[int, int]]]] = field(default_factory=dict)
    # a Greater's output -> the spec value it compares and the threshold, for the Where of torch's softplus
    thresholds: dict[str, tuple[str, float]] = field(default_factory=dict)
    loss: str = "mse"

    @property
    def graph(self) -> onnx.GraphProto:
        return self.model.graph

    @cached_property
    def computed_at_batch_2(self) -> dict[str, np.ndarray]:
        """The exporter's arithmetic folded again at batch 2 (a few seconds): read where a value made of the batch
        size must be shown to hold for any batch."""
        return computed_constants(self.model, batch=2)[0]

    def spec(self) -> ModelSpec:
        declared = {node.output[0]: constant_value(node) for node in self.graph.node if node.op_type == "Constant"}
        self.constants = ({init.name: array(init) for init in self.graph.initializer} | self.computed
                          | {name: value for name, value in declared.items() if value is not None})
        self.parameters = self._parameters()
        self._input()
        outputs = [output.name for output in self.graph.output]
        if len(outputs) != 1:
            raise SpecError(f"{self.source}: the graph has {len(outputs)} outputs; a spec has one")
        nodes = self._feeding(outputs[0])
        for node in nodes:
            for tensor in node.input:
                self.readers.setdefault(tensor, []).append(node)
        self._find_dropouts(nodes)
        for index, node in enumerate(nodes):
            label = node.name or (node.output[0] if node.output else f"#{index}")
            op = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            if id(node) in self.folded:
                continue
            try:
                self._node(node, _attributes(node), outputs[0])
            except _Refused as exc:
                raise SpecError(f"{self.source}: node {label!r} ({op}) {exc}") from exc
            except SpecError as exc:
                raise SpecError(f"{self.source}: node {label!r} ({op}): {exc}") from exc
        out = self.tensors.get(outputs[0])
        if out is None or out.spec == MODEL_INPUT:
            raise SpecError(f"{self.source}: the graph's output {outputs[0]!r} is computed by no mapped layer")
        self.entries.append(self.entries.pop(next(i for i, e in enumerate(self.entries) if e["name"] == out.spec)))
        try:
            return ModelSpec.from_dict({"name": self.name, "input_shape": list(self.shapes[MODEL_INPUT]),
                                        "loss": self.loss, "description": "imported from an ONNX model",
                                        "layers": self.entries})
        except SpecError as exc:
            raise SpecError(f"{self.source}: {exc}") from exc

    def _find_dropouts(self, nodes: list[onnx.NodeProto]) -> None:
        """The Muls that are torch's dropout written as arithmetic (models/importers/onnx_dropout.py): their masks'
        nodes are taken in, each Mul becomes one dropout."""
        producer = {tensor: node for node in nodes for tensor in node.output}
        for node in nodes:
            mask = dropout_mask(node, producer, self.readers, self.constants, self.known) if node.op_type == "Mul" \
                else None
            if mask:
                self.folded.update(id(part) for part in mask.chain)
                self.dropouts[id(node)] = mask

    def _parameters(self) -> set[str]:
        """The file's initializers (the folder's values aside) and the tensors that are one of them, aliased by an
        Identity (torch's exporter) or reshaped to a constant shape (timm's `gamma.reshape(1, -1, 1, 1)`, a value
        the folder computes, or the reshaped value itself, where its target shape was a Concat of constants):
        a parameter's own values, whatever shape the graph gives them."""
        found = {init.name for init in self.graph.initializer} - self.computed.keys()
        for node in self.graph.node:
            if node.input and node.input[0] in found and (node.op_type == "Identity" or (
                    node.op_type == "Reshape" and (node.output[0] in self.computed or (
                        len(node.input) > 1 and node.input[1] in self.constants)))):
                found.add(node.output[0])
        return found

    def _feeding(self, output: str) -> list[onnx.NodeProto]:
        """The nodes the output depends on, in the graph's order: a runtime skips a branch that feeds no output,
        and a spec has no layer that feeds none. A value computed from constants alone is known: what computes
        it is not a layer."""
        return feeding(self.graph.node, output, self.known)

    def _input(self) -> None:
        inputs = [tensor for tensor in self.graph.input if tensor.name not in self.constants]
        if len(inputs) != 1:
            raise SpecError(f"{self.source}: the graph has {len(inputs)} inputs; a spec has one")
        dims = inputs[0].type.tensor_type.shape.dim
        sizes = [dim.dim_value if dim.HasField("dim_value") else None for dim in dims]
        if len(sizes) not in (2, 4) or not all(size and 0 < size <= MAX_SIZE for size in sizes[1:]):
            shown = [size or dim.dim_param or "?" for size, dim in zip(sizes, dims, strict=True)]
            sized = len(sizes) == 4 and None in sizes[1:]  # an image exported with its size dynamic
            raise SpecError(f"{self.source}: the input {inputs[0].name!r} has shape {shown}; " + (
                f"its height and width must be known; fix: {Fix.BATCH_DYNAMIC_ONLY}" if sized else
                f"the importer reads (N, C, H, W) or (N, F) with all but the batch known (and at most {MAX_SIZE:,})"))
        self.shapes[MODEL_INPUT] = (*sizes[2:], sizes[1]) if len(sizes) == 4 else (sizes[1],)
        self.batch = sizes[0]
        self.tensors[inputs[0].name] = _Tensor(MODEL_INPUT, FIRST if len(sizes) == 4 else SAME)

    # -- helpers -------------------------------------------------------------------------------------------------

    def _value(self, node: onnx.NodeProto, position: int) -> _Tensor:
        """A node's computed input (not a constant)."""
        name = node.input[position]
        if name in self.constants:
            raise _Refused(f"reads constant {name!r} where the spec takes a layer's output")
        if name not in self.tensors:
            raise _Refused(f"reads {name!r}, which comes from no mapped node")
        return self.tensors[name]

    def _constant(self, node: onnx.NodeProto, position: int, what: str, integers: bool = False) -> np.ndarray | None:
        """A node's constant input (None when the optional input is left out): numbers, or with `integers` whole
        numbers, never a file's strings (or floats where sizes go) read as them."""
        if position >= len(node.input) or not node.input[position]:
            return None
        if node.input[position] not in self.constants:
            raise _Refused(f"computes its {what} ({node.input[position]!r}); the importer needs it constant")
        value = self.constants[node.input[position]]
        if value.dtype.kind not in ("iu" if integers else NUMBERS):
            raise _Refused(f"has a {what} of {value.dtype}; the importer reads {'integers' if integers else 'numbers'}")
        return value

    def _scalar(self, node: onnx.NodeProto, position: int, what: str, integers: bool = False) -> float | int | None:
        """A node's constant input that is one number (None when the optional input is left out)."""
        value = self._constant(node, position, what, integers)
        if value is not None and value.size != 1:
            raise _Refused(f"has a {what} of shape {list(value.shape)}; the importer reads one number")
        return None if value is None else value.reshape(-1)[0].item()

    def _image_shape(self, value: _Tensor) -> Shape:
        """The spec's (H, W, C) of a channels-first image; other layouts have no Conv or pool."""
        if value.layout != FIRST or len(self.shapes[value.spec]) != 3:
            raise _Refused("reads a tensor that is not a channels-first image (N, C, H, W)")
        return self.shapes[value.spec]

    def _sole_reader(self, tensor: str, op_type: str) -> onnx.NodeProto | None:
        readers = self.readers.get(tensor, [])
        outputs = {output.name for output in self.graph.output}
        if len(readers) == 1 and readers[0].op_type == op_type and tensor not in outputs:
            return readers[0]
        return None

    def _emit(self, label: str, kind: str, inputs: list[str], weights: dict[str, np.ndarray] | None = None,
              **options: object) -> str:
        """Adds one spec layer, checking its shapes (and its weights' against the spec's) now, so an error names
        this node."""
        layer = LAYER_TYPES[kind](**options)
        shapes = [self.shapes[source] for source in inputs]
        shape = layer.output_shape(*shapes)
        expected = layer.param_shapes(shapes[0]) | layer.statistics_shapes(shapes[0])
        held = {key: None if value is None else value.shape for key, value in (weights or {}).items()}
        if held != expected:
            raise _Refused(f"holds weights of shapes {held}; its spec {kind} needs {expected}")
        name = label
        while name in self.shapes:
            name += "_"
        self.entries.append({"type": kind, "name": name, "inputs": inputs, **options})
        self.shapes[name] = shape
        if weights:
            self.weights[name] = weights
        return name

    def _set(self, node: onnx.NodeProto, spec: str, layout: Layout) -> None:
        self.tensors[node.output[0]] = _Tensor(spec, layout)

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

    # -- the nodes ---------------------------------------------------------------------------------------------

    def _node(self, node: onnx.NodeProto, attributes: dict, output: str) -> None:
        op, label = node.op_type, node.name or node.output[0]
        if node.domain not in ("", "ai.onnx"):
            raise _Refused(f"is a custom op; the spec's layers are standard ops ({MAPPED})")
        if op == "Constant" and node.output[0] not in self.constants:
            raise _Refused("holds a sparse or string value; the importer reads numeric constants")
        if op == "Constant":
            return  # its value is among the constants, read with the initializers
        elif op == "Identity" and node.input[0] in self.constants:  # torch's exporter aliases weights so
            self.constants[node.output[0]] = self.constants[node.input[0]]
        elif op == "Reshape" and node.output[0] in self.parameters:  # not folded: its weights stored beside the file
            self._reshaped_parameter(node, attributes)
        elif op in ("Identity", "Dropout"):
            self._identity(node, label)
        elif op == "Conv":
            self._conv(node, attributes, label)
        elif op == "BatchNormalization":
            self._batchnorm(node, attributes, label)
        elif op in ("Gemm", "MatMul"):
            self._dense(node, attributes, label)
        elif op in ELEMENTWISE:
            self._elementwise(node, attributes, label)
        elif op == "Clip":
            self._clip(node, label)
        elif op == "Gelu":
            self._gelu(node, attributes, label)
        elif op == "LayerNormalization":
            self._layernorm(node, attributes, label)
        elif id(node) in self.dropouts:
            self._dropout(node, self.dropouts[id(node)], label)
        elif op in ("Mul", "Div") and (passed := self._by_one(node)) is not None:
            self.tensors[node.output[0]] = self._value(node, passed)
        elif op in ("Add", "Mul"):
            self._join(node, label)
        elif op == "Greater":
            self._threshold(node)
        elif op == "Where" and node.input[0] in self.thresholds:
            self._softplus_threshold(node)
        elif op == "Concat":
            self._concat(node, attributes, label)
        elif op in ("MaxPool", "AveragePool"):
            self._pool(node, attributes, label)
        elif op in ("GlobalAveragePool", "ReduceMean"):
            self._global_pool(node, attributes, label)
        elif op == "Flatten":
            if _axis(int(attributes.get("axis", 1)), len(self.shapes[self._value(node, 0).spec]) + 1) != 1:
                raise _Refused(f"flattens from axis {attributes['axis']}; the spec's flatten keeps only the batch")
            self._flatten(node, label)
        elif op == "Reshape":
            self._reshape(node, attributes, label)
        elif op == "Transpose" and tuple(attributes.get("perm", ())) == onnx_adaptive_pool.PERM:
            self._adaptive_pool(node, attributes, label)
        elif op == "Transpose":
            self._transpose(node, attributes)
        elif op == "Pad":
            self._pad(node, attributes, label)
        elif op == "Slice":
            self._slice(node, label)
        elif op == "ScatterND":
            self._scatter_over_batch(node, attributes)
        elif op in ("Split", "SplitToSequence"):
            self._split(node, attributes, label)
        elif op == "SequenceAt":
            self._sequence_at(node, label)
        elif op == "Resize":
            self._resize(node, attributes, label)
        elif op in ("Softmax", "LogSoftmax"):
            self._softmax(node, output)
        else:
            raise _Refused(f"has no counterpart in the spec ({MAPPED})")

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

    def _dropout(self, node: onnx.NodeProto, mask: DropoutMask, label: str) -> None:
        value = self._value(node, mask.source)
        self._set(node, self._emit(label, "dropout", [value.spec], rate=mask.rate, per_example=mask.per_example),
                  value.layout)

    def _join(self, node: onnx.NodeProto, label: str) -> None:
        """Add or Mul of two tensors of one layout, as the spec's add or multiply; a Mul by a parameter, as the
        spec's layerscale; an Add of a scalar zero (timm's `out += identity_out`, 0 where a block has no identity
        branch) passes its tensor on."""
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
        kind = "add" if node.op_type == "Add" else "multiply"
        self._set(node, self._emit(label, kind, [value.spec for value in values]), values[0].layout)

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

    def _softmax(self, node: onnx.NodeProto, output: str) -> None:
        """A softmax over the class scores at the output is the cross_entropy loss's own: it sets the loss."""
        value = self._value(node, 0)
        if node.output[0] != output or len(self.shapes[value.spec]) != 1 or isinstance(value.layout, tuple):
            raise _Refused("is not over the class scores at the output; the spec's softmax is its "
                           "cross_entropy loss's own")
        self.loss = "cross_entropy"
        self.tensors[node.output[0]] = value

    def _conv(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        value = self._value(node, 0)
        image = self._image_shape(value)
        weight, bias = self._constant(node, 1, "weight"), self._constant(node, 2, "bias")
        if bias is not None and node.input[2] in self.computed and not bias.any():
            bias = None  # the default exporter's zero bias of a conv that has none: computed, not a parameter
        if weight is None or weight.ndim != 4:
            raise _Refused("has no 2-D kernel; the spec's conv2d is 2-D")
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
        bias_weights = {} if bias is None else {"bias": bias.reshape(-1)}
        if on_pixels:
            spec = self._emit(label, "conv2d", [value.spec], {"kernel": kernel[None, None]} | bias_weights,
                              filters=int(kernel.shape[1]), kernel=1, padding="valid", bias=bias is not None)
        else:
            spec = self._emit(label, "dense", [value.spec], {"kernel": kernel} | bias_weights,
                              units=int(kernel.shape[1]), bias=bias is not None)
        self._set(bias_node, spec, SAME)

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

    def _strided_restore(self, node: onnx.NodeProto, value: _Tensor, shape: Shape) -> None:
        """torch's as_strided written by the default exporter (after ConvNeXt's global pool): every value flattened,
        batch and all, then a Gather of indices computed from the batch size. Where those indices are each example's
        values in their own order, at batch 1 and at batch 2 alike, it gives back the tensor it read: no layer."""
        gather = self._sole_reader(node.output[0], "Gather")
        indices = self.constants.get(gather.input[1]) if gather is not None else None
        size = math.prod(shape)

        def restores(found: np.ndarray | None, batch: int) -> bool:
            return found is not None and found.shape == (batch, *shape) and np.array_equal(
                found.reshape(-1), np.arange(batch * size))

        if gather is None or _attributes(gather).get("axis", 0) != 0 or not restores(indices, 1) or not restores(
                self.computed_at_batch_2.get(gather.input[1]), 2):
            raise _Refused("flattens the batch with the values, other than for torch's as_strided giving back the "
                           "same tensor; the importer maps a flatten and (C) -> (C, 1, 1)")
        self.folded.add(id(gather))
        self.tensors[gather.output[0]] = value

    def _pad(self, node: onnx.NodeProto, attributes: dict, label: str) -> None:
        """Zeros around H and W: taken in by the Conv that is its one reader, else a zeropad2d layer."""
        value = self._value(node, 0)
        self._image_shape(value)
        pads, fill = self._constant(node, 1, "pads", integers=True), self._scalar(node, 2, "constant value")
        axes = self._constant(node, 3, "axes", integers=True)
        if _text(attributes.get("mode", "constant")) != "constant" or (fill is not None and float(fill) != 0):
            raise _Refused("pads with other than zeros; the spec's zeropad2d pads zeros")
        pads = [int(pad) for pad in pads.reshape(-1)] if pads is not None else []
        axes = [_axis(int(a), 4) for a in axes.reshape(-1)] if axes is not None else [0, 1, 2, 3]
        by_axis = {axis: (pads[i], pads[i + len(axes)]) for i, axis in enumerate(axes)} if len(pads) == \
            2 * len(axes) else {}
        if not by_axis or any(by_axis.get(axis, (0, 0)) != (0, 0) for axis in (0, 1)) or min(pads) < 0:
            raise _Refused(f"pads {pads}; the spec's zeropad2d adds pixels >= 0 on H and W only")
        (top, bottom), (left, right) = by_axis.get(2, (0, 0)), by_axis.get(3, (0, 0))
        if self._sole_reader(node.output[0], "Conv") is not None:
            self.padding[node.output[0]] = (top, bottom, left, right)
            self.tensors[node.output[0]] = value
            return
        self._set(node, self._emit(label, "zeropad2d", [value.spec], top=top, bottom=bottom, left=left,
                                   right=right), FIRST)

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
        return any(part.op_type in ("Shape", "Size") for part in feeding(self.graph.node, tensor))

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
            if output in self.readers or output == self.graph.output[0].name:
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
        if len(factors) != 4 or factors[:2] != [1.0, 1.0] or factors[2] != factors[3] or \
                factors[2] != int(factors[2]) or factors[2] < 1:
            raise _Refused(f"scales by {factors}; the spec's upsample2d scales H and W by one integer")
        # the modes whose integer-scale result is the spec's: each pixel repeated, or torch's bilinear
        repeats = (where in ("half_pixel", "pytorch_half_pixel") and nearest.startswith("round_prefer")) or \
            (where in ("asymmetric", "tf_half_pixel_for_nn") and nearest == "floor")
        if mode == "nearest" and repeats:
            interpolation = "nearest"
        elif mode == "linear" and where in ("half_pixel", "pytorch_half_pixel"):
            interpolation = "bilinear"
        else:
            raise _Refused(f"resizes by mode {mode!r}, {where!r} ({nearest!r}); the spec's upsample2d is nearest "
                           f"(each pixel repeated) or linear with half-pixel centres")
        self._set(node, self._emit(label, "upsample2d", [value.spec], scale=int(factors[2]),
                                   interpolation=interpolation), FIRST)
