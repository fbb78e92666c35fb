"""The analytic estimate: what a scenario holds at the peak of each phase, from the spec alone.

Pure arithmetic over the spec's shapes, plus each framework's documented habits (RULES): which
tensors its backward pass keeps, when its optimizer state appears, what its update step allocates.
Figures that cannot be derived from a spec (the CUDA context, runtime overhead) are measured, and
`suites.constants` adds them, labelled; nothing here imports a framework.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from models import techniques
from models.scenario import DTYPES, PHASES
from models.spec import Conv2D, Flatten, ModelSpec, same_padding

CATEGORIES = ("weights", "gradients", "accumulated_gradients", "optimizer_state", "inputs", "saved_activations",
              "half_weights", "transient", "update_temporaries", "init_temporaries")
OPTIMIZER_STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2}
INT64, BOOL = 8, 1


@dataclass(frozen=True)
class Rules:
    """One framework's habits, each checked against its source or its saved tensors (see `why`)."""

    saves: dict[str, tuple[str, ...]]  # layer kind -> "input", "output", "indices" (int64), "mask" (bool)
    label_bytes: int  # one integer class label
    explicit_padding: bool  # asymmetric 'same' padding is a padded copy of the input
    optimizer_state_phase: str  # the phase in which the optimizer state is allocated
    state_before_step: bool  # in that phase it is made before the step's forward pass (Keras's build)
    keeps_gradients: bool  # gradients stay allocated after the step, until the next one clears them
    streams_gradients: bool  # each update runs as soon as its gradient exists, so few are live at once
    init_copies: int  # temporaries of the largest random tensor (a parameter or the batch) while it is drawn
    accumulator_copies: int  # gradient accumulation: 0 where gradients add up in place (torch's .grad)
    update_temporaries: dict[tuple[str, str], tuple[str, int]]  # (optimizer, device) -> (of "largest"|"all", copies)
    why: str


SAVES_INPUT = {"conv2d": ("input",), "dense": ("input",), "relu": ("output",), "maxpool2d": ("input",),
               "pad": (), "flatten": ()}
RULES = {
    "neutral": Rules(
        saves=SAVES_INPUT, label_bytes=INT64, explicit_padding=False, optimizer_state_phase="train_step_1",
        state_before_step=False, keeps_gradients=False, streams_gradients=False, init_copies=0, accumulator_copies=0,
        update_temporaries={},
        why="no framework named: each weighted layer keeps its input, ReLU its output, max-pool its input;"
            " every gradient is live at the update, which allocates nothing"),
    "torch": Rules(
        saves=SAVES_INPUT | {"maxpool2d": ("input", "indices")}, label_bytes=INT64, explicit_padding=True,
        optimizer_state_phase="train_step_1", state_before_step=False, keeps_gradients=True, streams_gradients=False,
        init_copies=0,
        accumulator_copies=0, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("all", 1)},
        why="saved tensors as listed by autograd's saved_tensors_hooks: conv and linear keep their input,"
            " ReLU its output, max_pool2d its input and int64 indices; ZeroPad2d's padded copy replaces"
            " the conv input; Adam's state arrives in the first step(); on the CPU Adam runs per tensor"
            " (sqrt and divide make two temporaries of the largest parameter), on CUDA it is foreach"
            " (_foreach_sqrt makes one temporary of every parameter); gradients stay until zero_grad"),
    "keras-tensorflow": Rules(
        saves=SAVES_INPUT | {"maxpool2d": ("input", "output")}, label_bytes=4, explicit_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False, streams_gradients=True,
        init_copies=2,
        accumulator_copies=1, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("largest", 2),
                            ("sgd", "cpu"): ("largest", 1), ("sgd", "cuda"): ("largest", 1),
                            ("momentum", "cpu"): ("largest", 1), ("momentum", "cuda"): ("largest", 1)},
        why="gradient functions: Conv2D and MatMul keep their input, Relu its output, MaxPool its input and"
            " output; Keras builds the optimizer's variables at the first train_on_batch, before the step runs"
            " (Trainer._symbolic_build); the traced step"
            " is a dataflow graph, so each variable's update runs once its gradient exists and gradients"
            " are not all live at once (one largest in flight); Keras's Adam update keeps two temporaries"
            " of a variable; drawing a random tensor (initializer or batch) makes two temporaries of it"),
    "jax": Rules(
        saves=SAVES_INPUT | {"relu": ("mask",)}, label_bytes=4, explicit_padding=False,
        optimizer_state_phase="compile", state_before_step=False, keeps_gradients=False, streams_gradients=False,
        init_copies=2,
        accumulator_copies=1, update_temporaries={},
        why="jax.vjp residuals: conv and dot keep their input, relu's jvp keeps the boolean x > 0,"
            " reduce_window max its operand; optax's state is created in compile (optimizer.init);"
            " the update is fused into the jitted step with parameters and state donated, so it adds no"
            " temporaries; jax.random makes bits then floats: two temporaries of the tensor drawn at build"),
    "keras-jax": Rules(
        saves=SAVES_INPUT | {"relu": ("mask",)}, label_bytes=4, explicit_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False,
        streams_gradients=False, init_copies=2, accumulator_copies=1, update_temporaries={},
        why="JAX's autodiff under Keras: the jax rules for what is saved; Keras builds the optimizer's"
            " variables at the first train_on_batch, before the step runs; its JAX trainer jits loss,"
            " gradients and the optimizer's stateless update into one step, so the update adds no temporaries;"
            " keras.random on JAX draws bits then floats: two temporaries of the tensor drawn"),
    "keras-torch": Rules(
        saves=SAVES_INPUT | {"maxpool2d": ("input", "indices")}, label_bytes=4, explicit_padding=True,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=True,
        streams_gradients=False, init_copies=2, accumulator_copies=1,
        update_temporaries={("adam", "cpu"): ("all", 3), ("adam", "cuda"): ("all", 3)},
        why="torch's autograd under Keras: the torch rules for what is saved, and Keras pads uneven 'same'"
            " convolutions explicitly; Keras builds the optimizer's variables at the first train_on_batch,"
            " before the step runs; gradients stay in .grad until the next step zeroes them; Keras's torch"
            " Adam runs torch._foreach ops over every variable: three temporaries of every parameter live at"
            " once (taken from keras200m's measured step on the CPU, 5,589 MiB against 4,743 with two);"
            " keras.random on torch draws then scales: two temporaries"),
}


