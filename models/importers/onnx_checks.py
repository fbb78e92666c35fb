"""Whether an ONNX graph is well formed, before the importer (or the constant folder it runs first) reads it: a
malformed file is refused in one line, never read as another net (a node's missing attribute as its default, the last
of two nodes writing one tensor) nor left to fail somewhere inside.

onnx's checker reads each node against its op's schema (a required attribute or input missing, an attribute of
another type) and each tensor against its shape (an initializer declared with no data, or too little). Its whole-model
check is not used: it also asks the graph's inputs and outputs for shapes, which the importer does not need and an
exporter may leave out. A node of an op onnx has no schema for (a custom op) is left to the importer, which refuses
it by name. Checked here: that each tensor has one writer, that a tensor is of a type the importer reads and its data
is exactly what its shape holds (the checker finds too little, numpy's reshape too much), that every name is text
(protobuf hands a name that is not UTF-8 over as bytes) and every type a type of onnx's (a graph's input or output
may leave its shape out, which onnx's check of it does not allow).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import onnx
from google.protobuf.message import Message
from onnx import TensorProto, numpy_helper

# The tensor types the importer reads: numbers of whole bytes. Packed ones (float8, int4, ...) are a quantized net's,
# of which it maps nothing; strings and complex numbers are no weights nor sizes.
READ = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE, TensorProto.BOOL,
        TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8,
        TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64}
TYPES = set(TensorProto.DataType.values())  # every tensor type onnx has
Context = onnx.checker.C.CheckerContext  # what onnx's checks read a model's IR version and opsets from


def malformed(model: onnx.ModelProto) -> str | None:
    """What is wrong with the graph, in one line; None where nothing is."""
    for message in _messages(model):
        field = _not_text(message)
        if field:
            return f"its {field} is not UTF-8 text"
        if message.DESCRIPTOR is onnx.TypeProto.Tensor.DESCRIPTOR and message.elem_type not in TYPES:
            return f"it names a tensor type {message.elem_type}, which onnx does not have"
    context = Context()  # the model's own opsets, as onnx.checker's default context is made
    context.ir_version = model.ir_version
    context.opset_imports = {entry.domain: entry.version for entry in model.opset_import}
    written = {tensor.name: "the graph's input" for tensor in (*model.graph.input, *model.graph.initializer)}
    for index, node in enumerate(model.graph.node):
        label = f"node {node.name or (node.output[0] if node.output else f'#{index}')!r} ({node.op_type})"
        for output in filter(None, node.output):
            if output in written:
                return f"{label} writes {output!r}, which {written[output]} writes too"
            written[output] = label
        wrong = _malformed_node(node, context)
        if wrong:
            return f"{label} is malformed: {wrong}"
    for tensor in model.graph.initializer:
        wrong = _unreadable(tensor, context)
        if wrong:
            return f"initializer {tensor.name!r} is malformed: {wrong}"
    return None


def _malformed_node(node: onnx.NodeProto, context: Context) -> str | None:
    """What is wrong with a node: against its op's schema (where onnx has one), or in a tensor it holds (a
    Constant's value)."""
    if onnx.defs.has(node.op_type, node.domain):
        wrong = _wrong(onnx.checker.check_node, node, context)
        if wrong:
            return wrong
    for attribute in node.attribute:
        wrong = _unreadable(attribute.t, context) if attribute.type == onnx.AttributeProto.TENSOR else None
        if wrong:
            return wrong
    return None


def _wrong(check: Callable[[Message, Context], None], proto: Message, context: Context) -> str | None:
    """What onnx's `check` finds wrong with `proto`, in one line."""
    try:
        check(proto, context)
    except onnx.checker.ValidationError as exc:
        return " ".join(str(exc).split())
    return None


def _unreadable(tensor: onnx.TensorProto, context: Context) -> str | None:
    """What keeps a tensor's values from being read: a type the importer does not read, data too little for its
    shape (onnx's checker) or too much (numpy's reshape). Data kept in another file is the loader's to check."""
    if tensor.data_type not in READ:
        known = tensor.data_type in TYPES
        return f"its type is {TensorProto.DataType.Name(tensor.data_type) if known else tensor.data_type}; the " \
               f"importer reads whole-byte numbers"
    if tensor.data_location == TensorProto.EXTERNAL:
        return None
    wrong = _wrong(onnx.checker.check_tensor, tensor, context)
    if wrong:
        return wrong
    try:
        numpy_helper.to_array(tensor)
    except ValueError as exc:
        return f"its data does not fill its shape {list(tensor.dims)} ({exc})"
    return None


def _messages(message: Message) -> Iterator[Message]:
    """`message` and every message in it (protobuf reads 100 levels of them at most: no deeper recursion here)."""
    yield message
    for field in message.DESCRIPTOR.fields:
        if field.type == field.TYPE_MESSAGE and (field.is_repeated or message.HasField(field.name)):
            inner = getattr(message, field.name)
            for each in inner if field.is_repeated else [inner]:
                yield from _messages(each)


def _not_text(message: Message) -> str | None:
    """The first text field of `message` that is not UTF-8 (protobuf gives its bytes), by name."""
    for field in message.DESCRIPTOR.fields:
        if field.type == field.TYPE_STRING:
            values = getattr(message, field.name) if field.is_repeated else [getattr(message, field.name)]
            if any(isinstance(value, bytes) for value in values):
                return f"{message.DESCRIPTOR.name}.{field.name}"
    return None
