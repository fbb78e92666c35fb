"""The peaks per phase: what a scenario holds at the peak of each phase, by category (`estimate`), with the
physical floor (`floor`), the hand count (`hand_count`) and what the simulated allocators hold beyond the tensors
(`models.estimate.bfc`, `models.estimate.caching`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace

from models import techniques
from models.estimate.bfc import GrowingPool
from models.estimate.caching import CachingAllocator
from models.estimate.eager import eager_order
from models.estimate.rules import OPTIMIZER_STATE_COPIES, RULES, Rules
from models.estimate.saved import Activations, activations
from models.estimate.tensors import Step, steps
from models.layer_kinds import census, full_conv_kernel_values
from models.scenario import DTYPES, PHASES
from models.spec import ELEMENTWISE, INPUT, ModelSpec

CATEGORIES = ("weights", "gradients", "accumulated_gradients", "optimizer_state", "inputs", "saved_activations",
              "half_weights", "transient", "update_temporaries", "init_temporaries", "library_workspace",
              "unsplit_chunks", "retained_pages")
HOST_ONLY = ("retained_pages",)  # what the process keeps and its framework's allocator no longer counts


@dataclass(frozen=True)
class PhaseEstimate:
    name: str
    moment: str  # what is happening at the phase's peak
    items: dict[str, int] = field(default_factory=dict)  # category -> bytes (analytic)

    @property
    def total(self) -> int:
        return sum(self.items.values())


@dataclass(frozen=True)
class Estimate:
    """Per phase, the bytes live at its peak by category, plus the physical floor and the hand count."""

    model: str
    framework: str
    kind: str
    batch: int
    optimizer: str
    dtype: str
    device: str
    technique: str
    rules: str
    phases: tuple[PhaseEstimate, ...]
    floor: int
    activation_values_per_example: int  # the input and every layer output, activations in place (CS231n's)
    param_count: int
    layers: int  # the spec's layers: a runtime that grows with depth is measured per layer (suites.analysis.constants)
    distinct_layers: int  # those that differ in kind, options or input shapes (`ModelSpec.distinct_layers`)
    kinds: dict[str, list[int]]  # per probed kind, [distinct, repeating] layers (models.layer_kinds.census)
    full_conv_kernel_bytes: int  # kernels of convs neither depthwise nor 1x1 (models.layer_kinds)

    @property
    def peak(self) -> PhaseEstimate:
        return max(self.phases, key=lambda p: p.total)

    def phase(self, name: str) -> PhaseEstimate | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["phases"] = {p.name: {"moment": p.moment, "items": p.items, "total": p.total} for p in self.phases}
        return data


def target_values(spec: ModelSpec) -> int:
    """A training example's targets: a class label per output for cross-entropy, else a value per output value."""
    return len(spec.output_layers) if spec.loss == "cross_entropy" else sum(map(math.prod, spec.output_shapes))


def hand_count(spec: ModelSpec) -> int:
    """Activation values per example as hand counts do it: the input and each layer's output, activations (the
    element-wise layers) in place, flatten, reshape and dropout (the identity in inference) making no new values."""
    return math.prod(spec.input_shape) + sum(math.prod(s.output_shape) for s in spec.walk() if s.layer.kind not in
                                             (*ELEMENTWISE, "flatten", "reshape", "dropout"))


# The steps that must write a new tensor beside the one they read (no library runs them in place) and that no
# technique leaves out (recomputation reruns them); activations, batch and layer norm, add, multiply, concat and
# padding may run in place, fuse into a neighbour or write straight into their reader's buffer.
NEW_TENSOR_STEPS = ("conv2d", "dense", "maxpool2d", "avgpool2d", "adaptive_avgpool2d", "global_avg_pool",
                    "upsample2d", "conv_transpose2d")


