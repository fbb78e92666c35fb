"""ONNX weights stored beside the model file (external data), read only where their values are needed.

A spec needs a weight's shape, not its values: an external initializer of more than SHAPES_ONLY_BYTES is counted
from the shape and type the file declares, never read (a 2.4 GB weights file took 4.8 GB to count). The values that
shape the computation (a Reshape's target, a Resize's scales, a Clip's bounds) are small, and read. Every external
tensor's location is opened by onnx's own reader first, which refuses one outside the model's folder (by traversal,
an absolute path or a symlink) and an offset past the end of its file, with nothing read.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.external_data_helper import load_external_data_for_tensor, uses_external_data

SHAPES_ONLY_BYTES = 2**20


def read_model(path: str | Path, values: bool) -> onnx.ModelProto:
    """The model at `path`; `values`: every weight read (the proof of its import needs them), else each external
    initializer past SHAPES_ONLY_BYTES left unread (`array` gives its shape)."""
    model = onnx.load(str(path), load_external_data=values)
    if values:
        return model
    folder = str(Path(path).parent)
    # protobuf makes an element's Python object anew on each access, whose id a later one may reuse: held in a list,
    # each keeps its id while the loop below runs
    held = list(model.graph.initializer)
    initializers = {id(tensor) for tensor in held}
    for tensor in _tensors(model):
        if not uses_external_data(tensor):
            continue
        _opened(tensor, folder)
        if id(tensor) not in initializers or _declared_bytes(tensor) <= SHAPES_ONLY_BYTES:
            load_external_data_for_tensor(tensor, folder)
    return model


def missing_data(path: str | Path) -> str | None:
    """The location of the first file of weights the model at `path` stores beside it that is not there (a model
    copied without its `.onnx.data`), or None: read where onnx's reader refused the file, to name what is missing."""
    folder = Path(path).parent
    for tensor in _tensors(onnx.load(str(path), load_external_data=False)):
        location = next((entry.value for entry in tensor.external_data if entry.key == "location"), None)
        if uses_external_data(tensor) and location and not (folder / location).exists():
            return location
    return None


def array(tensor: onnx.TensorProto) -> np.ndarray:
    """A tensor's values; an unread one's (`read_model`) as zeros of its declared shape and type, one value broadcast
    (no memory): read for its shape alone."""
    if uses_external_data(tensor):
        return np.broadcast_to(np.zeros((), onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)), tuple(tensor.dims))
    return numpy_helper.to_array(tensor)


def as_inputs(model: onnx.ModelProto) -> None:
    """Makes each unread initializer an input of the graph, of its declared type and shape, in place: a constant
    folder then folds nothing of its values (a Shape of it still folds, from its shape)."""
    unread = [tensor for tensor in model.graph.initializer if uses_external_data(tensor)]
    inputs = {value.name for value in model.graph.input}  # an older IR lists its initializers as inputs too
    for tensor in unread:
        model.graph.initializer.remove(tensor)
        if tensor.name not in inputs:
            model.graph.input.append(onnx.helper.make_tensor_value_info(tensor.name, tensor.data_type,
                                                                        list(tensor.dims)))


def _tensors(model: onnx.ModelProto) -> list[onnx.TensorProto]:
    """The graph's initializers and its Constant nodes' tensors (a subgraph's nodes are refused by the importer)."""
    return [*model.graph.initializer, *(attribute.t for node in model.graph.node if node.op_type == "Constant"
                                        for attribute in node.attribute if attribute.HasField("t"))]


def _declared_bytes(tensor: onnx.TensorProto) -> int:
    return math.prod(tensor.dims) * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize


def _opened(tensor: onnx.TensorProto, folder: str) -> None:
    """onnx's reader opens the tensor's location, with its checks, and reads none of it (a copy, asked for 0 bytes)."""
    probe = onnx.TensorProto()
    probe.CopyFrom(tensor)
    lengths = [entry for entry in probe.external_data if entry.key == "length"]
    (lengths[0] if lengths else probe.external_data.add(key="length")).value = "0"
    load_external_data_for_tensor(probe, folder)
