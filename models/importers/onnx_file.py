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
MatMul (with the Add of its bias), BatchNormalization, LayerNormalization, GroupNormalization, an affine
InstanceNormalization (torch's group norm's Mul and Add) or PRelu reads as weights (and the initializer a Mul
multiplies by per channel, itself or reshaped: a layer scale's), so the spec's param_count + statistics_count is
their total size. Constants that only shape the computation (Reshape's shape, Clip's bounds, Pad's pads, Resize's
scales, Dropout's ratio) are not weights and are not counted. A constant
two nodes read counts once per reader: the spec shares no weights, and an exporter may store equal values once
(torch's stores a fresh batch norm's scale and running variance, all ones, as one initializer).

The loss: ONNX has none. A Softmax or LogSoftmax over class scores at the output is the spec's cross_entropy
(which takes the scores and applies the softmax itself); any other output gets mse. A graph of several outputs (an
FPN's levels, a train-mode detection head's scales, auxiliary logits) is a spec of several outputs, in the graph's
order, one loss each: a softmax at every output or at none, as a spec has one kind of loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from models.importers import onnx_adaptive_pool
from models.importers.fixes import Fix
from models.importers.onnx_activation import ELEMENTWISE, ActivationNodes
from models.importers.onnx_batch import BatchNodes
from models.importers.onnx_checks import malformed
from models.importers.onnx_common import (
    FIRST,
    MAPPED,
    SAME,
    Layout,
    _attributes,
    _axis,
    _Refused,
    _Tensor,
)
from models.importers.onnx_conv import ConvNodes
from models.importers.onnx_dropout import DropoutMask, dropout_mask
from models.importers.onnx_external import array, missing_data, read_model
from models.importers.onnx_folding import NUMBERS, computed_constants, constant_value
from models.importers.onnx_fusions import fused_batch_norm
from models.importers.onnx_graph import feeding
from models.importers.onnx_merge import MergeNodes
from models.importers.onnx_normalization import NormalizationNodes
from models.importers.onnx_pooling import PoolingNodes
from models.importers.onnx_shaping import ShapingNodes
from models.spec import (
    LAYER_TYPES,
    MAX_SIZE,
    MODEL_INPUT,
    ModelSpec,
    Shape,
    SpecError,
)

MIN_OPSET = 13


def load_onnx_file(path: str | Path) -> ModelSpec:
    """A `.onnx` file's spec; its weights are read (to check their shapes) but not kept, and those stored beside it
    (external data) counted from their declared shapes (`onnx_external`)."""
    return _import(_read(path, values=False), str(path), Path(path).stem).spec()


@dataclass(frozen=True)
class OnnxProof:
    """What `models --check` needs of an ONNX file, from one import of it."""

    spec: ModelSpec
    graph: onnx.ModelProto  # the file's graph as the spec's frameworks compute it in inference
    scores: tuple[str, ...]  # the tensors the spec's outputs are
    weights: dict[str, np.ndarray]  # the initializers as the spec's canonical arrays


def load_onnx_proof(path: str | Path) -> OnnxProof:
    """The spec, the reference graph and the weights, the file read and imported once."""
    model = _read(path, values=True)
    importer = _import(model, str(path), Path(path).stem)
    spec = importer.spec()
    return OnnxProof(spec, *_inference_graph(model, importer), _canonical(importer, spec))


def _inference_graph(model: onnx.ModelProto, importer: _Importer) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """The graph for the reference runtime (each dropout the importer found, ONNX's Dropout or torch's mask
    arithmetic, the identity), and the tensors the spec's outputs are (the scores a softmax at an output reads: the
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
    scores = []
    for output in inference.graph.output:
        final = next((node for node in model.graph.node if output.name in node.output), None)
        scores.append(final.input[0] if importer.loss == "cross_entropy" and final is not None else output.name)
        output.name = scores[-1]  # a softmax keeps its input's type and shape; a runtime gives outputs only
    return inference, tuple(scores)


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


@dataclass
class _Importer(ConvNodes, NormalizationNodes, ActivationNodes, PoolingNodes, ShapingNodes, BatchNodes, MergeNodes):
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
    # Reshapes (by id) that begin torch's group norm: its InstanceNormalization, Reshape back, and Mul and Add (or None)
    group_norms: dict[int, tuple[onnx.NodeProto, ...]] = field(default_factory=dict)
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
        nodes = self._feeding(outputs)
        for node in nodes:
            for tensor in node.input:
                self.readers.setdefault(tensor, []).append(node)
        self._find_dropouts(nodes)
        self._find_group_norms(nodes)
        for index, node in enumerate(nodes):
            label = node.name or (node.output[0] if node.output else f"#{index}")
            op = f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type
            if id(node) in self.folded:
                continue
            try:
                self._node(node, _attributes(node), outputs)
            except _Refused as exc:
                raise SpecError(f"{self.source}: node {label!r} ({op}) {exc}") from exc
            except SpecError as exc:
                raise SpecError(f"{self.source}: node {label!r} ({op}): {exc}") from exc
        ends = self._ends(outputs)
        if len(ends) == 1:  # the output last, as a spec of one output has it
            self.entries.append(self.entries.pop(next(i for i, e in enumerate(self.entries) if e["name"] == ends[0])))
        try:
            return ModelSpec.from_dict({"name": self.name, "input_shape": list(self.shapes[MODEL_INPUT]),
                                        "loss": self.loss, "description": "imported from an ONNX model",
                                        "layers": self.entries} | ({"outputs": ends} if len(ends) > 1 else {}))
        except SpecError as exc:
            raise SpecError(f"{self.source}: {exc}") from exc

    def _ends(self, outputs: list[str]) -> list[str]:
        """The spec layers that are the graph's outputs, in its order: each computed by a mapped layer, each its own,
        and all class scores (a softmax at each, the loss cross_entropy) or none."""
        ends = []
        for output in outputs:
            value = self.tensors.get(output)
            if value is None or value.spec == MODEL_INPUT:
                raise SpecError(f"{self.source}: the graph's output {output!r} is computed by no mapped layer")
            if value.spec in ends:
                raise SpecError(f"{self.source}: the graph's outputs {outputs[ends.index(value.spec)]!r} and "
                                f"{output!r} are the same values; a spec's outputs are distinct layers")
            ends.append(value.spec)
        softmaxed = [output for output in outputs if self._ends_in_softmax(output)]
        if softmaxed and len(softmaxed) != len(outputs):
            plain = next(output for output in outputs if output not in softmaxed)
            raise SpecError(f"{self.source}: the output {softmaxed[0]!r} ends in a softmax and {plain!r} does not; "
                            f"a spec's outputs share one loss (cross_entropy on class scores, or mse)")
        return ends

    def _ends_in_softmax(self, output: str) -> bool:
        return any(node.op_type in ("Softmax", "LogSoftmax") and output in node.output for node in self.graph.node)

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

    def _feeding(self, outputs: list[str]) -> list[onnx.NodeProto]:
        """The nodes the outputs depend on, in the graph's order: a runtime skips a branch that feeds no output,
        and a spec has no layer that feeds none. A value computed from constants alone is known: what computes
        it is not a layer."""
        return feeding(self.graph.node, outputs, self.known)

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


    # -- the nodes ---------------------------------------------------------------------------------------------

    def _node(self, node: onnx.NodeProto, attributes: dict, outputs: list[str]) -> None:
        op, label = node.op_type, node.name or node.output[0]
        if node.domain not in ("", "ai.onnx"):
            raise _Refused(f"is a custom op; the spec's layers are standard ops ({MAPPED})")
        if op == "Constant" and node.output[0] not in self.constants:
            raise _Refused("holds a sparse or string value; the importer reads numeric constants")
        if op == "Constant":
            return  # its value is among the constants, read with the initializers
        elif op == "Identity" and node.input[0] in self.constants:  # torch's exporter aliases weights so
            self.constants[node.output[0]] = self.constants[node.input[0]]
        elif op == "Reshape" and id(node) in self.group_norms:
            self._group_norm(node, label)
        elif op == "Reshape" and node.output[0] in self.parameters:  # not folded: its weights stored beside the file
            self._reshaped_parameter(node, attributes)
        elif op in ("Identity", "Dropout"):
            self._identity(node, label)
        elif op == "Conv":
            self._conv(node, attributes, label)
        elif op == "ConvTranspose":
            self._conv_transpose(node, attributes, label)
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
        elif op == "InstanceNormalization":
            self._instance_norm(node, attributes, label)
        elif op == "GroupNormalization":
            self._group_normalization(node, attributes, label)
        elif op == "PRelu":
            self._prelu(node, label)
        elif id(node) in self.dropouts:
            self._dropout(node, self.dropouts[id(node)], label)
        elif op in ("Mul", "Div") and (passed := self._by_one(node)) is not None:
            self.tensors[node.output[0]] = self._value(node, passed)
        elif op in ("Add", "Mul", "Sub"):
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
        elif op == "SpaceToDepth":
            self._space_to_depth(node, attributes, label)
        elif op == "Resize":
            self._resize(node, attributes, label)
        elif op in ("Softmax", "LogSoftmax"):
            self._softmax(node, outputs)
        else:
            raise _Refused(f"has no counterpart in the spec ({MAPPED})")


