"""What an ONNX tensor depends on: shared by the importer (the nodes the graph's output needs) and the adaptive
pool's proof (the nodes of a region one of its tensors needs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx


def feeding(nodes: Sequence[onnx.NodeProto], outputs: Sequence[str],
            known: Iterable[str] = ()) -> list[onnx.NodeProto]:
    """The nodes among `nodes` that the `outputs` depend on, in their order, going no further back than a tensor of
    `known` (a value known without computing it)."""
    skipped = set(known)
    producer = {tensor: node for node in nodes for tensor in node.output if tensor not in skipped}
    needed, pending = set(), list(outputs)
    while pending:
        node = producer.get(pending.pop())
        if node is not None and id(node) not in needed:
            needed.add(id(node))
            pending.extend(node.input)
    return [node for node in nodes if id(node) in needed]
