"""The tensors each step keeps: what a backward pass holds of the net's tensors and beside them, under each
technique (recomputed runs, in place, tracked), swept over the steps once (`activations`, `kept_by_layer`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate

from models import techniques
from models.estimate.rules import BOOL, EVAL_SAVES, EXPANDED_FILTER_COPIES, FLOAT32, INT64, Rules
from models.estimate.tensors import Step, Tensors, output_steps, steps, tensors_of, view_steps
from models.spec import INPUT, Conv2D, LayerShapes, ModelSpec


def _over_steps(count: int, spans: Iterable[tuple[int, int, int]]) -> list[int]:
    """Per step in range(count), the total of the amounts whose span of steps [start, stop) covers it. A difference
    array: its cost is the steps plus the spans, where adding up every span at every step grows with depth squared."""
    change = [0] * (count + 1)
    for start, stop, amount in spans:
        start, stop = max(start, 0), min(stop, count)
        if start < stop:
            change[start] += amount
            change[stop] -= amount
    return list(accumulate(change[:count]))


def _live(tensors: Tensors, count: int) -> list[int]:
    """Per step, the elements of the tensors live while it runs forward: made by then and read by it or later."""
    return _over_steps(count, ((tensor, tensors.last_reader[tensor] + 1, elements)
                               for tensor, elements in tensors.elements.items()))


def _spanning(tensors: Tensors, count: int) -> list[int]:
    """Per step, the elements of the tensors made before it and read after it (a skip connection's), whose gradients
    its backward finds live; the model's input has none."""
    return _over_steps(count, ((tensor + 1, tensors.last_reader[tensor], elements)
                               for tensor, elements in tensors.elements.items() if tensor != INPUT))


def _gradients(tensors: Tensors, index: int, view: bool, spanning: int) -> int:
    """The elements of the activation gradients live during step `index`'s backward: those of the tensors made before
    it and read after it (`spanning`, from `_spanning`), and its output's and its inputs' (the model's input has
    none); a view or in-place step is counted as making no gradient of its own."""
    def spans(tensor: int) -> bool:  # already counted in `spanning`
        return tensor != INPUT and tensor < index < tensors.last_reader[tensor]

    if view:
        mine = tensors.makes[index]
        return spanning - (tensors.elements[mine] if spans(mine) else 0)
    own = {tensors.makes[index], *tensors.reads[index]} - {INPUT}
    return spanning + sum(tensors.elements[tensor] for tensor in own if not spans(tensor))


def _pending(group: list[int | None], kept: Iterable[tuple[list[int], int]]) -> list[int]:
    """Per step, the bytes the backward holds there of what steps keep for it (`kept`: each thing's keeping steps and
    its bytes). A thing is held at step `index` while a step keeping it, at or before `index`, is outside every
    recomputed run or in `index`'s own run (runs are recomputed one at a time).

    One sweep, not every thing tested at every step: a thing counts from its first keeper outside every run on, and
    inside a run from its first keeper there up to that point."""
    count = len(group)
    changes: dict[int, list[tuple[int | None, int]]] = {}  # step -> (run or None for outside, bytes) from there on
    for keepers, amount in kept:
        outside = min((step for step in keepers if group[step] is None), default=count)
        firsts: dict[int, int] = {}  # run -> its first keeper
        for step in keepers:
            run = group[step]
            if run is not None and step < firsts.get(run, count):
                firsts[run] = step
        changes.setdefault(outside, []).append((None, amount))
        for run, first in firsts.items():
            if first < outside:
                changes.setdefault(first, []).append((run, amount))
                changes.setdefault(outside, []).append((run, -amount))
    held: dict[int | None, int] = {None: 0}  # run (None: outside every run) -> bytes held from it
    result = []
    for index, run in enumerate(group):
        for where, amount in changes.get(index, ()):
            held[where] = held.get(where, 0) + amount
        result.append(held[None] + (held.get(run, 0) if run is not None else 0))
    return result


def _extra_bytes(what: str, op: Step, layer: LayerShapes, batch: int, value: int) -> int:
    """A saved value that is not one of the net's tensors, in bytes for the batch (`value`: one activation's); a
    per-example dropout draws one value per example (its mask or noise)."""
    if what == "channels":
        return op.channels * FLOAT32
    if what == "groups":
        return batch * layer.layer.groups_of(layer.input_shape) * FLOAT32
    if what == "matrices":
        return sum(len(matrix) * len(matrix[0]) for matrix in layer.layer.interpolation_matrices(
            layer.input_shape)) * FLOAT32
    if what == "example_channels":
        return batch * op.channels * FLOAT32
    if what == "copy":
        return op.inputs * value
    if what == "kernel":
        return op.largest_weight
    if what == "positions":
        return op.outputs // op.channels * batch * FLOAT32
    values = 1 if getattr(layer.layer, "per_example", False) else op.outputs
    return values * {"mask": batch * BOOL, "indices": batch * INT64, "residual": value}[what]


def _inside(spec: ModelSpec, ops: list[Step], index: int) -> bool:
    """Whether step `index` is made inside a layer's own op, not as a layer's output: the padded copy a framework
    makes for an uneven 'same' padding (a pixel padding is Keras's own ZeroPadding2D layer)."""
    return (index != INPUT and ops[index].kind == "pad"
            and getattr(spec.layers[ops[index].layer], "padding", "") == "same")


def _held_peak(spec: ModelSpec, ops: list[Step], tensors: Tensors, group: list[int | None]) -> int:
    """The most values a call holds at once without gradient tracking (per example): every layer output made so
    far outside a recomputed run, plus the outputs inside the run being called (a run is one Keras layer whose call
    holds its own outputs until it returns)."""
    held = _held(spec, ops, tensors, group)
    outer = inner = peak = 0
    for index in range(len(ops)):
        made = tensors.makes[index]
        if made != index or _inside(spec, ops, index):
            continue
        if group[index] is None or index == 0 or group[index] != group[index - 1]:
            inner = 0
        if group[index] is None:
            outer += tensors.elements[made]
        else:
            inner += tensors.elements[made]
        peak = max(peak, outer + inner)
        if group[index] is not None and made in held:  # the run's output outlives the run's call
            outer, inner = outer + tensors.elements[made], inner - tensors.elements[made]
    return peak


def _held(spec: ModelSpec, ops: list[Step], tensors: Tensors, group: list[int | None]) -> set[int]:
    """The layer outputs a model's call keeps until it returns (Keras's eager Functional): every tensor made outside
    a recomputed run, and each run's output (a tensor of a run that a step outside it reads); not the batch (counted
    with the inputs) nor an op's inner copies."""
    ends = {tensor for reader, read in enumerate(tensors.reads) for tensor in read
            if tensor != INPUT and group[tensor] is not None and group[reader] != group[tensor]}
    return {tensors.makes[index] for index in range(len(ops)) if (group[index] is None or index in ends)
            and tensors.makes[index] == index and not _inside(spec, ops, index)}


@dataclass(frozen=True)
class Activations:
    """What the backward pass keeps and what is in flight, in bytes for the whole batch."""

    saved: int  # every tensor kept for the backward pass, at the end of the forward
    backward_peak: int  # the largest live set during the backward (saved so far + live gradients + weight grads)
    backward_saved: int  # of which saved tensors
    backward_gradients: int  # of which weight gradients already produced
    inference_transient: int  # the tensors live at once at a step, with no gradient tracking
    backward_workspaces: int = 0  # the BLAS workspaces allocated by the backward's peak (not in backward_peak)
    inference_workspaces: int = 0  # those allocated by the forward's peak (not in inference_transient)


def _saved_by(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: Tensors, views: set[int],
              saves: dict[str, tuple[str, ...]], batch: int, value: int) -> tuple[dict[int, list[int]], list[int]]:
    """What each step's backward keeps: the net's tensors it keeps (tensor -> the steps keeping it), and per step the
    bytes it keeps that are no tensor of the net's (masks, indices, copies)."""
    savers: dict[int, list[int]] = {}
    extras = [0] * len(ops)
    walked = spec.walk()
    for index, op in enumerate(ops):
        in_place = op.kind in ("relu", "relu6") and index in views
        layer = walked[op.layer]
        kept = saves[op.kind] + (rules.affine_saves.get(op.kind, ()) if getattr(layer.layer, "affine", False) else ())
        for what in rules.in_place_saves.get(op.kind, kept) if in_place else kept:
            if what == "copy" and _inside(spec, ops, op.sources[0]):
                what = "input"  # the op's own padded copy is already channels-first: the op keeps that
            if what in ("input", "output"):
                for tensor in tensors.reads[index] if what == "input" else (tensors.makes[index],):
                    if tensor != INPUT:  # the batch itself is counted with the inputs
                        savers.setdefault(tensor, []).append(index)
            else:
                extras[index] += _extra_bytes(what, op, layer, batch, value)
    return savers, extras


def what_steps_keep(spec: ModelSpec, rules: Rules, ops: list[Step], technique: str, device: str, batch: int,
                    value: int) -> tuple[set[int], Tensors, dict[int, list[int]], list[int]]:
    """The views and tensors the steps make under `technique` (in place, tracked: evaluation mode) and what each
    step's backward keeps of them (`_saved_by`), shared by the estimate and its per-layer table."""
    training = technique != "tracked"
    saves = rules.saves | (rules.cuda_saves if device == "cuda" else {})
    saves = saves if training else saves | EVAL_SAVES | rules.tracked_saves
    views = view_steps(spec, ops, technique, training, rules.slices_view)
    tensors = tensors_of(spec, ops, views)
    return views, tensors, *_saved_by(spec, rules, ops, tensors, views, saves, batch, value)


def kept_by_layer(spec: ModelSpec, rules: Rules, batch: int, bytes_per_value: int, technique: str = "none",
                  activation_bytes: int | None = None, device: str = "cpu") -> tuple[list[int], int]:
    """Per spec layer, the bytes its backward keeps for the batch (a tensor two layers keep counted at the first,
    a padded copy at its layer), and the loss's residual: what `activations` counts as saved with nothing
    recomputed, laid out so a person can see which layers hold the memory."""
    ops = steps(spec, rules, bytes_per_value)
    value = batch * (activation_bytes or bytes_per_value)
    _, tensors, savers, extras = what_steps_keep(spec, rules, ops, technique, device, batch, value)
    per_layer = [0] * len(spec.layers)
    for tensor, keepers in savers.items():
        per_layer[ops[min(keepers)].layer] += value * tensors.elements[tensor]
    for index, extra in enumerate(extras):
        per_layer[ops[index].layer] += extra
    return per_layer, loss_residual(spec, rules, ops, tensors, set(savers)) * value


def recomputed_runs(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: Tensors,
                technique: str) -> tuple[set[int], list[int | None]]:
    """The tensors kept for a recomputation (each run's inputs from outside it, or the outputs a policy keeps) and
    the recomputed run of each step (None outside every run)."""
    made = {op.layer: index for index, op in enumerate(ops)}
    if technique in rules.policy_keeps:  # a policy over the net: the named kinds' outputs kept, every layer recomputed
        runs = [range(layer, layer + 1) for layer in range(len(spec.layers))]
        kept = {tensors.makes[made[layer]] for layer, kind in enumerate(spec.layers)
                if kind.kind in rules.policy_keeps[technique]}
    else:  # each run's inputs from outside it: `techniques.boundary`'s sources, without the readers it finds per run
        runs = techniques.segments(spec, technique) if technique in techniques.RECOMPUTING else []
        kept = {tensors.makes[made[source]] for run in runs for layer in run for source in spec.layer_inputs(layer)
                if source not in run and source != INPUT}
    run_of = {layer: number for number, run in enumerate(runs) for layer in run}
    return kept - {INPUT}, [run_of.get(op.layer) for op in ops]


def expanded_filters(spec: ModelSpec, rules: Rules, ops: list[Step], device: str, bytes_per_value: int) -> list[int]:
    """Per step, the temporaries its backward plans where the compiler expands a depthwise conv's filter gradient
    into a dense conv's (`rules.expands_depthwise_on`): EXPANDED_FILTER_COPIES of kh x kw x C_in x C_out, so that
    a ConvNeXt's 7x7 depthwise convs of 1,024 channels hold 392 MiB while its maps are a few KiB."""
    if device not in rules.expands_depthwise_on:
        return [0] * len(ops)
    shapes = spec.walk()
    found = []
    for op in ops:
        layer = shapes[op.layer]
        conv, channels = layer.layer, layer.input_shapes[0][-1]
        depthwise = op.kind == "conv2d" and isinstance(conv, Conv2D) and conv.groups == channels > 1
        found.append(EXPANDED_FILTER_COPIES * bytes_per_value * math.prod(layer.params["kernel"][:2]) * channels
                     * conv.filters if depthwise else 0)
    return found


def _backward_worst(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: Tensors, views: set[int],
                    kept: set[int], savers: dict[int, list[int]], extras: list[int], group: list[int | None],
                    saved: int, value: int, device: str, workspace: int,
                    matmuls: list[int], expanded: list[int]) -> tuple[int, int, int, int]:
    """The training step's worst moment, swept from the last step back (and the forward's end where the call holds
    its outputs): (total, held, gradients, workspaces) bytes; `expanded`: per step, what its backward plans beyond
    (`expanded_filters`)."""
    count = len(ops)
    pending = _pending(group, [*((steps_, value * tensors.elements[tensor]) for tensor, steps_ in savers.items()),
                               *(([index], extra) for index, extra in enumerate(extras) if extra)])
    # a kept tensor is freed once the backward has passed every step that reads it (its run's recomputation included)
    held_inputs = _over_steps(count, ((-1 if rules.holds_run_inputs else tensors.first_reader[tensor], count,
                                       value * tensors.elements[tensor]) for tensor in kept))
    spanning = _spanning(tensors, count)
    largest = max((o.largest_weight for o in ops), default=0)
    forward_workspace = workspace if matmuls else 0  # the forward is over: its thread's workspace exists
    worst, after = (0, 0, 0, 0), 0
    for index in reversed(range(count)):
        held = held_inputs[index] + pending[index]
        grads = min(after, largest * rules.in_flight) if device in rules.streams_on else after
        flowing = value * _gradients(tensors, index, index in views, spanning[index])
        libraries = forward_workspace + (workspace if matmuls and index <= matmuls[-1] else 0)
        worst = max(worst, (held + flowing + grads + libraries + expanded[index], held, grads, libraries))
        after += ops[index].weight_bytes
    if rules.holds_outputs:  # at the forward's end the call still holds the outputs nothing saved
        kept_tensors = kept | {tensor for tensor, steps_ in savers.items() if any(group[s] is None for s in steps_)}
        unsaved = _held(spec, ops, tensors, group) - kept_tensors
        held_outputs = saved + value * sum(tensors.elements[tensor] for tensor in unsaved)
        worst = max(worst, (held_outputs + forward_workspace, saved, 0, forward_workspace))
    return worst


def _forward_transient(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: Tensors, views: set[int],
                       savers: dict[int, list[int]], extras: list[int], group: list[int | None], technique: str,
                       value: int, workspace: int, matmuls: list[int]) -> tuple[int, int]:
    """Inference's peak beyond what is kept, with the forward thread's workspace it includes: (total, workspace)."""
    count = len(ops)
    infer_views = view_steps(spec, ops, technique, False, rules.slices_view)
    forward = tensors if infer_views == views else tensors_of(spec, ops, infer_views)
    live = [elements * value for elements in _live(forward, count)]  # bytes
    def forward_held(index: int) -> int:  # the forward thread's workspace, once it has multiplied
        return workspace if matmuls and index >= matmuls[0] else 0

    if technique == "tracked":  # beyond what the backward needs (kept from its step on), what else is live when
        unsaved = _over_steps(count, ((tensor, forward.last_reader[tensor] + 1, elements)
                                      for tensor, elements in forward.elements.items() if tensor not in savers))
        unmade = _over_steps(count, ((0, tensor, elements) for tensor, elements in forward.elements.items()
                                     if tensor in savers))
        extras_after = [*list(accumulate(reversed(extras)))[-2::-1], 0]  # kept by the steps after each
        live = [value * (unsaved[index] - unmade[index]) - extras_after[index] for index in range(count)]
    # (0, 0) where every step is a view: nothing is made beside the batch (counted with the inputs)
    transient = max(((max(live[index], 0) + forward_held(index), forward_held(index))
                     for index in range(count) if index not in infer_views), default=(0, 0))
    if rules.holds_outputs:  # the call holds every output until it returns: its peak is at the end, past any matmul
        forward_workspace = workspace if matmuls else 0
        transient = max(transient, (value * _held_peak(spec, ops, forward, group) + forward_workspace,
                                    forward_workspace))
    return transient


def loss_residual(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: Tensors, kept: set[int]) -> int:
    """The values per example the loss keeps for its backward, over every output: the softmax (cross-entropy) or the
    difference (mse), each the output's size; where the mse keeps the output itself, nothing for an output the
    backward keeps already (`kept`)."""
    shared = rules.mse_keeps_output and spec.loss == "mse"
    ends = dict(zip(tensors.outputs, output_steps(spec, ops), strict=True))
    return sum(ops[step].outputs for tensor, step in ends.items() if not (shared and tensor in kept))


def activations(spec: ModelSpec, rules: Rules, batch: int, bytes_per_value: int, technique: str = "none",
                activation_bytes: int | None = None, device: str = "cpu", workspace: int = 0, *,
                ops: list[Step] | None = None) -> Activations:
    """Saved tensors and the backward's peak; `activation_bytes` differs from the weights' under mixed precision.

    `workspace`: one BLAS workspace's bytes where the rules allocate them on this device (a measured constant), each
    thread's from its first matrix multiply on: the forward's, and in training the backward's from the last dense
    layer's gradient on (a first step's timing; later steps find both allocated). Which moment is the peak depends on
    it: a net whose only dense layer comes last (ResNet-50) takes it after its largest activations are freed.

    The net runs as a graph: each tensor lives from the step that makes it to its last reader, and what a step's
    backward keeps (`rules.saves`) lives until that step is back-propagated. The recomputing techniques
    (`techniques.segments`) keep only each run's inputs from outside it; a run's own saved tensors exist again while
    its backward runs, one run at a time. Tracked inference runs in evaluation mode. Each figure per step comes from
    one sweep over the steps, so the cost grows with depth, not its square; `ops`: `steps(spec, rules,
    bytes_per_value)` where the caller has them already.
    """
    ops = steps(spec, rules, bytes_per_value) if ops is None else ops
    value = batch * (activation_bytes or bytes_per_value)
    views, tensors, savers, extras = what_steps_keep(spec, rules, ops, technique, device, batch, value)
    kept, group = recomputed_runs(spec, rules, ops, tensors, technique)
    kept_always = sum(tensors.elements[tensor] for tensor in kept) * value
    savers = {tensor: steps_ for tensor, steps_ in savers.items() if tensor not in kept}
    through = kept | {tensor for tensor, steps_ in savers.items() if any(group[s] is None for s in steps_)}
    residual = loss_residual(spec, rules, ops, tensors, through) * value if technique != "tracked" else 0
    saved = residual + kept_always + value * sum(
        tensors.elements[tensor] for tensor, steps_ in savers.items() if any(group[s] is None for s in steps_))
    saved += sum(extra for index, extra in enumerate(extras) if group[index] is None)
    matmuls = [index for index, op in enumerate(ops) if op.kind == "dense"] if workspace else []
    worst = _backward_worst(spec, rules, ops, tensors, views, kept, savers, extras, group, saved, value, device,
                            workspace, matmuls, expanded_filters(spec, rules, ops, device,
                                                                 activation_bytes or bytes_per_value))
    transient = _forward_transient(spec, rules, ops, tensors, views, savers, extras, group, technique, value,
                                   workspace, matmuls)
    return Activations(saved, max(worst[0] - worst[3], saved), worst[1], worst[2], transient[0] - transient[1],
                       worst[3], transient[1])
