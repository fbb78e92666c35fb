"""The exporter's arithmetic on constants, computed before the graph is read.

PyTorch's default exporter with `optimize=False` (the form that keeps the training graph's batch norms) writes a
conv without bias with a zero bias it computes (`Shape` of the weight, `Expand`, `CastLike`), and a flatten's
target shape as a `Concat` of the batch size (read from the input's `Shape`) and constants. onnxscript's constant
folder, the exporter's own, finds every value computed from constants alone, with the batch size taken as 1: a
spec has no batch size, and the importer reads a reshape's target without its batch entry. Only those values are
taken from the folder, by name: it also rewrites layers (a Dropout becomes an Identity, as in inference), and the
importer reads the user's graph as it is.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def _constants(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    """The graph's constant values: its initializers and its Constant nodes' tensors."""
    nodes = {node.output[0]: attribute.t for node in model.graph.node if node.op_type == "Constant"
             for attribute in node.attribute if attribute.name == "value"}
    return {initializer.name: initializer for initializer in model.graph.initializer} | nodes


def computed_constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The values the graph computes from constants alone, by name: the exporter's arithmetic, none of them a
    parameter of the net. The caller's model is left as it was."""
    from onnxscript.optimizer import fold_constants  # about 1 s to import: only when an ONNX file is read

    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    weights = {initializer.name for initializer in model.graph.initializer}
    for tensor in folded.graph.input:
        dims = tensor.type.tensor_type.shape.dim
        if tensor.name not in weights and dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = 1  # the batch: what a shape computed from it holds at batch 1
    fold_constants(folded)
    computed = {output for node in model.graph.node if node.op_type != "Constant" for output in node.output}
    return {name: numpy_helper.to_array(tensor) for name, tensor in _constants(folded).items() if name in computed}