@dataclass(frozen=True)
class Step:
    """One operation as a framework runs it: elements per example in and out, its weight bytes."""

    kind: str
    layer: int  # the spec layer it belongs to
    inputs: int
    outputs: int
    weight_bytes: int
    largest_weight: int


def steps(spec: ModelSpec, rules: Rules, bytes_per_value: int) -> list[Step]:
    """The spec's layers as the framework runs them (torch inserts a padding copy where 'same' is uneven)."""
    result = []
    for layer in spec.walk():
        if rules.explicit_padding and isinstance(layer.layer, Conv2D) and layer.layer.padding == "same":
            (top, bottom), (left, right) = (same_padding(size, layer.layer.kernel, layer.layer.stride)
                                            for size in layer.input_shape[:2])
            if (top, left) != (bottom, right):
                h, w, c = layer.input_shape
                result.append(Step("pad", layer.index, h * w * c, (h + top + bottom) * (w + left + right) * c, 0, 0))
        weights = [math.prod(shape) * bytes_per_value for shape in layer.params.values()]
        inputs = result[-1].outputs if result and result[-1].kind == "pad" else math.prod(layer.input_shape)
        result.append(Step(layer.layer.kind, layer.index, inputs, math.prod(layer.output_shape), sum(weights),
                           max(weights, default=0)))
    return result


@dataclass(frozen=True)
class Activations:
    """What the backward pass keeps and what is in flight, in bytes for the whole batch."""

    saved: int  # every tensor kept for the backward pass, at the end of the forward
    backward_peak: int  # the largest live set during the backward (saved so far + a gradient pair + weight grads)
    backward_saved: int  # of which saved tensors
    backward_gradients: int  # of which weight gradients already produced
    inference_transient: int  # a layer's input and output, both live, with no gradient tracking


