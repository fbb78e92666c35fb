"""Figures across records: what a technique saves against its baseline, how memory grows with batch and depth,
what Keras adds on each backend, and what each execution mode costs against the framework's default.

Every figure comes from the records' `comparison` (measured bytes, the analytic estimate, the measured
constant), in one view per framework: the allocator's where the framework has one on the device, else the
driver's rise above the context.
"""

from __future__ import annotations

from dataclasses import dataclass

from models import backends, executions, techniques
from models.record import phase
from models.scenario import Scenario
from suites.analysis.constants import PROBES
from suites.analysis.figures import allocated_now, driver_peak, need

NOT_ACTIVATIONS = ("weights", "gradients", "accumulated_gradients", "optimizer_state", "inputs",
                   "update_temporaries", "init_temporaries", "library_workspace", "unsplit_chunks",
                   "retained_pages")


@dataclass(frozen=True)
class Peak:
    """A scenario's highest phase in one view: what was measured, and what the estimate said of it."""

    phase: str
    view: str
    measured: int
    estimate: int  # the analytic tensors plus the measured constant
    activations_measured: int  # measured minus the constant and everything that is not an activation
    activations_estimate: int
    seconds: float  # the steady step's wall time (train_step_2), or the inference's


def peak(record: dict) -> Peak | None:
    """The highest of a scenario's train steps (or its inference, for an infer scenario), in the first view the
    steps have: a step without the view's figure (JAX's counter that did not rise again in the second step, so only
    its plan says what it held) is left out, and the other step's peak is the highest measured."""
    names = ("train_step_1", "train_step_2") if record["scenario"]["kind"] == "train" else ("inference",)
    comparison = record.get("comparison", {})
    views = [view for view in ("allocator", "driver") if any(view in comparison.get(n, {}) for n in names)]
    if record["status"] != "ok" or not views:
        return None
    view = views[0]
    name = max((n for n in names if view in comparison.get(n, {})), key=lambda n: comparison[n][view]["measured"])
    figures = comparison[name][view]
    items = record["estimate"]["phases"][name]["items"]
    fixed = sum(items.get(category, 0) for category in NOT_ACTIVATIONS)
    constant = figures.get("constant") or 0
    timed = phase(record, names[-1])
    if view == "allocator":  # what the step added to what the allocator already held when it began
        before = record["phases"][[p["name"] for p in record["phases"]].index(name) - 1]
        activations = figures["measured"] - (allocated_now(before) or 0)
    else:
        activations = figures["measured"] - constant - fixed
    return Peak(name, view, figures["measured"], figures["tensors"] + constant, activations,
                figures["tensors"] - fixed, timed["seconds"] if timed else 0.0)


@dataclass(frozen=True)
class Saving:
    framework: str
    model: str
    technique: str  # a technique, or an optimizer measured against Adam
    kind: str
    unavailable: str | None
    measured: int | None = None  # bytes saved at the peak (negative: it cost memory)
    measured_share: float | None = None
    predicted: int | None = None
    time_ratio: float | None = None
    caveat: str | None = None  # what else the technique changes (accumulating with batch norm: its statistics)


def _label(record: dict) -> str:
    scenario = Scenario.from_dict(record["scenario"])  # older records lack later fields: take their defaults
    if scenario.technique != "none":
        return scenario.technique
    return scenario.optimizer if scenario.kind == "train" and scenario.optimizer != "adam" else "none"


def savings(run: dict) -> list[Saving]:
    """Each technique against the same framework's baseline (technique none, Adam, same model and batch)."""
    records = [r for r in run["records"] if r["scenario"]["model"] not in PROBES and _default_mode(r)]

    def key(record: dict) -> tuple:
        scenario = record["scenario"]
        return scenario["framework"], scenario["kind"], scenario["model"], scenario["batch"]

    baselines = {key(r): r for r in records if _label(r) == "none"}
    result = []
    for record in records:
        scenario, label = Scenario.from_dict(record["scenario"]).to_dict(), _label(record)
        if label == "none":
            continue
        if record["status"] == "unavailable":
            result.append(Saving(scenario["framework"], scenario["model"], label, scenario["kind"],
                                 record["failure"]["message"]))
            continue
        base = baselines.get(key(record))
        ours, theirs = peak(record), peak(base) if base else None
        if ours is None or theirs is None or ours.view != theirs.view:
            result.append(Saving(scenario["framework"], scenario["model"], label, scenario["kind"],
                                 f"no comparable measurement ({record['status']})"))
            continue
        result.append(Saving(scenario["framework"], scenario["model"], label, scenario["kind"], None,
                             theirs.measured - ours.measured,
                             (theirs.measured - ours.measured) / theirs.measured, theirs.estimate - ours.estimate,
                             ours.seconds / theirs.seconds if theirs.seconds else None, _caveat(record)))
    return result