def floor(spec: ModelSpec, kind: str, batch: int, optimizer: str, bytes_per_value: int,
          technique: str = "none") -> int:
    """What no framework can avoid however it schedules, fuses, recomputes or updates, so that every measured need
    is at least this and a need beyond it is what the framework chose to keep.

    The weights and batch norm's statistics (the fp32 master copy under mixed precision); the batch's inputs (and
    targets when training: a class label or an output's values per example); and the largest input plus output of
    one step in NEW_TENSOR_STEPS, both live while it runs forward (and their gradients' sizes while it runs
    backward), in the activations' dtype. Training adds the optimizer state (OPTIMIZER_STATE_COPIES of the trainable
    weights) and, when accumulating, one micro-batch instead of the batch and the gradient sum kept between
    micro-batches. Left out, as avoidable or up to the schedule: gradients beyond those (XLA fuses each update into
    the backward pass, so it never holds every gradient at once), saved activations (recomputation keeps as few as
    it likes), what a skip connection holds across its block (which tensor depends on the order the branches run;
    the add may run in place) and an activation's output (it may run in place)."""
    training = kind == "train"
    weights, statistics = spec.weight_bytes(bytes_per_value), spec.statistics_bytes(bytes_per_value)
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    examples, activation = batch // micro, techniques.HALF_PRECISION.get(technique, bytes_per_value)
    targets = target_values(spec) if training else 0
    inputs = (math.prod(spec.input_shape) + targets) * examples * bytes_per_value
    # a step is a layer (no padded copy: the op pads); one that reads the model's input reads the batch in `inputs`
    step = max(((0 if layer.inputs == (INPUT,) else sum(map(math.prod, layer.input_shapes)))
                + math.prod(layer.output_shape) for layer in spec.walk() if layer.layer.kind in NEW_TENSOR_STEPS),
               default=0)
    state = weights * OPTIMIZER_STATE_COPIES[optimizer] if training else 0
    accumulated = weights if micro > 1 else 0
    return weights + statistics + state + accumulated + inputs + step * examples * activation


def _pages_kept(phases: list[PhaseEstimate]) -> list[PhaseEstimate]:
    """Where what a phase freed stays with the process (the pages malloc keeps, a caching allocator's blocks), a phase
    holds at least the highest phase before it: the difference is its retained pages, which the driver counts and the
    framework's allocator no longer does."""
    kept, highest = [], 0
    for phase in phases:
        retained = max(highest - phase.total, 0)
        kept.append(replace(phase, items=phase.items | {"retained_pages": retained}) if retained else phase)
        highest = max(highest, phase.total)
    return kept


def _grown_pool(phases: list[PhaseEstimate], spec: ModelSpec, rules: Rules, bytes_per_value: int,
                batch_tensors: tuple[int, int]) -> list[PhaseEstimate]:
    """Where a BFC allocator grows its pool (`models.estimate.bfc`), what it counts beyond each phase's tensors (unsplit
    chunks) and what its regions hold unused at the phase's peak (retained pages: the driver sees the regions).

    The allocations are made in the adapters' order: at build each layer's weights then statistics, then the batch
    and its targets; the optimizer's slots in the phase that makes them (`Rules.state_made`); then the phase's
    other bytes as one allocation, freed at its end: XLA runs a program with one buffer for all its temporaries
    (its outputs, the donated weights and state, reuse their inputs' buffers)."""
    pool, held, slots_made, grown = GrowingPool(), 0, False, []
    weights = [math.prod(shape) * bytes_per_value for step in spec.walk() for shape in step.params.values()]
    for phase in phases:
        pool.peak_in_use = pool.in_use
        made = []
        if phase.name == "build":
            made = [math.prod(shape) * bytes_per_value for step in spec.walk()
                    for shape in (*step.params.values(), *step.statistics.values())] + list(batch_tensors)
        state = phase.items.get("optimizer_state", 0) + phase.items.get("accumulated_gradients", 0)
        if state and weights and not slots_made:
            slots, slots_made = state // sum(weights), True
            made += (sorted(weights * slots, reverse=True) if rules.state_made == "at_once"
                     else [weight for weight in weights for _ in range(slots)])
        for size in made:
            pool.allocate(size)
        held += sum(made)
        tensors = phase.total - sum(phase.items.get(category, 0) for category in HOST_ONLY)
        if tensors > held:
            pool.release(pool.allocate(tensors - held))
        extra = {"unsplit_chunks": max(pool.peak_in_use - tensors, 0),
                 "retained_pages": phase.items.get("retained_pages", 0) + pool.pool - pool.peak_in_use}
        grown.append(replace(phase, items=phase.items | {key: value for key, value in extra.items() if value}))
    return grown


