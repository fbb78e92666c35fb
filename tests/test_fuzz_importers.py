"""The importers against malformed model files: Keras configs and ONNX graphs, each a valid net mutated (a value of
another type, a field dropped, nesting deepened, a size inflated), each ending in a spec or in one SpecError line
naming the file (what the command line prints before exit 2), never another exception, within a time and memory bound.

hypothesis draws the mutations. `make test` runs the `quick` profile: a few hundred files per importer, the same ones
each run (derandomized), a few seconds each. `FOOTPRINT_FUZZ=thorough` draws thousands afresh each run:
`FOOTPRINT_FUZZ=thorough .tox/test/bin/python -m pytest tests/test_fuzz_importers.py -p no:cacheprovider`
(docs/faults.md).
"""

from __future__ import annotations

import copy
import json
import os
import resource
import signal
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import onnx
import psutil
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from models.importers.files import load_spec_file
from models.importers.json_text import MAX_NESTING
from models.spec import ModelSpec, SpecError
from tests.test_onnx_import import newer_net, residual_net

QUICK, THOROUGH = "footprint-quick", "footprint-thorough"
for profile, examples, fixed in ((QUICK, 300, True), (THOROUGH, 5000, False)):
    settings.register_profile(profile, max_examples=examples, deadline=None, derandomize=fixed, database=None,
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
PROFILE = settings.get_profile({"quick": QUICK, "thorough": THOROUGH}[os.environ.get("FOOTPRINT_FUZZ", "quick")])
SECONDS = 30  # per import: one takes 0.03 s here (the first ONNX one 5 s, onnxscript's import); a hang reaches it
MORE_BYTES = 2 * 2**30  # the address space an import may take beyond what the test process holds
BIG = (0, -1, 2**31, 2**63, 10**40, 10**400)  # sizes inflated past every bound (and to none)


class _OutOfTime(BaseException):
    """An import past its time: a BaseException, so no `except Exception` in the code under test takes it for a
    refusal."""


@contextmanager
def _bounded() -> Iterator[None]:
    """An import within SECONDS (an interval timer) and MORE_BYTES more address space (RLIMIT_AS: past it an
    allocation is a MemoryError, which fails the test as any exception but SpecError does)."""
    limits = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = psutil.Process().memory_info().vms + MORE_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (ceiling if limits[1] == resource.RLIM_INFINITY else
                                            min(ceiling, limits[1]), limits[1]))

    def out_of_time(signum: int, frame: object) -> None:
        raise _OutOfTime(f"an import ran past {SECONDS} s")

    previous = signal.signal(signal.SIGALRM, out_of_time)
    signal.setitimer(signal.ITIMER_REAL, SECONDS, 1)  # again each second: where the raise is lost (in a gc callback)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, limits)


def _ends_well(path: Path) -> ModelSpec | None:
    """The file's spec, which its JSON form (how a record carries it) gives back whole, or None where the file is
    refused in one line naming it; any other ending fails the test."""
    with _bounded():
        try:
            spec = load_spec_file(path)
        except SpecError as error:
            message = str(error)
            assert "\n" not in message and str(path) in message, message
            return None
    assert ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec, spec.to_dict()
    return spec


# ---- Keras: configs as Keras 3's to_json() writes them (and one as Keras 2's), mutated as JSON ----

def keras_tensor(layer: str) -> dict:
    return {"class_name": "__keras_tensor__", "config": {"shape": [None], "dtype": "float32",
                                                          "keras_history": [layer, 0, 0]}}


def _keras_layer(kind: str, name: str, reads: list[str], module: str = "keras.layers", **config: object) -> dict:
    args = [keras_tensor(reads[0])] if len(reads) == 1 else [[keras_tensor(source) for source in reads]]
    return {"module": module, "class_name": kind, "name": name, "config": {"name": name, "trainable": True, **config},
            "inbound_nodes": [{"args": args, "kwargs": {}}] if reads else []}


def _functional(name: str, layers: list[dict], output: str, **more: object) -> dict:
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": name, "trainable": True, "layers": layers, "input_layers": [[layers[0]["name"], 0, 0]],
                       "output_layers": [[output, 0, 0]]}, **more}