def _caveat(record: dict) -> str | None:
    """What a technique changes in a batch-normalized net besides memory: accumulating normalizes micro-batches;
    torch's checkpoint updates the running statistics again when it recomputes."""
    scenario = Scenario.from_dict(record["scenario"])
    if not any(layer.kind == "batchnorm" for layer in scenario.spec.layers):
        return None
    if scenario.technique == "accumulate":
        return techniques.ACCUMULATE_WITH_BATCH_NORM
    if scenario.technique in techniques.RECOMPUTING and backends.backend(scenario.framework) == "torch":
        return techniques.RECOMPUTE_WITH_BATCH_NORM_ON_TORCH
    return None


@dataclass(frozen=True)
class Fit:
    """y = offset + scale * x^exponent by least squares, and the linear slope (bytes per unit of x).

    The offset takes up what does not grow with x (in a host figure, runtime the probe's constant only
    approximates), so the exponent describes the part that grows.
    """

    framework: str
    model: str  # the model swept across batches; the plain family across depths
    technique: str
    view: str
    points: tuple[tuple[int, int], ...]
    exponent: float
    slope: float
    offset: float
    intercept: float  # of the straight line: y = intercept + slope * x
    residual: int  # the largest distance of a point from the straight line, in bytes
    steps: tuple[tuple[int, int, int], ...]  # (x before, x after, bytes beyond the slope) where the line breaks

    @property
    def linear(self) -> bool:
        """Whether the straight line fits (then there are no steps to name)."""
        return not self.steps


