"""The steps a framework runs for a spec and the tensors they make: the shared types of the estimate's bookkeeping
(`Step`, `Tensors`), which the saved-tensor sweeps (`models.estimate.saved`) and the eager order
(`models.estimate.eager`) both read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models import techniques
from models.estimate.rules import Rules
from models.spec import INPUT, AvgPool2D, Conv2D, LayerShapes, MaxPool2D, ModelSpec


@dataclass(frozen=True)
class Step:
    """One operation as a framework runs it: elements per example in and out, its weight bytes."""

    kind: str
    layer: int  # the spec layer it belongs to
    inputs: int  # every input together
    outputs: int
    weight_bytes: int  # trainable
    largest_weight: int
    sources: tuple[int, ...] = (INPUT,)  # the steps it reads (INPUT: the model's input)
    channels: int = 0  # the output's last axis


def _padding(layer: LayerShapes, rules: Rules) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(top, bottom), (left, right) where the framework pads a copy of the layer's input; None where the op pads."""
    op = layer.layer
    if isinstance(op, Conv2D) and op.padding == "same" and rules.explicit_padding:
        (top, bottom), (left, right) = op.same_sides(layer.input_shape)
        return ((top, bottom), (left, right)) if (top, left) != (bottom, right) else None
    if isinstance(op, Conv2D):
        rows, columns = op.pixels or (0, 0)
        sides = ((rows, rows), (columns, columns))
    elif isinstance(op, (MaxPool2D, AvgPool2D)):
        sides = op.sides(layer.input_shape)
    else:
        return None
    return sides if rules.pixel_padding and any(map(any, sides)) else None


def steps(spec: ModelSpec, rules: Rules, bytes_per_value: int) -> list[Step]:
    """The spec's layers as the framework runs them: a padding copy before a layer where the framework makes one
    (torch where 'same' is uneven, Keras for padding in pixels)."""
    result: list[Step] = []
    made = {INPUT: INPUT}  # spec layer -> the step that makes its output
    for layer in spec.walk():
        sources = tuple(made[source] for source in layer.inputs)
        inputs = sum(math.prod(shape) for shape in layer.input_shapes)
        padding = _padding(layer, rules)
        if padding:
            (top, bottom), (left, right) = padding
            h, w, c = layer.input_shape
            result.append(Step("pad", layer.index, inputs, (h + top + bottom) * (w + left + right) * c, 0, 0,
                               sources, c))
            sources, inputs = (len(result) - 1,), result[-1].outputs
        weights = [math.prod(shape) * bytes_per_value for shape in layer.params.values()]
        result.append(Step(layer.layer.kind, layer.index, inputs, math.prod(layer.output_shape), sum(weights),
                           max(weights, default=0), sources, layer.output_shape[-1]))
        made[layer.index] = len(result) - 1
    return result


def output_steps(spec: ModelSpec, ops: list[Step]) -> tuple[int, ...]:
    """The steps that make the net's outputs, in the spec's order (a layer's last step: its padding copy comes
    first)."""
    last = {op.layer: index for index, op in enumerate(ops)}
    return tuple(last[layer] for layer in spec.output_layers)


@dataclass(frozen=True)
class Tensors:
    """The tensors a run of steps makes, each named by the step that makes it (INPUT: the model's input); a view
    or in-place step makes none: its output is its input."""

    reads: list[tuple[int, ...]]  # per step, the tensors it reads
    makes: list[int]  # per step, the tensor its output is
    elements: dict[int, int]  # per example
    last_reader: dict[int, int]  # the last step reading each tensor; the net's outputs are read by the loss, after all
    first_reader: dict[int, int]  # the first step reading each tensor; the loss's, after all, if none reads an output
    outputs: tuple[int, ...]  # the tensors the net's outputs are, in the spec's order


def tensors_of(spec: ModelSpec, ops: list[Step], views: set[int]) -> Tensors:
    reads: list[tuple[int, ...]] = []
    makes: list[int] = []
    for index, op in enumerate(ops):
        reads.append(tuple(INPUT if source == INPUT else makes[source] for source in op.sources))
        makes.append(reads[-1][0] if index in views else index)
    elements = {INPUT: math.prod(spec.input_shape)} | {index: op.outputs for index, op in enumerate(ops)
                                                       if index not in views}
    last_reader = {tensor: -1 for tensor in elements}
    first_reader: dict[int, int] = {}
    for index, tensors in enumerate(reads):
        for tensor in tensors:
            first_reader.setdefault(tensor, index)
            last_reader[tensor] = index
    outputs = tuple(makes[step] for step in output_steps(spec, ops))
    for tensor in outputs:
        last_reader[tensor] = len(ops)
        first_reader.setdefault(tensor, len(ops))
    return Tensors(reads, makes, elements, last_reader, first_reader, outputs)


def view_steps(spec: ModelSpec, ops: list[Step], technique: str, training: bool, slices_view: bool) -> set[int]:
    """The steps that make no tensor: flatten and reshape, a crop and a channel slice where the framework's slice is
    a view (`slices_view`), the activations run in place, dropout where it is the identity."""
    in_place = techniques.in_place(spec, technique)
    viewing = ("flatten", "reshape", "crop2d", "channel_slice") if slices_view else ("flatten", "reshape")
    return {index for index, op in enumerate(ops) if op.kind in viewing
            or (op.kind in ("relu", "relu6") and op.layer in in_place)
            or (op.kind == "dropout" and not (training and spec.layers[op.layer].rate))}