def keras_convnet() -> dict:
    """Most mapped layers in one functional net: a zero pad folded into a conv, batch norm, relu6, depthwise and
    separable convs, an activation, a residual add, a 'same' max pool, concat, a global pool, reshape, dropout and a
    softmax dense (the loss's own)."""
    conv = {"kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_last",
            "dilation_rate": [1, 1], "activation": "linear", "use_bias": False}
    norm = {"axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True}
    return _functional("convnet", [
        _keras_layer("InputLayer", "image", [], batch_shape=[None, 12, 12, 3], dtype="float32"),
        _keras_layer("Rescaling", "scale", ["image"], scale=1 / 255, offset=0.0),
        _keras_layer("ZeroPadding2D", "pad", ["scale"], padding=[[1, 1], [1, 1]], data_format="channels_last"),
        _keras_layer("Conv2D", "stem", ["pad"], filters=8, groups=1, **conv | {"strides": [2, 2], "padding": "valid"}),
        _keras_layer("BatchNormalization", "stem_bn", ["stem"], **norm),
        _keras_layer("ReLU", "stem_relu", ["stem_bn"], max_value=6.0, negative_slope=0.0, threshold=0.0),
        _keras_layer("DepthwiseConv2D", "dw", ["stem_relu"], depth_multiplier=1, **conv),
        _keras_layer("BatchNormalization", "dw_bn", ["dw"], **norm),
        _keras_layer("Activation", "dw_swish", ["dw_bn"], activation="swish"),
        _keras_layer("SeparableConv2D", "sep", ["dw_swish"], filters=8, depth_multiplier=1, **conv),
        _keras_layer("Add", "residual", ["stem_relu", "sep"]),
        _keras_layer("MaxPooling2D", "pool", ["residual"], pool_size=[2, 2], strides=[2, 2], padding="same",
                     data_format="channels_last"),
        _keras_layer("Conv2D", "proj", ["pool"], filters=4, groups=1, **conv | {"kernel_size": [1, 1]}),
        _keras_layer("Concatenate", "cat", ["pool", "proj"], axis=-1),
        _keras_layer("GlobalAveragePooling2D", "gap", ["cat"], data_format="channels_last", keepdims=True),
        _keras_layer("Reshape", "flat", ["gap"], target_shape=[-1]),
        _keras_layer("Dropout", "drop", ["flat"], rate=0.2, noise_shape=None),
        _keras_layer("Dense", "fc", ["drop"], units=10, activation="softmax", use_bias=True),
    ], "fc")


def keras_blocks() -> dict:
    """A Sequential model used as a layer, layer norm, cropping, upsampling, a multiply, keras.ops' x + 3.0, an
    average pool and a flatten, compiled with mean squared error."""
    block = {"module": "keras", "class_name": "Sequential", "name": "block", "config": {"name": "block", "layers": [
        {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 8, 8, 4],
                                                                          "name": "block_in"}},
        {"module": "keras.layers", "class_name": "Conv2D", "config": {
            "name": "inner", "filters": 4, "kernel_size": [3, 3], "padding": "same", "activation": "relu"}},
        {"module": "keras.layers", "class_name": "LayerNormalization", "config": {
            "name": "inner_ln", "axis": -1, "epsilon": 0.001, "center": True, "scale": True, "rms_scaling": False}},
    ]}, "inbound_nodes": [{"args": [keras_tensor("image")], "kwargs": {}}]}
    return _functional("blocks", [
        _keras_layer("InputLayer", "image", [], batch_shape=[None, 8, 8, 4], dtype="float32"),
        block,
        _keras_layer("Multiply", "gate", ["image", "block"]),
        _keras_layer("Add", "shift", ["gate"], module="keras.src.ops.numpy") | {
            "inbound_nodes": [{"args": [keras_tensor("gate"), 3.0], "kwargs": {}}]},
        _keras_layer("Cropping2D", "crop", ["shift"], cropping=[[1, 1], [1, 1]]),
        _keras_layer("UpSampling2D", "up", ["crop"], size=[2, 2], interpolation="bilinear"),
        _keras_layer("AveragePooling2D", "avg", ["up"], pool_size=[3, 3], strides=[3, 3], padding="valid"),
        _keras_layer("Flatten", "flatten", ["avg"]),
        _keras_layer("Dense", "out", ["flatten"], units=3, activation="linear", use_bias=False),
    ], "out", compile_config={"loss": "mean_squared_error"})


