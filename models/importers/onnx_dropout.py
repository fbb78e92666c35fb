"""torch's dropout in training as PyTorch's default exporter writes it, read as the spec's dropout.

An in-place `nn.Dropout` and torchvision's stochastic depth reach the ONNX graph as their arithmetic: a mask
drawn with RandomUniformLike, kept where it is below the keep probability p, divided by p and multiplied into x,

    x * Cast(RandomUniformLike(shape) < p) / p

with the shape x's own (a draw per value: dropout) or (N, 1, 1, 1) (a draw per example: stochastic depth). The
chain is one spec dropout of rate 1 - p. Anything else around a RandomUniformLike is no dropout, and the importer
refuses it as the op it is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from models.importers.onnx_folding import NUMBERS

MASK_OPS = {"Div", "CastLike", "Cast", "Less", "RandomUniformLike", "Expand", "Shape", "Concat", "Reshape",
            "Squeeze", "Unsqueeze"}  # what torch's bernoulli and its mask's shape are written with


@dataclass(frozen=True)
class DropoutMask:
    """A Mul that is a dropout: which of its inputs is dropped, at what rate, and the mask's nodes (none a layer)."""

    output: str  # the Mul's
    source: int
    rate: float
    per_example: bool
    chain: tuple[onnx.NodeProto, ...]


def _ancestors(tensor: str, stop: str, producer: dict[str, onnx.NodeProto], known: set[str]) -> list[onnx.NodeProto]:
    """The nodes that compute `tensor`, back to values known without the data and to `stop` (the dropped tensor),
    which are not in it."""
    found: dict[int, onnx.NodeProto] = {}
    pending = [tensor]
    while pending:
        name = pending.pop()
        node = producer.get(name)
        if name == stop or name in known or node is None or id(node) in found:
            continue
        found[id(node)] = node
        pending.extend(node.input)
    return list(found.values())


def dropout_mask(mul: onnx.NodeProto, producer: dict[str, onnx.NodeProto], readers: dict[str, list[onnx.NodeProto]],
                 constants: dict[str, np.ndarray], known: set[str]) -> DropoutMask | None:
    """The dropout a Mul is, or None where it multiplies anything but a dropout mask (`known`: the values computed
    without the data, constants among them)."""
    for source in (0, 1):
        x, mask = mul.input[source], mul.input[1 - source]
        divide = producer.get(mask)
        if divide is None or divide.op_type != "Div" or divide.input[1] not in constants:
            continue
        chain = [divide, *_ancestors(divide.input[0], x, producer, known | set(constants))]
        kinds = [node.op_type for node in chain]
        if not set(kinds) <= MASK_OPS or kinds.count("RandomUniformLike") != 1 or kinds.count("Less") != 1:
            continue
        ids = {id(node) for node in chain} | {id(mul)}
        if any(id(reader) not in ids for node in chain for output in node.output for reader in readers.get(output, [])):
            continue  # a value of the mask read elsewhere: not a private mask
        less = next(node for node in chain if node.op_type == "Less")
        draw = next(node for node in chain if node.op_type == "RandomUniformLike")
        attributes = {attribute.name: onnx.helper.get_attribute_value(attribute) for attribute in draw.attribute}
        keep, scale = _scalar(less.input[1], producer, constants), _scalar(divide.input[1], producer, constants)
        if less.input[0] != draw.output[0] or (attributes.get("low", 0.0), attributes.get("high", 1.0)) != (0, 1) or \
                keep is None or scale is None or not np.isclose(keep, scale, rtol=1e-6):
            continue
        drawn = constants.get(draw.input[0])  # the mask's shape at batch 1, where it is (N, 1, 1, 1)
        per_example = drawn is not None and drawn.ndim > 1 and all(size == 1 for size in drawn.shape[1:])
        if drawn is None and not any(node.op_type == "Shape" and node.input[0] == x for node in chain):
            continue  # neither one draw per example nor a draw per value of x
        return DropoutMask(mul.output[0], source, round(1.0 - keep, 7), per_example, tuple(chain))
    return None


def _scalar(tensor: str, producer: dict[str, onnx.NodeProto], constants: dict[str, np.ndarray]) -> float | None:
    """A scalar constant, or one cast like another tensor (the keep probability: CastLike(p, uniform draws))."""
    node = producer.get(tensor)
    if tensor not in constants and node is not None and node.op_type == "CastLike":
        tensor = node.input[0]
    value = constants.get(tensor)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 and value.dtype.kind in NUMBERS \
        else None