def _cached_segments(phases: list[PhaseEstimate], order: dict[str, list]) -> list[PhaseEstimate]:
    """What torch's caching allocator maps beyond its peak of allocated bytes in each phase, replayed over the
    eager order (`models.estimate.caching`): the retained pages, which the driver sees and the allocator does not
    count."""
    allocator, handles, kept = CachingAllocator(), {}, []
    for phase in phases:
        allocator.reset_peaks()
        for key, size in order.get(phase.name, ()):
            if key == "empty_cache":
                allocator.empty_cache()
            elif size:
                handles[key] = allocator.allocate(size)
            else:
                allocator.release(handles.pop(key))
        retained = allocator.peak_reserved - allocator.peak_allocated
        items = {name: amount for name, amount in phase.items.items() if name != "retained_pages"}
        kept.append(replace(phase, items=items | ({"retained_pages": retained} if retained else {})))
    return kept


def _workspaces(held: int) -> dict[str, int]:
    """The BLAS workspaces a moment holds, as an item where there are any (none on a device without them)."""
    return {"library_workspace": held} if held else {}


def _update_temporaries(rules: Rules, optimizer: str, device: str, weights: int, largest: int) -> int:
    scope, copies = rules.update_temporaries.get((optimizer, device), ("largest", 0))
    return copies * (weights if scope == "all" else largest)


@dataclass(frozen=True)
class _Scenario:
    """What every phase of one estimate reads, computed once so that each phase's helper takes it whole."""

    spec: ModelSpec
    kind: str
    batch: int
    optimizer: str
    device: str
    technique: str
    rules: Rules
    size: int
    ops: list[Step]
    workspace: int
    trainable: int
    weights: int
    largest: int
    labels: int
    inputs: int
    state: int
    micro: int
    init_copies: int
    stepped: int
    accumulator: int
    acts: Activations
    forward: Activations

    @property
    def phase_names(self) -> tuple[str, ...]:
        return PHASES[self.kind]


def _scenario(spec: ModelSpec, kind: str, batch: int, optimizer: str, rules: Rules, size: int, device: str,
              technique: str, blas_workspace: int) -> _Scenario:
    """The sizes and activations every phase of the estimate is built from."""
    trainable = spec.weight_bytes(size)  # what gradients and optimizer state are sized by
    weights = trainable + spec.statistics_bytes(size)  # batch norm's running statistics are weights too
    ops = steps(spec, rules, size)
    largest = max((o.largest_weight for o in ops), default=0)
    labels = target_values(spec) * batch * (rules.label_bytes if spec.loss == "cross_entropy" else size)
    inputs = math.prod(spec.input_shape) * batch * size + labels
    state = trainable * OPTIMIZER_STATE_COPIES[optimizer] if kind == "train" else 0
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    init_copies = rules.init_copies if device != "cuda" or rules.cuda_init_copies is None else rules.cuda_init_copies
    undone = technique in (*techniques.RECOMPUTING, *rules.policy_keeps) and device not in rules.recomputes_on
    workspace = blas_workspace if device in rules.blas_workspaces_on else 0
    acts = activations(spec, rules, batch // micro, size, "none" if undone else technique,
                       techniques.HALF_PRECISION.get(technique, size), device, workspace, ops=ops)
    # once a step ran, its forward's and its backward's threads each hold a workspace where the net multiplies
    stepped = 2 * workspace if any(layer.kind == "dense" for layer in spec.layers) else 0
    accumulator = trainable * rules.accumulator_copies if micro > 1 else 0
    # inference runs the whole batch in fp32 whatever the training technique; only these change it: in place, tracked,
    # and (where the call holds every layer's output) the recomputed runs, each held as one layer's output
    forward = activations(spec, rules, batch, size, technique if technique in (
        "inplace", "tracked", *(techniques.RECOMPUTING if rules.holds_outputs else ())) else "none", device=device,
        workspace=0 if kind == "train" else workspace, ops=ops)
    return _Scenario(spec, kind, batch, optimizer, device, technique, rules, size, ops, workspace, trainable, weights,
                     largest, labels, inputs, state, micro, init_copies, stepped, accumulator, acts, forward)


