"""Running a spec's graph, the same way in every framework that runs it by hand (torch, JAX).

A net runs as stages: single layers, and the runs a technique recomputes in the backward pass
(`models.techniques.segments`), each of which the framework wraps in its checkpoint call. Every value
is dropped after its last reader, so a framework holds no more than the net itself needs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from models import techniques
from models.spec import INPUT, ModelSpec

Value = TypeVar("Value")


@dataclass(frozen=True)
class Stage:
    layers: range
    recomputed: bool  # run under the framework's checkpoint
    inputs: tuple[int, ...]  # values it reads from before it (INPUT: the model's input)
    outputs: tuple[int, ...]  # values it makes that later stages (or the loss) read
    done_with: tuple[int, ...]  # values no later stage reads: drop them after this one


def stages(spec: ModelSpec, technique: str) -> list[Stage]:
    runs = techniques.segments(spec, technique) if technique in techniques.RECOMPUTING else []
    starts = {run.start: run for run in runs}
    last_reader = {source: max(readers, default=len(spec.layers)) for source, readers in spec.consumers().items()}
    result, index = [], 0
    while index < len(spec.layers):
        run = starts.get(index, range(index, index + 1))
        inputs, outputs = techniques.boundary(spec, run)
        done_with = tuple(source for source in (*inputs, *run) if last_reader[source] < run.stop and source != INPUT)
        result.append(Stage(run, run.start in starts, inputs, outputs, done_with))
        index = run.stop
    return result


def execute(spec: ModelSpec, layers: range, values: dict[int, Value],
            call: Callable[[int, list[Value]], Value]) -> None:
    """Runs `layers` in order on `values` (by layer index, INPUT for the model's input), dropping each value after
    its last reader among them unless a layer after them reads it too."""
    readers = spec.consumers()
    for index in layers:
        sources = spec.layer_inputs(index)
        values[index] = call(index, [values[source] for source in sources])
        for source in set(sources):
            if source in values and max(readers[source]) == index:
                del values[source]


def run_stages(spec: ModelSpec, stage_list: list[Stage], inputs: Value,
               call: Callable[[int, list[Value]], Value],
               recompute: Callable[[Stage, list[Value]], list[Value]]) -> list[Value]:
    """The whole net: plain stages through `call`, recomputed ones through `recompute` (the framework's checkpoint
    over the stage's inputs, returning its outputs); the net's outputs, in the spec's order."""
    values: dict[int, Value] = {INPUT: inputs}
    for stage in stage_list:
        if stage.recomputed:
            values.update(zip(stage.outputs, recompute(stage, [values[source] for source in stage.inputs]),
                              strict=True))
        else:
            execute(spec, stage.layers, values, call)
        for source in stage.done_with:
            values.pop(source, None)
    return [values[index] for index in spec.output_layers]


def run_inside(spec: ModelSpec, stage: Stage, inputs: list[Value], call: Callable[[int, list[Value]], Value]) -> list:
    """A recomputed stage's body: its layers on its inputs, returning its outputs (what the checkpoint wraps)."""
    values = dict(zip(stage.inputs, inputs, strict=True))
    execute(spec, stage.layers, values, call)
    return [values[index] for index in stage.outputs]
