"""The exporter's arithmetic on constants, computed before the graph is read.

PyTorch's default exporter with `optimize=False` (the form that keeps the training graph's batch norms) writes a
conv without bias with a zero bias it computes (`Shape` of the weight, `Expand`, `CastLike`), and a flatten's
target shape as a `Concat` of the batch size (read from the input's `Shape`) and constants. onnxscript's constant
folder, the exporter's own, with ONNX's shape inference (the legacy exporter reads a channel shuffle's sizes from
the `Shape` of a tensor inside the net), finds every value computed from constants alone, with the batch size taken
as 1: a spec has no batch size, and the importer reads a reshape's target without its batch entry (a value that has
to hold for any batch is folded again at another). Only those values are taken from the folder, by name: it also
rewrites layers (a Dropout becomes an Identity, as in inference), and the importer reads the user's graph as it is.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from models.importers.onnx_external import array, as_inputs
from models.spec import SpecError

# numpy's kinds of arrays of numbers: bool, ints, floats, and V for ml_dtypes' (bfloat16, float8, int4); not strings
# (O) nor complex numbers (c), which a file may hold where a number belongs
NUMBERS = "biufV"
# How onnxscript's folder begins the RuntimeError it raises in place of whatever its evaluator of a node raised
FOLDING_FAILED = "Error during constant folding for node"


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """A Constant node's value, or None where it holds no number (a sparse tensor, strings)."""
    for attribute in node.attribute:
        value = onnx.helper.get_attribute_value(attribute)
        if attribute.name == "value":
            return numpy_helper.to_array(value)
        if attribute.name in ("value_float", "value_floats", "value_int", "value_ints"):
            return np.array(value, np.float32 if "float" in attribute.name else np.int64)
    return None


def _constants(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The graph's constant values: its initializers and its Constant nodes' values."""
    nodes = {node.output[0]: constant_value(node) for node in model.graph.node if node.op_type == "Constant"}
    return ({initializer.name: array(initializer) for initializer in model.graph.initializer}
            | {name: value for name, value in nodes.items() if value is not None})


def computed_constants(model: onnx.ModelProto, batch: int = 1) -> tuple[dict[str, np.ndarray], set[str]]:
    """The values the graph computes from constants alone, by name, and the names of all of them, with those the
    folder left out once nothing read them any more (the batch size a mask's shape was made of, a zero cast like
    an activation only for its type): the exporter's arithmetic, none of it a layer or a parameter of the net. The
    batch size is taken as `batch`: a second one tells a value made of it from one that holds for any. The
    caller's model is left as it was."""
    from onnxscript.optimizer import fold_constants  # about 1 s to import: only when an ONNX file is read

    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    as_inputs(folded)  # the weights left unread (onnx_external): the exporter's arithmetic reads none of their values
    weights = {initializer.name for initializer in model.graph.initializer}
    for tensor in folded.graph.input:
        dims = tensor.type.tensor_type.shape.dim
        if tensor.name not in weights and dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = batch  # what a shape computed from the batch size holds at that size
    try:
        fold_constants(folded, onnx_shape_inference=True)
    except RuntimeError as exc:  # a value the node's op cannot take (a float where a position goes): one line
        if not str(exc).startswith(FOLDING_FAILED):
            raise
        raise SpecError(f"its arithmetic on constants cannot be computed: {exc}: "
                        f"{' '.join(str(exc.__cause__).split())}") from exc
    # an Identity of a constant is the exporter's alias of a parameter (the importer follows it), not arithmetic
    computed = {output for node in model.graph.node if node.op_type not in ("Constant", "Identity")
                for output in node.output if output}
    remaining = {output for node in folded.graph.node for output in node.output} | {
        tensor.name for tensor in folded.graph.output}
    values = {name: value for name, value in _constants(folded).items() if name in computed}
    return values, set(values) | (computed - remaining)