def keras_sequential() -> dict:
    """Keras 2's to_json() of a Sequential net: its version named, the input shape on the first layer."""
    return {"class_name": "Sequential", "keras_version": "2.15.0", "config": {"name": "seq", "layers": [
        {"class_name": "Dense", "config": {"name": "d1", "units": 6, "activation": "relu", "use_bias": True,
                                           "batch_input_shape": [None, 5]}},
        {"class_name": "BatchNormalization", "config": {"name": "bn", "axis": -1, "momentum": 0.9,
                                                        "epsilon": 0.001, "center": True, "scale": True}},
        {"class_name": "Dense", "config": {"name": "d2", "units": 2, "activation": "sigmoid"}},
    ]}}


KERAS_NETS = (keras_convnet, keras_blocks, keras_sequential)
DEEP = "\u0000deep\u0000"  # where a nesting too deep for json.dumps goes into the text


def _places(document: object) -> list[tuple]:
    """Every place in a document, as the keys and indices that reach it (the document itself first)."""
    found, pending = [], [((), document)]
    while pending:
        path, value = pending.pop()
        found.append(path)
        children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        pending.extend(((*path, key), child) for key, child in children)
    return found


def _at(document: object, path: tuple) -> object:
    for key in path:
        document = document[key]
    return document


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 2**40) | st.floats() | st.text(max_size=4)
    | st.sampled_from([*BIG, 2.5, "abc", "no", "same", "relu", [], {}]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


def _swapped(value: object) -> st.SearchStrategy:
    """`value` as another type: a string of it, a list or object holding it, null, a number of it past an integer."""
    number = [value + 0.5, -value] if isinstance(value, (int, float)) and not isinstance(value, bool) and \
        abs(value) < 2**53 else []
    return st.sampled_from([str(value), [value], {"value": value}, None, *number])


def _mutated_json(data: st.DataObject, document: dict) -> tuple[dict, int]:
    """1 to 3 mutations of a copy of `document`, and how deep a value is to be nested in its text (0: none). One list
    at most is made longer (a file of megabytes: one longer list in another would make one of gigabytes)."""
    document, nesting, longer = copy.deepcopy(document), 0, False
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_places(document)))
        parent, key = (_at(document, path[:-1]), path[-1]) if path else (None, None)
        value = _at(document, path)
        kind = data.draw(st.sampled_from(["replace", "swap", "drop", "deepen", "inflate"]))
        if parent is None:
            continue  # the document itself stays an object: the Keras config is what is mutated
        if kind == "drop":
            del parent[key]
        elif kind == "deepen" and not nesting:
            nesting = data.draw(st.sampled_from([2, MAX_NESTING - 5, MAX_NESTING + 5, 5000]))
            parent[key] = DEEP
        elif kind == "inflate" and isinstance(value, list) and value and not longer:
            parent[key], longer = value * data.draw(st.sampled_from([2, 1000])), True
        elif kind == "inflate":
            parent[key] = data.draw(st.sampled_from(BIG))
        elif kind == "swap":
            parent[key] = data.draw(_swapped(value))
        else:
            parent[key] = data.draw(JSON_VALUES)
    return document, nesting


def _keras_file(folder: Path, document: dict, nesting: int, saved: bool) -> Path:
    """The document as to_json()'s text, or as a saved `.keras` file's config.json."""
    text = json.dumps(document)
    if nesting:
        text = text.replace(json.dumps(DEEP), "[" * nesting + "1" + "]" * nesting)
    if not saved:
        path = folder / "fuzzed.json"
        path.write_text(text)
        return path
    path = folder / "fuzzed.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("config.json", text)
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzzed")


@pytest.mark.parametrize("build", KERAS_NETS)
def test_each_keras_net_imports_before_it_is_mutated(build: Callable[[], dict], folder: Path) -> None:
    """The fuzz starts from nets the importer maps, so a mutation meets the importer's every step."""
    assert isinstance(_ends_well(_keras_file(folder, build(), 0, saved=False)), ModelSpec)


