"""torch's AdaptiveAvgPool2d as PyTorch's default exporter writes it, read as the spec's adaptive_avgpool2d.

Where the output size does not divide the input's (VGG's and AlexNet's 7x7 and 6x6 head at a small input), the
exporter writes the pool as its decomposition: the image transposed to (H, W, N, C), a GatherND of every window's
pixels by constant indices, a Transpose to (N, C, oh, ow, kh, kw), then a ReduceMean over the window (its windows
even) or masks of the padding its uneven windows were gathered with (Where), the window's pixels picked one by one
(Gather), summed (Add) and divided by each window's size. The region that grows from such a Transpose over the ops
that read it and constants alone is evaluated (onnx's reference evaluator, batch 1, a random image) and compared
with the spec's pool: a tensor of (N, C, oh, ow) that equals it is the pool, whatever ops computed it; where none
does, the Transpose is refused as the op it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from models.importers.onnx_graph import feeding
from models.spec import AdaptiveAvgPool2D, Shape

PERM = (2, 3, 0, 1)  # NCHW -> HWNC: the exporter's first step, so that GatherND indexes pixels
REGION_OPS = {"Transpose", "GatherND", "Gather", "Where", "CastLike", "Cast", "Add", "Sum", "Div", "Mul", "ReduceMean",
              "ReduceSum", "Unsqueeze", "Squeeze", "Reshape"}  # what the exporter writes the pool with


@dataclass(frozen=True)
class AdaptivePool:
    """A Transpose that starts an adaptive average pool: the tensor that is the pool, its size, the nodes taken in
    (none a layer)."""

    output: str
    size: tuple[int, int]
    chain: tuple[onnx.NodeProto, ...]


def _region(transpose: onnx.NodeProto, readers: dict[str, list[onnx.NodeProto]],
            constants: dict[str, np.ndarray]) -> list[onnx.NodeProto]:
    """The nodes that compute from the Transpose's output and constants alone, in the order found (each after
    what it reads)."""
    found, tensors, order = {id(transpose)}, set(transpose.output), [transpose]
    pending = list(transpose.output)
    while pending:
        for node in readers.get(pending.pop(), []):
            if id(node) in found or node.op_type not in REGION_OPS or node.domain not in ("", "ai.onnx") or \
                    not all(not name or name in tensors or name in constants for name in node.input):
                continue
            found.add(id(node))
            order.append(node)
            tensors.update(node.output)
            pending.extend(node.output)
    return order


def _evaluated(region: list[onnx.NodeProto], image: str, x: np.ndarray, constants: dict[str, np.ndarray],
               opset: int) -> dict[str, np.ndarray]:
    """Every tensor the region computes from x, by onnx's reference evaluator."""
    read = {name for node in region for name in node.input if name in constants}
    outputs = [name for node in region for name in node.output if name]
    graph = onnx.helper.make_graph(
        region, "adaptive_pool", [onnx.helper.make_tensor_value_info(image, onnx.TensorProto.FLOAT, x.shape)],
        [onnx.helper.make_empty_tensor_value_info(name) for name in outputs],
        [onnx.numpy_helper.from_array(np.asarray(constants[name]), name) for name in sorted(read)])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    values = ReferenceEvaluator(model).run(None, {image: x})
    return dict(zip(outputs, values, strict=True))


def adaptive_pool(transpose: onnx.NodeProto, image: Shape, readers: dict[str, list[onnx.NodeProto]],
                  constants: dict[str, np.ndarray], opset: int, graph_outputs: set[str]) -> AdaptivePool | None:
    """The adaptive average pool a Transpose (PERM) of an (H, W, C) image starts, or None: the furthest tensor of
    its region (computed by the most nodes) that equals the spec's pool of a random image, and whose nodes nothing
    outside them reads."""
    height, width, channels = image
    region = _region(transpose, readers, constants)
    x = np.random.default_rng(0).standard_normal((1, channels, height, width)).astype(np.float32)
    try:
        values = _evaluated(region, transpose.input[0], x, constants, opset)
    except Exception:  # noqa: BLE001 - any failure of the evaluator: a region it cannot run is no pool
        return None
    pools = []
    for output, value in values.items():
        value = np.asarray(value)
        if value.ndim != 4 or value.shape[:2] != (1, channels) or value.dtype != np.float32:
            continue
        rows, columns = (np.array(matrix, np.float32)
                         for matrix in AdaptiveAvgPool2D(value.shape[2:]).averaging(image))
        chain = feeding(region, [output])
        inside, made = {id(node) for node in chain}, {tensor for node in chain for tensor in node.output} - {output}
        if np.allclose(value, np.einsum("hH,ncHW,wW->nchw", rows, x, columns), rtol=1e-5, atol=1e-6) and \
                not made & graph_outputs and all(id(reader) in inside for tensor in made
                                                 for reader in readers.get(tensor, [])):
            pools.append(AdaptivePool(output, value.shape[2:], tuple(chain)))
    return max(pools, key=lambda pool: len(pool.chain), default=None)