def _state_by(s: _Scenario, name: str) -> int:
    """The optimizer state held in a phase: none before the phase the rules make it in."""
    if not s.state:  # inference scenarios have no optimizer (and no train_step phases to compare with)
        return 0
    return s.state if s.phase_names.index(name) >= s.phase_names.index(s.rules.optimizer_state_phase) else 0


def _train_step(s: _Scenario, name: str) -> PhaseEstimate:
    """A training step's peak: the optimizer update or the backward pass, whichever holds more."""
    rules, streams = s.rules, s.device in s.rules.streams_on
    update = {"weights": s.weights, "inputs": s.inputs, "optimizer_state": s.state,
              "gradients": min(s.trainable, s.largest * rules.in_flight) if streams else s.trainable,
              "accumulated_gradients": s.accumulator,
              "update_temporaries": _update_temporaries(rules, s.optimizer, s.device, s.trainable, s.largest),
              **_workspaces(s.stepped)}
    # the state exists during the backward pass only if it was made before this step's forward
    made, here = s.phase_names.index(rules.optimizer_state_phase), s.phase_names.index(name)
    before = s.state if here > made or (here == made and rules.state_before_step) else 0
    in_place_sum = s.micro > 1 and not rules.accumulator_copies  # torch: earlier micro-batches' .grad
    acts = s.acts
    backward = {"weights": s.weights, "inputs": s.inputs, "optimizer_state": before,
                "gradients": s.trainable if in_place_sum else acts.backward_gradients,
                "accumulated_gradients": s.accumulator, "saved_activations": acts.backward_saved,
                "half_weights": s.trainable // 2 if s.technique in techniques.HALF_PRECISION else 0,
                "transient": acts.backward_peak - acts.backward_saved - acts.backward_gradients,
                **_workspaces(acts.backward_workspaces if name == "train_step_1" else s.stepped)}
    if sum(update.values()) >= sum(backward.values()):
        live = "the gradients in flight" if streams else "every gradient"
        return PhaseEstimate(name, f"optimizer update: the state and {live} live", update)
    return PhaseEstimate(name, "backward pass: saved activations and a gradient pair live", backward)


def _resting(s: _Scenario, name: str, moment: str, extra: dict[str, int]) -> PhaseEstimate:
    """A phase outside the training steps: the weights, the batch and the state, plus what the phase adds."""
    kept = {"weights": s.weights, "inputs": s.inputs, "optimizer_state": _state_by(s, name)}
    if s.accumulator and _state_by(s, name):  # the accumulator is made with the state (optax.MultiSteps.init)
        kept["accumulated_gradients"] = s.accumulator
    if name == "inference" and s.kind == "train":
        kept |= ({"gradients": s.trainable} if s.rules.keeps_gradients else {}) | _workspaces(s.stepped)
    elif name == "inference":
        kept |= _workspaces(s.forward.inference_workspaces)
    return PhaseEstimate(name, moment, kept | extra)