@PROFILE
@given(data=st.data())
def test_a_mutated_keras_config_ends_in_a_spec_or_one_line(folder: Path, data: st.DataObject) -> None:
    document, nesting = _mutated_json(data, data.draw(st.sampled_from(KERAS_NETS))())
    _ends_well(_keras_file(folder, document, nesting, saved=data.draw(st.booleans())))


# ---- ONNX: the import tests' nets, mutated as protobuf messages and as bytes ----

ONNX_NETS = (residual_net, newer_net)
OPS = ("Conv", "Relu", "Add", "Mul", "MaxPool", "AveragePool", "Gemm", "MatMul", "Reshape", "Flatten", "Concat",
       "Transpose", "Pad", "Slice", "Split", "Resize", "BatchNormalization", "Softmax", "Identity", "If", "LSTM")
WIDE = (0, -1, 2**31, 2**62)  # sizes inflated as far as ONNX's 64-bit integers hold them (and to none)
INTS = st.lists(st.integers(-2, 4) | st.sampled_from(WIDE), max_size=5)
ATTRIBUTE_VALUES = (st.integers(-2, 2**40) | st.floats(width=32) | st.binary(max_size=4) | INTS
                    | st.lists(st.floats(width=32), max_size=3))


def _node_mutation(data: st.DataObject, graph: onnx.GraphProto) -> None:
    """One change to one node: an attribute dropped, retyped or resized; an input dropped, emptied, rewired or
    added; an output written twice; the op changed; the node dropped or doubled."""
    index = data.draw(st.integers(0, len(graph.node) - 1))
    node = graph.node[index]
    tensors = [name for each in graph.node for name in each.output] + [init.name for init in graph.initializer]
    kind = data.draw(st.sampled_from(["attribute", "drop attribute", "input", "output", "op", "drop", "double"]))
    if kind == "attribute" or (kind == "drop attribute" and node.attribute):
        name = data.draw(st.sampled_from([a.name for a in node.attribute] or ["axis"]))
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept)
        if kind == "attribute":
            value = data.draw(ATTRIBUTE_VALUES)
            node.attribute.append(helper.make_attribute(name, value) if value != [] else
                                  helper.make_attribute(name, [], attr_type=onnx.AttributeProto.INTS))
    elif kind == "input":
        choice = data.draw(st.sampled_from(["drop", "empty", "rewire", "add"]))
        at = data.draw(st.integers(0, max(len(node.input) - 1, 0)))
        if choice == "add" or not node.input:
            node.input.append(data.draw(st.sampled_from([*tensors, "ghost"])))
        elif choice == "drop":
            del node.input[at]
        else:
            node.input[at] = "" if choice == "empty" else data.draw(st.sampled_from([*tensors, "ghost"]))
    elif kind == "output":
        node.output[0] = data.draw(st.sampled_from([*tensors, "ghost"]))
    elif kind == "op":
        node.op_type = data.draw(st.sampled_from(OPS))
    elif kind == "drop":
        del graph.node[index]
    else:
        graph.node.insert(index, copy.deepcopy(node))