def _linear(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """(intercept, slope, squared error) of y on x."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
    intercept = mean_y - slope * mean_x
    return intercept, slope, sum((y - intercept - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))


EXPONENTS = [k / 100 for k in range(0, 201)]  # 0 to 2 in steps of 0.01
LINE_TOLERANCE, LINE_FLOOR_BYTES = 0.05, 4 * 2**20  # a point this close to the line is on it


def _fit(points: list[tuple[int, int]]) -> tuple[float, float, float, float, int, tuple[tuple[int, int, int], ...]]:
    """(exponent, linear slope, offset, intercept, residual, steps): the exponent whose linear fit of y on x^k
    leaves the least error; the straight line, its largest residual, and the steps that break it (an increase
    between neighbouring points beyond what the line's slope gives them, by more than the tolerance)."""
    xs, ys = [float(x) for x, _ in points], [float(y) for _, y in points]
    best = min(EXPONENTS, key=lambda k: _linear([x**k for x in xs], ys)[2])
    offset, _, _ = _linear([x**best for x in xs], ys)
    intercept, slope, _ = _linear(xs, ys)
    residual = max(abs(y - intercept - slope * x) for x, y in points)
    if all(abs(y - intercept - slope * x) <= max(LINE_TOLERANCE * y, LINE_FLOOR_BYTES) for x, y in points):
        return best, slope, offset, intercept, round(residual), ()
    rises = [((x1, x2, round(y2 - y1 - slope * (x2 - x1))), y2)
             for (x1, y1), (x2, y2) in zip(points, points[1:], strict=False)]
    steps = tuple(rise for rise, top in rises if rise[2] > max(LINE_TOLERANCE * top, LINE_FLOOR_BYTES))
    # off the line with no single rise past the tolerance: the largest rise beyond the slope is named instead
    return best, slope, offset, intercept, round(residual), steps or (max((r for r, _ in rises), key=lambda r: r[2]),)


def sweep_fits(run: dict, axis: str) -> list[Fit]:
    """Memory against the batch (each model measured at several batches: the whole training peak) or the depth
    (plain-N: its activations)."""
    groups: dict[tuple[str, str, str, str, str], list[tuple[int, int]]] = {}
    for record in run["records"]:
        scenario = Scenario.from_dict(record["scenario"]).to_dict()
        found = peak(record)
        if found is None or scenario["model"] in PROBES:
            continue
        family = scenario["model"].startswith("plain-") and not scenario["model_file"]  # a file is no catalogue net
        if axis == "batch" and not family:
            model, x, y = scenario["model"], scenario["batch"], found.measured
        elif axis == "depth" and family:
            model, x, y = "plain-N", int(scenario["model"].removeprefix("plain-")), found.activations_measured
        else:
            continue
        groups.setdefault((model, scenario["framework"], scenario["technique"], scenario["optimizer"], found.view),
                          []).append((x, y))
    return [Fit(framework, model, technique, view, tuple(sorted(points)), *_fit(sorted(points)))
            for (model, framework, technique, _, view), points in sorted(groups.items())
            if len({x for x, _ in points}) >= 2]


@dataclass(frozen=True)
class Overhead:
    """What Keras adds on a backend: per phase, the Keras record's holds and needs minus its raw backend's."""

    model: str
    kind: str
    keras: str
    raw: str
    phases: dict[str, tuple[int | None, int | None]]  # phase -> (holds difference, needs difference)


def keras_overhead(run: dict) -> list[Overhead]:
    """Each Keras record beside its raw backend's with the same model, kind, batch and settings."""

    def key(record: dict) -> tuple:
        scenario = Scenario.from_dict(record["scenario"])  # older records lack later fields: take their defaults
        return (scenario.model, scenario.kind, scenario.batch, scenario.optimizer, scenario.technique,
                scenario.allocator, scenario.execution, backends.backend(scenario.framework))

    raws = {key(r): r for r in run["records"] if not backends.is_keras(r["scenario"]["framework"])}
    found = []
    for record in run["records"]:
        base = raws.get(key(record)) if backends.raw(record["scenario"]["framework"]) else None
        if base is None or record["status"] != "ok" or base["status"] != "ok":
            continue
        differences = {}
        for name in (p["name"] for p in record["phases"]):
            if phase(base, name) is None:
                continue
            pairs = [(figure(record, name), figure(base, name)) for figure in (_holds, _needs)]
            differences[name] = tuple(None if None in pair else pair[0] - pair[1] for pair in pairs)
        found.append(Overhead(record["scenario"]["model"], record["scenario"]["kind"],
                              record["scenario"]["framework"], base["scenario"]["framework"], differences))
    return found


def _holds(record: dict, name: str) -> int | None:
    return driver_peak(phase(record, name), record["scenario"]["device"])[0]


def _needs(record: dict, name: str) -> int | None:
    return need(record, name)[0]


@dataclass(frozen=True)
class Mode:
    """One framework's run of a model in one execution mode: per phase from compile on, what the process tree held
    at the peak (the driver's view) and the phase's seconds; beside it, the same framework's default mode."""

    model: str
    kind: str
    framework: str
    execution: str  # the framework's own name for the mode
    default: bool
    status: str  # ok, or why there is no figure (not applicable here: the reason)
    peaks: dict[str, int | None]
    seconds: dict[str, float]
    steady_versus_default: int | None  # the steady phase's peak minus the default mode's (negative: it saved)


COMPILED_PHASES = ("compile", "train_step_1", "train_step_2", "inference")


def _default_mode(record: dict) -> bool:
    """Whether the record ran its framework's default execution mode (older records have no other)."""
    return record["scenario"].get("execution", executions.DEFAULT) == executions.DEFAULT


def execution_modes(run: dict) -> list[Mode]:
    """Every record with each phase's driver peak and seconds, grouped by model, kind and framework, the default
    mode first; nothing where the run has no mode but the default."""
    records = [r for r in run["records"] if r["scenario"]["model"] not in PROBES]
    if all(_default_mode(r) for r in records):
        return []

    def steady(record: dict) -> int | None:
        name = "train_step_2" if record["scenario"]["kind"] == "train" else "inference"
        found = phase(record, name)
        return _holds(record, name) if found else None

    defaults = {(r["scenario"]["model"], r["scenario"]["kind"], r["scenario"]["framework"]): r for r in records
                if _default_mode(r)}
    result = []
    for record in records:
        scenario = Scenario.from_dict(record["scenario"])
        base = defaults.get((scenario.model, scenario.kind, scenario.framework))
        ours, theirs = steady(record), steady(base) if base else None
        status = (f"not applicable: {record['failure']['message']}" if record["status"] == "unavailable"
                  else record["status"])
        names = [name for name in COMPILED_PHASES if phase(record, name)]
        result.append(Mode(scenario.model, scenario.kind, scenario.framework, scenario.execution_mode,
                           _default_mode(record), status,
                           {name: _holds(record, name) for name in names},
                           {name: phase(record, name)["seconds"] for name in names},
                           None if ours is None or theirs is None else ours - theirs))
    return sorted(result, key=lambda m: (m.model, m.kind, m.framework, not m.default, m.execution))