def activations(spec: ModelSpec, rules: Rules, batch: int, bytes_per_value: int, technique: str = "none",
                activation_bytes: int | None = None) -> Activations:
    """Saved tensors and the backward's peak; `activation_bytes` differs from the weights' under mixed precision.

    With checkpointing only each segment's input is kept; the backward recomputes one segment at a time.
    """
    ops = steps(spec, rules, bytes_per_value)
    value = batch * (activation_bytes or bytes_per_value)
    views = {"flatten", "relu"} if technique == "inplace" else {"flatten"}  # no new tensor: a view or in place
    # tensor ids: tensor k is the input of op k; a view's output is its input
    ids, tensor_size, current = [], {0: ops[0].inputs * value}, 0
    for index, op in enumerate(ops):
        ids.append(current)
        if op.kind not in views:
            current = index + 1
            tensor_size[current] = op.outputs * value
    outputs = [*ids[1:], current]
    first_saver: dict[int, int] = {}
    extras = [0] * len(ops)
    for index, op in enumerate(ops):
        for what in rules.saves[op.kind]:
            if what in ("input", "output"):
                tensor = ids[index] if what == "input" else outputs[index]
                if tensor != 0:  # the batch itself is counted with the inputs
                    first_saver.setdefault(tensor, index)
            else:
                extras[index] += op.outputs * batch * (INT64 if what == "indices" else BOOL)
    loss_residual = ops[-1].outputs * value  # the difference (mse) or the softmax (cross-entropy)
    group = [0] * len(ops)  # the checkpoint segment of each op (one group without checkpointing)
    kept_always = 0
    if technique == "checkpoint":
        segment_of = {layer: number for number, segment in enumerate(techniques.segments(len(spec.layers)))
                      for layer in segment}
        group = [segment_of[op.layer] for op in ops]
        starts = {ids[index] for index in range(1, len(ops)) if group[index] != group[index - 1]}
        kept_always = sum(tensor_size[t] for t in starts)
        first_saver = {t: saver for t, saver in first_saver.items() if t not in starts}
    largest = max((o.largest_weight for o in ops), default=0)
    worst = (0, 0, 0)
    for index, op in reversed(list(enumerate(ops))):
        kept = kept_always + sum(tensor_size[t] for t, saver in first_saver.items()
                                 if saver <= index and group[saver] == group[index])
        kept += sum(extra for i, extra in enumerate(extras[:index + 1]) if group[i] == group[index])
        grads = sum(o.weight_bytes for o in ops[index + 1:])
        if rules.streams_gradients:
            grads = min(grads, largest)
        pair = 0 if op.kind in views else (op.outputs + (op.inputs if index else 0)) * value
        worst = max(worst, (kept + pair + grads, kept, grads))
    saved = loss_residual + kept_always + (0 if technique == "checkpoint" else
                                           sum(tensor_size[t] for t in first_saver) + sum(extras))
    transient = max((op.inputs + op.outputs) * value for op in ops if op.kind not in views)
    return Activations(saved, max(worst[0], saved), worst[1], worst[2], transient)


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
    activation_values_per_example: int  # every layer output plus the input, ReLU in place (CS231n's count)
    param_count: int

    @property
    def peak(self) -> PhaseEstimate:
        return max(self.phases, key=lambda p: p.total)

    def phase(self, name: str) -> PhaseEstimate | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["phases"] = {p.name: {"moment": p.moment, "items": p.items, "total": p.total} for p in self.phases}
        return data


def hand_count(spec: ModelSpec) -> int:
    """Activation values per example as hand counts do it: the input and each layer's output, ReLU in place."""
    return math.prod(spec.input_shape) + sum(math.prod(s.output_shape) for s in spec.walk()
                                             if s.layer.kind not in ("relu", "flatten"))


def floor(spec: ModelSpec, kind: str, batch: int, optimizer: str, bytes_per_value: int) -> int:
    """What no framework can avoid without recomputing: weights (+ gradients + optimizer state + each
    weighted layer's input, kept for its weight gradient) when training; a layer's input and output at once
    when not."""
    weights = spec.weight_bytes(bytes_per_value)
    inputs = math.prod(spec.input_shape) * batch * bytes_per_value
    walk = spec.walk()
    if kind != "train":
        return weights + max((math.prod(s.input_shape) + math.prod(s.output_shape)) * batch * bytes_per_value
                             for s in walk if not isinstance(s.layer, Flatten))
    kept = sum(math.prod(s.input_shape) * batch * bytes_per_value for s in walk[1:] if s.params)
    return weights * (2 + OPTIMIZER_STATE_COPIES[optimizer]) + inputs + kept


def _update_temporaries(rules: Rules, optimizer: str, device: str, weights: int, largest: int) -> int:
    scope, copies = rules.update_temporaries.get((optimizer, device), ("largest", 0))
    return copies * (weights if scope == "all" else largest)