def _tensor_mutation(data: st.DataObject, graph: onnx.GraphProto) -> None:
    """One change to an initializer (its data dropped or cut, its shape inflated or cut, its type changed) or to
    the graph's input (a size inflated, zeroed or unknown, its type or rank changed) or output (renamed, doubled)."""
    kind = data.draw(st.sampled_from(["data", "dims", "type", "input", "output"]))
    initializer = graph.initializer[data.draw(st.integers(0, len(graph.initializer) - 1))]
    if kind == "data":
        initializer.raw_data = initializer.raw_data[:data.draw(st.integers(0, len(initializer.raw_data)))]
        initializer.ClearField("float_data")
        initializer.ClearField("int64_data")
    elif kind == "dims" and initializer.dims and data.draw(st.booleans()):
        initializer.dims[data.draw(st.integers(0, len(initializer.dims) - 1))] = data.draw(
            st.sampled_from(WIDE))
    elif kind == "dims":
        del initializer.dims[data.draw(st.integers(0, len(initializer.dims))):]
    elif kind == "type":
        initializer.data_type = data.draw(st.sampled_from(list(TensorProto.DataType.values())))
    elif kind == "input":
        dims = graph.input[0].type.tensor_type.shape.dim
        change = data.draw(st.sampled_from(["size", "unknown", "type", "rank"]))
        if change == "size" and dims:
            dims[data.draw(st.integers(0, len(dims) - 1))].dim_value = data.draw(st.sampled_from(WIDE))
        elif change == "unknown" and dims:
            dims[data.draw(st.integers(0, len(dims) - 1))].dim_param = "any"
        elif change == "type":
            graph.input[0].type.tensor_type.elem_type = data.draw(st.sampled_from(list(
                TensorProto.DataType.values())))
        else:
            del dims[data.draw(st.integers(0, len(dims))):]
    elif data.draw(st.booleans()):
        graph.output[0].name = data.draw(st.sampled_from([graph.node[0].output[0], "ghost", "image"]))
    else:
        graph.output.append(copy.deepcopy(graph.output[0]))


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (how one message holds another), for nestings protobuf's own classes refuse
    to build."""

    def varint(value: int) -> bytes:
        out = bytearray()
        while value > 0x7F:
            out.append(value & 0x7F | 0x80)
            value >>= 7
        return bytes([*out, value])

    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _nested(model: onnx.ModelProto, depth: int) -> bytes:
    """The model's bytes with its last node moved `depth` If subgraphs deep (protobuf reads 100 levels of messages):
    GraphProto.node is field 1, NodeProto.attribute 5, AttributeProto.g 6, ModelProto.graph 7."""
    last = model.graph.node[-1]
    payload = last.SerializeToString()
    for _ in range(depth):
        branch = onnx.GraphProto(name="branch", output=[helper.make_tensor_value_info(last.output[0], 1, None)])
        attribute = helper.make_attribute("then_branch", branch)
        payload = helper.make_node("If", ["cond"], [last.output[0]]).SerializeToString() + _field(
            5, attribute.SerializeToString() + _field(6, _field(1, payload)))
    graph = copy.deepcopy(model.graph)
    del graph.node[-1]
    model = copy.deepcopy(model)
    model.ClearField("graph")
    return model.SerializeToString() + _field(7, graph.SerializeToString() + _field(1, payload))


def _mutated_onnx(data: st.DataObject, model: onnx.ModelProto) -> bytes:
    """1 to 3 changes to the graph (its nodes, tensors or opset), its last node perhaps nested in subgraphs, then
    perhaps its bytes cut or one of them changed."""
    model = copy.deepcopy(model)
    for _ in range(data.draw(st.integers(1, 3))):
        kind = data.draw(st.sampled_from(["node", "tensor", "opset"]))
        if kind == "node" and model.graph.node:
            _node_mutation(data, model.graph)
        elif kind == "tensor":
            _tensor_mutation(data, model.graph)
        else:
            model.opset_import[0].version = data.draw(st.integers(1, 25))
    depth = data.draw(st.sampled_from([0, 0, 0, 1, 20, 200]))  # 4 levels of messages each
    content = _nested(model, depth) if depth and model.graph.node else model.SerializeToString()
    bytes_kind = data.draw(st.sampled_from(["whole", "whole", "cut", "byte"]))
    at = data.draw(st.integers(0, len(content) - 1))
    if bytes_kind == "cut":
        return content[:at]
    if bytes_kind == "byte":
        return content[:at] + bytes([data.draw(st.integers(0, 255))]) + content[at + 1:]
    return content


@pytest.mark.parametrize("build", ONNX_NETS)
def test_each_onnx_net_imports_before_it_is_mutated(build: Callable, folder: Path) -> None:
    path = folder / "fuzzed.onnx"
    path.write_bytes(build()[0].SerializeToString())
    assert isinstance(_ends_well(path), ModelSpec)


@PROFILE
@given(data=st.data())
def test_a_mutated_onnx_graph_ends_in_a_spec_or_one_line(folder: Path, data: st.DataObject) -> None:
    path = folder / "fuzzed.onnx"
    path.write_bytes(_mutated_onnx(data, data.draw(st.sampled_from(ONNX_NETS))()[0]))
    _ends_well(path)
