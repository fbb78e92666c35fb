"""Figures across records: what a technique saves against its baseline, and how memory grows with batch and depth.

Every figure comes from the records' `comparison` (measured bytes, the analytic estimate, the measured
constant), in one view per framework: the allocator's where the framework has one on the device, else the
driver's rise above the context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.record import phase
from suites.constants import PROBE

NOT_ACTIVATIONS = ("weights", "gradients", "accumulated_gradients", "optimizer_state", "inputs",
                   "update_temporaries", "init_temporaries")


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
    """The highest of a scenario's train steps (or its inference, for an infer scenario)."""
    names = ("train_step_1", "train_step_2") if record["scenario"]["kind"] == "train" else ("inference",)
    comparison = record.get("comparison", {})
    views = [view for view in ("allocator", "driver") if all(view in comparison.get(n, {}) for n in names)]
    if record["status"] != "ok" or not views:
        return None
    view = views[0]
    name = max(names, key=lambda n: comparison[n][view]["measured"])
    figures = comparison[name][view]
    items = record["estimate"]["phases"][name]["items"]
    fixed = sum(items.get(category, 0) for category in NOT_ACTIVATIONS)
    constant = figures.get("constant") or 0
    timed = phase(record, names[-1])
    return Peak(name, view, figures["measured"], figures["tensors"] + constant,
                figures["measured"] - constant - fixed, figures["tensors"] - fixed, timed["seconds"] if timed else 0.0)


@dataclass(frozen=True)
class Saving:
    framework: str
    technique: str  # a technique, or an optimizer measured against Adam
    kind: str
    unavailable: str | None
    measured: int | None = None  # bytes saved at the peak (negative: it cost memory)
    measured_share: float | None = None
    predicted: int | None = None
    time_ratio: float | None = None


def _label(record: dict) -> str:
    scenario = record["scenario"]
    if scenario["technique"] != "none":
        return scenario["technique"]
    return scenario["optimizer"] if scenario["kind"] == "train" and scenario["optimizer"] != "adam" else "none"


def savings(run: dict) -> list[Saving]:
    """Each technique against the same framework's baseline (technique none, Adam, same model and batch)."""
    records = [r for r in run["records"] if r["scenario"]["model"] != PROBE]
    baselines = {(r["scenario"]["framework"], r["scenario"]["kind"]): r for r in records if _label(r) == "none"}
    result = []
    for record in records:
        scenario, label = record["scenario"], _label(record)
        if label == "none":
            continue
        if record["status"] == "unavailable":
            result.append(Saving(scenario["framework"], label, scenario["kind"], record["failure"]["message"]))
            continue
        base = baselines.get((scenario["framework"], scenario["kind"]))
        ours, theirs = peak(record), peak(base) if base else None
        if ours is None or theirs is None or ours.view != theirs.view:
            result.append(Saving(scenario["framework"], label, scenario["kind"],
                                 f"no comparable measurement ({record['status']})"))
            continue
        result.append(Saving(scenario["framework"], label, scenario["kind"], None, theirs.measured - ours.measured,
                             (theirs.measured - ours.measured) / theirs.measured, theirs.estimate - ours.estimate,
                             ours.seconds / theirs.seconds if theirs.seconds else None))
    return result


@dataclass(frozen=True)
class Fit:
    """y = a * x^exponent fitted in log-log space, and the linear slope (bytes per unit of x)."""

    framework: str
    technique: str
    what: str
    points: tuple[tuple[int, int], ...]
    exponent: float
    slope: float


def _fit(points: list[tuple[int, int]]) -> tuple[float, float]:
    """(log-log exponent, linear slope) by least squares; points with y <= 0 are left out of the log fit."""
    logs = [(math.log(x), math.log(y)) for x, y in points if y > 0]
    mean_x, mean_y = (sum(v) / len(logs) for v in zip(*logs, strict=True))
    exponent = (sum((x - mean_x) * (y - mean_y) for x, y in logs)
                / sum((x - mean_x) ** 2 for x, _ in logs))
    lx, ly = (sum(v) / len(points) for v in zip(*points, strict=True))
    slope = sum((x - lx) * (y - ly) for x, y in points) / sum((x - lx) ** 2 for x, _ in points)
    return exponent, slope


def sweep_fits(run: dict, axis: str) -> list[Fit]:
    """Memory against the batch (keras-small: the whole training peak) or the depth (plain-N: its activations)."""
    groups: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for record in run["records"]:
        scenario = record["scenario"]
        found = peak(record)
        if found is None:
            continue
        if axis == "batch" and scenario["model"] == "keras-small":
            x, y = scenario["batch"], found.measured
        elif axis == "depth" and scenario["model"].startswith("plain-"):
            x, y = int(scenario["model"].removeprefix("plain-")), found.activations_measured
        else:
            continue
        groups.setdefault((scenario["framework"], scenario["technique"], scenario["optimizer"]), []).append((x, y))
    what = "training peak" if axis == "batch" else "activation memory"
    return [Fit(framework, technique, what, tuple(sorted(points)), *_fit(points))
            for (framework, technique, _), points in sorted(groups.items()) if len({x for x, _ in points}) >= 2]