def _phase(s: _Scenario, name: str) -> PhaseEstimate | None:
    """One phase's peak, by the kind of phase it is (None for a phase the estimate does not model)."""
    if name in ("import", "context"):
        return PhaseEstimate(name, "no model yet: measured constants only")
    if name == "build":
        if s.rules.batch_drawn_directly:  # the batch comes after the weights: their draws' temporaries are gone
            temporaries = max(s.init_copies * s.largest - s.inputs, 0)
        else:
            temporaries = s.init_copies * max(s.largest, math.prod(s.spec.input_shape) * s.batch * s.size, s.labels)
        return _resting(s, name, "drawing the largest random tensor (a parameter or the batch)",
                        {"init_temporaries": temporaries})
    if name == "compile":
        return _resting(s, name, "model built, nothing run", {})
    if name.startswith("train_step"):
        return _train_step(s, name)
    if name == "inference" and s.technique == "tracked":
        return _resting(s, name, "forward pass with tracking: what a backward pass needs is kept",
                        {"saved_activations": s.forward.saved, "transient": s.forward.inference_transient})
    if name == "inference":
        return _resting(s, name, "forward pass, no gradient tracking", {"transient": s.forward.inference_transient})
    return None


def _allocated(s: _Scenario, phases: list[PhaseEstimate], pool_grows: bool) -> list[PhaseEstimate]:
    """The phases as the framework's allocator holds them: cached segments, kept pages or a grown pool."""
    rules, batch_tensors = s.rules, (math.prod(s.spec.input_shape) * s.batch * s.size, s.labels)
    if s.device in rules.caching_on and s.technique in rules.ordered_techniques:
        phases = _cached_segments(phases, eager_order(s.spec, rules, s.ops, s.kind, s.batch, s.size, s.technique,
                                                      s.device, s.optimizer, s.workspace, batch_tensors,
                                                      s.init_copies))
    elif s.device in rules.keeps_pages_on and s.technique != "empty_cache":
        phases = _pages_kept(phases)
    if pool_grows and s.device in rules.bfc_on:
        phases = _grown_pool(phases, s.spec, rules, s.size, batch_tensors)
    return phases


def estimate(spec: ModelSpec, kind: str = "train", batch: int = 0, optimizer: str = "adam", dtype: str = "float32",
             framework: str | None = None, device: str = "cpu", technique: str = "none",
             blas_workspace: int = 0, pool_grows: bool = False) -> Estimate:
    """The bytes each phase holds at its peak, by category; `framework=None` applies the neutral rules.

    Techniques: mixed precision halves the activations and keeps half-precision weight copies for the
    backward; accumulation runs the activations at the micro-batch and may keep an accumulator;
    checkpointing, bnrelu and efficient keep only the inputs of the runs they recompute; in-place ReLU makes no new
    tensor; tracked inference keeps what a backward pass would need. Weights include batch norm's running
    statistics; gradients and optimizer state are sized by the trainable weights alone. `blas_workspace`: one BLAS
    workspace's bytes on this card, measured (`suites.analysis.constants`), placed where the rules allocate them.
    `pool_grows`: the framework's pool is off and its allocator maps regions as it needs them (JAX's noprealloc,
    TensorFlow's growth), which its BFC allocator counts with the chunks it did not split (`_grown_pool`).
    """
    rules_name = framework if framework in RULES else "neutral"
    size, batch = DTYPES[dtype], batch or spec.default_batch
    s = _scenario(spec, kind, batch, optimizer, RULES[rules_name], size, device, technique, blas_workspace)
    phases = [phase for phase in (_phase(s, name) for name in PHASES[kind]) if phase is not None]
    return Estimate(spec.name, framework or "any", kind, batch, optimizer, dtype, device, technique, rules_name,
                    tuple(_allocated(s, phases, pool_grows)), floor(spec, kind, batch, optimizer, size, technique),
                    hand_count(spec), spec.param_count, len(spec.layers), spec.distinct_layers, census(spec),
                    full_conv_kernel_values(spec) * size)