def estimate(spec: ModelSpec, kind: str = "train", batch: int = 0, optimizer: str = "adam", dtype: str = "float32",
             framework: str | None = None, device: str = "cpu", technique: str = "none") -> Estimate:
    """The bytes each phase holds at its peak, by category; `framework=None` applies the neutral rules.

    Techniques: mixed precision halves the activations and keeps half-precision weight copies for the
    backward; accumulation runs the activations at the micro-batch and may keep an accumulator;
    checkpointing keeps segment inputs only; in-place ReLU makes no new tensor; tracked inference keeps
    what a backward pass would need.
    """
    rules_name = framework if framework in RULES else "neutral"
    rules, size, batch = RULES[rules_name], DTYPES[dtype], batch or spec.default_batch
    weights = spec.weight_bytes(size)
    largest = max((o.largest_weight for o in steps(spec, rules, size)), default=0)
    labels = batch * rules.label_bytes if spec.loss == "cross_entropy" else math.prod(spec.output_shape) * batch * size
    inputs = math.prod(spec.input_shape) * batch * size + labels
    state = weights * OPTIMIZER_STATE_COPIES[optimizer] if kind == "train" else 0
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    half = technique in techniques.HALF_PRECISION
    acts = activations(spec, rules, batch // micro, size, technique, techniques.HALF_PRECISION.get(technique, size))
    accumulator = weights * rules.accumulator_copies if micro > 1 else 0
    # inference runs the whole batch in fp32 whatever the training technique; only these two change it
    forward = activations(spec, rules, batch, size, technique if technique in ("inplace", "tracked") else "none")
    phase_names = PHASES[kind]

    def state_by(name: str) -> int:
        if not state:  # inference scenarios have no optimizer (and no train_step phases to compare with)
            return 0
        return state if phase_names.index(name) >= phase_names.index(rules.optimizer_state_phase) else 0

    def train_step(name: str) -> PhaseEstimate:
        update = {"weights": weights, "inputs": inputs, "optimizer_state": state,
                  "gradients": min(weights, largest) if rules.streams_gradients else weights,
                  "accumulated_gradients": accumulator,
                  "update_temporaries": _update_temporaries(rules, optimizer, device, weights, largest)}
        # the state exists during the backward pass only if it was made before this step's forward
        made, here = phase_names.index(rules.optimizer_state_phase), phase_names.index(name)
        before = state if here > made or (here == made and rules.state_before_step) else 0
        in_place_sum = micro > 1 and not rules.accumulator_copies  # torch: earlier micro-batches' .grad
        backward = {"weights": weights, "inputs": inputs, "optimizer_state": before,
                    "gradients": weights if in_place_sum else acts.backward_gradients,
                    "accumulated_gradients": accumulator, "saved_activations": acts.backward_saved,
                    "half_weights": weights // 2 if half else 0,
                    "transient": acts.backward_peak - acts.backward_saved - acts.backward_gradients}
        if sum(update.values()) >= sum(backward.values()):
            live = "the largest gradient in flight" if rules.streams_gradients else "every gradient"
            return PhaseEstimate(name, f"optimizer update: the state and {live} live", update)
        return PhaseEstimate(name, "backward pass: saved activations and a gradient pair live", backward)

    def resting(name: str, moment: str, extra: dict[str, int]) -> PhaseEstimate:
        kept = {"weights": weights, "inputs": inputs, "optimizer_state": state_by(name)}
        if rules.keeps_gradients and name == "inference" and kind == "train":
            kept["gradients"] = weights
        return PhaseEstimate(name, moment, kept | extra)

    phases = []
    for name in phase_names:
        if name in ("import", "context"):
            phases.append(PhaseEstimate(name, "no model yet: measured constants only"))
        elif name == "build":
            drawn = max(largest, math.prod(spec.input_shape) * batch * size, labels)
            phases.append(resting(name, "drawing the largest random tensor (a parameter or the batch)",
                                  {"init_temporaries": rules.init_copies * drawn}))
        elif name == "compile":
            phases.append(resting(name, "model built, nothing run", {}))
        elif name.startswith("train_step"):
            phases.append(train_step(name))
        elif name == "inference" and technique == "tracked":
            phases.append(resting(name, "forward pass with tracking: what a backward pass needs is kept",
                                  {"saved_activations": forward.saved, "transient": forward.inference_transient}))
        elif name == "inference":
            phases.append(resting(name, "forward pass, no gradient tracking",
                                  {"transient": forward.inference_transient}))
    return Estimate(spec.name, framework or "any", kind, batch, optimizer, dtype, device, technique, rules_name,
                    tuple(phases),
                    floor(spec, kind, batch, optimizer, size), hand_count(spec), spec.param_count)
