"""What the ONNX importer's node families share: how a tensor holds a spec value, the refusal, small readers of
attributes."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import onnx

from models.spec import Shape, positive

# How the ONNX tensor's axes (batch left out) hold the spec's value: a channels-first image (C, H, W) of the
# spec's (H, W, C); the same axes as the spec (a flat vector, or an image a Transpose made channels-last); or a
# flat vector in channels-first order of the spec's image of this shape (what Flatten makes of a real map).
FIRST, SAME = "channels-first", "as-spec"


Layout = str | Shape


TO_LAST, TO_FIRST = (0, 2, 3, 1), (0, 3, 1, 2)


MAPPED = "docs/models.md lists the ONNX nodes the importer maps"


BATCH = None  # the batch's entry in a shape known up to the batch size


class _Refused(Exception):
    """A node with no counterpart: the message says why, the caller adds the file and the node."""


@dataclass(frozen=True)
class _Tensor:
    """An ONNX tensor as the spec sees it: the spec layer whose output it is, and how its axes hold that value."""

    spec: str
    layout: Layout


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


# torch's dynamo exporter writes the aten call each node came from into its metadata: what the graph alone cannot
# say (a norm's weight of None, a bias its optimizer removed for being zeros)
FX_NODE = "pkg.torch.onnx.fx_node"
FX_CALL = re.compile(r"target=torch\.ops\.(?P<target>aten\.\w+)\.\w+\]\(args = \((?P<arguments>.*?)\)(?:, kwargs|\)?$)")


def _torch_call(node: onnx.NodeProto) -> tuple[str, list[str]] | None:
    """The aten call (`aten.conv2d`) a node was exported from and its arguments as written, or None where its
    metadata does not say."""
    text = next((entry.value for entry in node.metadata_props if entry.key == FX_NODE), "")
    found = FX_CALL.search(text)
    return None if found is None else (found["target"], found["arguments"].split(", "))
