"""The order in which an eager framework (torch's autograd) allocates and frees a phase's tensors, from the spec.

A caching allocator's segments (`models.estimate.caching`) depend on that order, not only on the peak: a block freed
by one tensor is split for a smaller one and is then too small for the next large one, which maps a new segment. The
order follows the estimate's own bookkeeping (`models.estimate.tensors` and `.saved`: the steps, the tensors they
make, what each step's backward keeps) as autograd runs it:
- the forward makes each step's output and what its backward keeps beside the net's tensors (indices, per-channel
  vectors), and frees a tensor once its last reader has run, unless a backward keeps it or the call holds it;
- the loss makes its residual; the backward then runs the steps in reverse: each makes its inputs' gradients (an
  add or a concat passes its own on), adds a second gradient of a tensor into the first in place, makes its
  weights' gradients (kept until the next zero_grad), and frees its output's gradient and what it kept;
- the optimizer makes its state one weight at a time at the first step, then its update's temporaries.

A recomputed run (torch.utils.checkpoint, non-reentrant) keeps nothing in the forward but its inputs from outside
it; its backward first runs the run's forward again, keeping what each step's backward keeps, then goes back through
it as above. Under autocast a conv or a dense step makes a half copy of its weights (kept for its backward) and its
weights' gradients are made half, then cast to the float32 .grad.

An event is (key, bytes): a positive size allocates the key, 0 frees it. Library workspaces other than the BLAS
one (cuDNN's, chosen per convolution at run time) are not in the order: no probe measures them yet.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from models import techniques
from models.estimate.rules import OPTIMIZER_STATE_COPIES, Rules
from models.estimate.saved import loss_residual, recomputed_runs, what_steps_keep
from models.estimate.tensors import Step, Tensors
from models.spec import ModelSpec

Event = tuple[object, int]
INPUT = -1
PASSING = ("add", "concat")  # their backward hands its output's gradient (or views of it) to every input


def built(spec: ModelSpec, bytes_per_value: int, batch_tensors: tuple[int, ...], draw_copies: int) -> list[Event]:
    """The build: each layer's weights, then its statistics, in the spec's order, then the batch and its targets. A
    kernel is drawn uniformly through `draw_copies` temporaries of its size (Keras on torch: rand, then a scaled
    copy), freed once it is made; the rest starts as constants, and the batch is drawn straight into its tensor
    (torch.randn, torch.normal)."""
    tensors = [(math.prod(shape) * bytes_per_value, name == "kernel") for step in spec.walk()
               for name, shape in (*step.params.items(), *step.statistics.items())]
    events: list[Event] = []
    for index, (size, drawn) in enumerate([*tensors, *((size, False) for size in batch_tensors)]):
        temporaries = [(("drawing", index, copy), size) for copy in range(draw_copies if drawn else 0)]
        events += [*temporaries, (("built", index), size), *((key, 0) for key, _ in temporaries)]
    return events


def weight_sizes(spec: ModelSpec, bytes_per_value: int) -> list[list[int]]:
    """Per step of `steps`' layers, the trainable weights' sizes (the gradients and the optimizer's slots)."""
    return [[math.prod(shape) * bytes_per_value for shape in step.params.values()] for step in spec.walk()]


@dataclass
class Pass:
    """One forward (and backward) pass over the steps: what it needs of the estimate's bookkeeping."""

    ops: list[Step]
    tensors: Tensors
    views: set[int]
    savers: dict[int, list[int]]  # tensor -> the steps whose backward keeps it
    extras: list[int]  # per step, the bytes it keeps beside the net's tensors
    value: int  # one activation value's bytes for the batch
    loss_residual: int
    holds_outputs: bool  # the call keeps every output until it returns (Keras run eagerly)
    workspace: int  # one BLAS workspace, taken by a thread's first matrix multiply and kept (0: none)
    workspaces: set[str]  # the threads that hold theirs already (shared by the passes of a process)
    tag: object  # what makes this pass's keys its own
    runs: list[int | None]  # per step, the recomputed run it is in (None: outside every run)
    kept: set[int]  # the tensors the recomputed runs keep: their inputs from outside
    casts: list[list[int]]  # per step, the sizes of autocast's half copies of its weights (none without autocast)
    events: list[Event] = field(default_factory=list)
    live: dict[object, None] = field(default_factory=dict)  # this pass's allocations, in order

    def make(self, key: object, size: int) -> None:
        if size:
            self.events.append(((self.tag, key), size))
            self.live[key] = None

    def free(self, key: object) -> None:
        if key in self.live:
            del self.live[key]
            self.events.append(((self.tag, key), 0))

    def end(self) -> None:
        """The pass's graph goes: whatever it still holds is freed."""
        for key in list(self.live):
            self.free(key)

    def _multiply(self, thread: str) -> None:
        if self.workspace and thread not in self.workspaces:
            self.workspaces.add(thread)
            self.events.append((("workspace", thread), self.workspace))

    def forward(self, keeping: bool) -> None:
        """The steps in order; `keeping`: a graph is recorded, so what a backward keeps stays until `backward` (or
        `end`), else a tensor is freed once read."""
        tensors, held = self.tensors, []
        for index, op in enumerate(self.ops):
            if op.kind == "dense":
                self._multiply("forward")
            for number, size in enumerate(self.casts[index]):
                self.make(("cast", index, number), size)
            if index not in self.views:
                self.make(index, self.bytes_of(index))
            if keeping and self.runs[index] is None:
                self.make(("extra", index), self.extras[index])
            for tensor in dict.fromkeys(tensors.reads[index]):
                if tensor == INPUT or tensors.last_reader[tensor] != index or keeping and self.keeps(tensor):
                    continue
                if self.holds_outputs:
                    held.append(tensor)
                else:
                    self.free(tensor)
        for tensor in held:
            self.free(tensor)

    def keeps(self, tensor: int) -> bool:
        """Whether the forward keeps `tensor` for the backward: a recomputed run's input, or what a step outside every
        run keeps."""
        return tensor in self.kept or any(self.runs[step] is None for step in self.savers.get(tensor, ()))

    def _recompute(self, run: int) -> None:
        """The run's forward again, inside the backward: each step's output and what its backward keeps; a tensor
        nothing in the run keeps goes at its last reader in the run (the run's outputs at its end)."""
        steps = [index for index, number in enumerate(self.runs) if number == run]
        made, saved = [], {tensor for tensor, keepers in self.savers.items() if set(keepers) & set(steps)}
        last = {tensor: index for index in steps for tensor in self.tensors.reads[index]}
        for index in steps:
            tensor = self.tensors.makes[index]
            if index not in self.views and tensor not in self.live:
                self.make(tensor, self.bytes_of(tensor))
                made.append(tensor)
            self.make(("extra", index), self.extras[index])
            for source in dict.fromkeys(self.tensors.reads[index]):
                if source in made and last[source] == index and source not in saved:
                    self.free(source)
        for tensor in made:
            if tensor not in saved:
                self.free(tensor)

    def bytes_of(self, tensor: int) -> int:
        return self.tensors.elements[tensor] * self.value

    def loss(self) -> None:
        """The loss keeps its residual (the softmax or the difference); the net's outputs go unless kept."""
        self.make("loss", self.loss_residual)
        for tensor in dict.fromkeys(self.tensors.outputs):
            if not self.keeps(tensor):
                self.free(tensor)

    def backward(self, weight_grads: list[list[Event]]) -> None:
        """The steps in reverse, from the loss's gradient; `weight_grads`: per step, the events of its weights'
        gradients."""
        tensors, buffers = self.tensors, _Buffers(self)
        slot = {tensor: buffers.new(self.bytes_of(tensor)) for tensor in dict.fromkeys(tensors.outputs)}
        self.free("loss")
        last_saver: dict[int, list[int]] = {}
        for tensor in {*self.savers, *self.kept}:  # a run's input goes once every step reading it is back-propagated
            readers = [tensors.first_reader[tensor]] if tensor in self.kept else []
            last_saver.setdefault(min([*self.savers.get(tensor, ()), *readers]), []).append(tensor)
        recomputed = None
        for index in reversed(range(len(self.ops))):
            made, op = tensors.makes[index], self.ops[index]
            if self.runs[index] not in (None, recomputed):
                recomputed = self.runs[index]
                self._recompute(recomputed)
            if op.kind == "dense":
                self._multiply("backward")
            if index in self.views:
                if op.kind in ("relu", "relu6") and made in slot:  # in place: a new gradient replaces its own
                    old, slot[made] = slot[made], buffers.new(self.bytes_of(made))
                    buffers.drop(old)
            elif made in slot:
                gradient = slot.pop(made)
                for source in dict.fromkeys(tensors.reads[index]):
                    if source != INPUT:
                        self._arrive(slot, source, gradient if op.kind in PASSING else None, buffers)
                self.events.extend(weight_grads[index])
                buffers.drop(gradient)
            for number in range(len(self.casts[index])):
                self.free(("cast", index, number))
            self.free(("extra", index))
            for tensor in last_saver.get(index, ()):
                self.free(tensor)
        for gradient in slot.values():
            buffers.drop(gradient)
        self.end()

    def _arrive(self, slot: dict[int, int], source: int, passed: int | None, buffers: _Buffers) -> None:
        """A gradient of `source` arrives (`passed`: the output's own, handed on): the first is kept, a later one
        is added into it in place where nothing else holds it, else their sum is a new tensor."""
        if passed is None:
            incoming = buffers.new(self.bytes_of(source))
        else:
            incoming = passed
            buffers.share(passed)
        if source not in slot:
            slot[source] = incoming
        elif buffers.alone(slot[source]) and slot[source] != incoming:
            buffers.drop(incoming)
        else:
            total = buffers.new(self.bytes_of(source))
            buffers.drop(slot[source])
            buffers.drop(incoming)
            slot[source] = total


class _Buffers:
    """Gradient tensors by reference count: an add hands one tensor to both of its inputs."""

    def __init__(self, owner: Pass) -> None:
        self.owner, self.count, self.references = owner, 0, {}

    def new(self, size: int) -> int:
        self.count += 1
        self.references[self.count] = 1
        self.owner.make(("gradient", self.count), size)
        return self.count

    def share(self, buffer: int) -> None:
        self.references[buffer] += 1

    def alone(self, buffer: int) -> bool:
        return self.references[buffer] == 1

    def drop(self, buffer: int) -> None:
        self.references[buffer] -= 1
        if not self.references[buffer]:
            self.owner.free(("gradient", buffer))


CAST_STEPS = ("conv2d", "dense")  # the steps autocast runs in half precision, on a half copy of their weights


def _gradient_events(ops: list[Step], layer_weights: list[list[int]], casts: list[list[int]], tag: object,
                     kept: bool) -> list[list]:
    """Per step, its weights' gradients: kept in .grad, or (a later micro-batch's) added into it and freed; under
    autocast a cast step's are made half, then cast to .grad's float32."""
    per_op = []
    for op, cast in zip(ops, casts, strict=True):
        sizes = layer_weights[op.layer] if op.weight_bytes else []
        keys = [("grad", op.layer, number) if kept else (tag, "grad", op.layer, number)
                for number in range(len(sizes))]
        halves = [((tag, "half grad", op.layer, number), copy) for number, copy in enumerate(cast)]
        per_op.append(halves + list(zip(keys, sizes, strict=True)) + [(key, 0) for key, _ in halves]
                      + ([] if kept else [(key, 0) for key in keys]))
    return per_op


def _update_events(rules: Rules, optimizer: str, device: str, step: int, weights: list[int]) -> list[Event]:
    """The optimizer update's temporaries: all made then all freed, or one weight's at a time."""
    scope, copies = rules.update_temporaries.get((optimizer, device), ("largest", 0))
    temporaries = [(("update", step, index, copy), weight) for index, weight in enumerate(weights)
                   for copy in range(copies)]
    if scope == "all":
        return temporaries + [(key, 0) for key, _ in temporaries]
    return [event for pair in temporaries for event in (pair, (pair[0], 0))]


def eager_order(spec: ModelSpec, rules: Rules, ops: list[Step], kind: str, batch: int, size: int, technique: str,
                device: str, optimizer: str, workspace: int, batch_tensors: tuple[int, int],
                draw_copies: int) -> dict[str, list]:
    """Per phase, the order in which an eager framework allocates and frees (see above)."""
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    layer_weights = weight_sizes(spec, size)
    half = techniques.HALF_PRECISION.get(technique, 0)
    made: set[str] = set()
    casts = [[weight * half // size for weight in layer_weights[op.layer]] if half and op.kind in CAST_STEPS else []
             for op in ops]

    def one_pass(technique: str, examples: int, tag: object, autocast: bool = False) -> Pass:
        value = examples * (half if autocast and half else size)
        views, tensors, savers, extras = what_steps_keep(spec, rules, ops, technique, device, examples, value)
        kept, runs = recomputed_runs(spec, rules, ops, tensors, technique)
        residual = loss_residual(spec, rules, ops, tensors, set(savers) | kept) * value
        return Pass(ops, tensors, views, savers, extras, value, residual, rules.holds_outputs, workspace, made, tag,
                    runs, kept, [cast if autocast else [] for cast in casts])

    order: dict[str, list] = {"build": built(spec, size, batch_tensors, draw_copies), "compile": []}
    weights = [weight for sizes in layer_weights for weight in sizes]
    for step in (1, 2) if kind == "train" else ():
        # zero_grad(set_to_none=True) frees the last step's gradients
        events = [(("grad", layer, number), 0) for layer, sizes in enumerate(layer_weights)
                  for number in range(len(sizes))] if step == 2 else []
        # the optimizer's slots, one weight at a time, before the step (Keras's build) or in its update (torch's)
        state = [(("state", index, copy), weight) for index, weight in enumerate(weights)
                 for copy in range(OPTIMIZER_STATE_COPIES[optimizer])] if step == 1 else []
        events += state if rules.state_before_step else []
        for number in range(micro):
            run = one_pass(technique if technique in ("inplace", *techniques.RECOMPUTING) else "none", batch // micro,
                           (step, number), autocast=True)
            run.forward(keeping=True)
            run.loss()
            run.backward(_gradient_events(ops, layer_weights, casts, (step, number), number == 0))
            events += run.events
        events += [] if rules.state_before_step else state
        events += _update_events(rules, optimizer, device, step, weights)
        if technique == "empty_cache":
            events.append(("empty_cache", 0))
        order[f"train_step_{step}"] = events
    inference = one_pass("tracked" if technique == "tracked" else "none", batch, "inference")
    inference.forward(keeping=technique == "tracked")
    inference.end()
    order["inference"] = inference.events
    return order
