"""Plots from run files only (never live objects), one function per kind of plot."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from models import backends  # noqa: E402
from models.record import STATIC_PLAN  # noqa: E402
from models.scenario import PHASES, Scenario  # noqa: E402
from suites.analysis import (
    across_records,
    errors,  # noqa: E402
)
from suites.analysis.constants import PROBES  # noqa: E402
from suites.analysis.figures import allocated_now, context_alone, driver_peak, need  # noqa: E402

MIB = 2**20


def variant(record: dict) -> str:
    return Scenario.from_dict(record["scenario"]).variant


def panels(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Records grouped by (model, kind), in run order."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        grouped.setdefault((record["scenario"]["model"], record["scenario"]["kind"]), []).append(record)
    return grouped


def _grid(rows: int, columns: int) -> tuple[plt.Figure, list]:
    """A rows x columns grid of panels; with nothing to draw (a run of probes only, say), one note and no panel."""
    if not rows or not columns:
        figure, axis = plt.subplots(figsize=(7, 2.4))
        axis.text(0.5, 0.5, "nothing to draw yet: no finished scenario beyond the probes", ha="center", va="center")
        axis.set_axis_off()
        return figure, []
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 3.6 * rows), squeeze=False)
    return figure, axes


def _flow(count: int, columns: int = 2) -> tuple[plt.Figure, list]:
    """`count` panels in rows of `columns`, the last row's panels widened to fill it: a grid without holes."""
    if not count:
        return _grid(0, 0)
    columns = min(columns, count)
    rows = -(-count // columns)
    last = count - (rows - 1) * columns
    width = math.lcm(columns, last)
    figure = plt.figure(figsize=(7 * columns, 3.6 * rows))
    grid = figure.add_gridspec(rows, width)
    axes = []
    for index in range(count):
        row, column = divmod(index, columns)
        span = width // (columns if row < rows - 1 else last)
        axes.append(figure.add_subplot(grid[row, column * span:(column + 1) * span]))
    return figure, axes


def _finish(figure: plt.Figure, run: dict, what: str, names: list[str], path: Path,
            colors: list[str] | None = None) -> Path:
    """Title, one legend (names with their colors, C0.. unless given) and the file."""
    figure.suptitle(f"footprint, suite {run['suite']}: {what}\n{run['device_description']}", fontsize=11)
    colors = colors or [f"C{index}" for index in range(len(names))]
    handles = [plt.Rectangle((0, 0), 1, 1, color=color) for color in colors]
    height = figure.get_size_inches()[1]
    if names:  # a run with nothing to draw (its probes only) has no legend either
        figure.legend(handles, names, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.75 / height),
                      ncol=min(len(names), 6), fontsize=8)
    figure.tight_layout(rect=(0, 0, 1, 1 - 1.3 / height))
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


# One color per breakdown category, the same in every figure.
CATEGORY_COLORS = {"context": "#7f7f7f", "kernel_modules": "#c7c7c7", "weights": "#1f77b4", "gradients": "#aec7e8",
                   "optimizer_state": "#ff7f0e", "inputs": "#ffbb78", "activations": "#2ca02c",
                   "workspace": "#98df8a", "allocator_cache": "#d62728", "pool_unused": "#f7b6d2",
                   "runtime": "#c7c7c7"}
MODEL_CATEGORIES = ("weights", "gradients", "optimizer_state", "inputs", "activations", "workspace")
GPU_ONLY, CPU_ONLY = ("kernel_modules", "pool_unused"), ("runtime",)
# Bottom to top: what is there before the model, the model, then what the allocator keeps unused.
STACK_ORDER = ("context", "kernel_modules", "runtime", *MODEL_CATEGORIES, "allocator_cache", "pool_unused")


def peak_phase(record: dict) -> str | None:
    """The phase a record is summed up by: the highest need, else the highest driver peak, among its breakdowns."""
    parts = record.get("breakdown", {})
    if not parts:
        return None
    return max(parts, key=lambda name: (need(record, name)[0] or 0, sum(p["bytes"] for p in parts[name].values())))


def _stack(axis: plt.Axes, x: float, parts: dict[str, int], categories: tuple[str, ...], limit: float,
           width: float) -> None:
    """One stacked bar in MiB; what passes `limit` is cut there, and the cut segments' true sizes written on it."""
    bottom, cut = 0.0, []
    for category in categories:
        value = parts.get(category, 0) / MIB
        if value <= 0:
            continue
        shown = min(value, max(limit - bottom, 0))
        if shown > 0:
            axis.bar(x, shown, width, bottom=bottom, color=CATEGORY_COLORS[category], edgecolor="white",
                     linewidth=0.3)
        if shown < value:
            cut.append(f"{category.replace('_', ' ')} {value / 1024:,.1f} GiB")
        bottom += shown
    if cut:
        axis.text(x, limit * 0.98, "cut:\n" + "\n".join(cut), ha="center", va="top", fontsize=6)


@dataclass(frozen=True)
class Column:
    """One framework (or variant) in a breakdown panel: its peak phase and the parts of its two bars."""

    label: str
    phase: str | None  # None: the scenario has no breakdown (it failed early)
    status: str
    holds: dict[str, int]  # every part of the driver's peak, by category
    needs: dict[str, int]  # the model's own parts; empty where the framework has no allocator figure
    need_basis: str
    versus: str = ""  # a Keras column: what it holds at its peak beyond its raw backend's column


@dataclass(frozen=True)
class Panel:
    model: str
    kind: str
    batch: int
    columns: tuple[Column, ...]
    limit: int  # bytes where the axis ends: above every bar but what a pool adds

    @property
    def title(self) -> str:
        failed = [f"{c.label}: {c.status}" for c in self.columns if c.status != "ok"]
        return f"{self.model}, {self.kind} (batch {self.batch})" + (f" ({'; '.join(failed)})" if failed else "")


def breakdown_panels(run: dict) -> list[Panel]:
    """What `breakdown_bars` draws, per model and kind (the probe left out: it only feeds the estimate)."""
    result = []
    for (model, kind), records in panels(run["records"]).items():
        if model in PROBES:
            continue
        columns = []
        for record in records:
            name = peak_phase(record)
            parts = {c: p["bytes"] for c, p in record["breakdown"][name].items()} if name else {}
            basis = need(record, name)[1] if name else ""
            needs = ({c: parts[c] for c in MODEL_CATEGORIES if c in parts}
                     if name and need(record, name)[0] is not None else {})
            columns.append(Column(variant(record), name, record["status"], parts, needs, basis))
        columns = [_versus_raw(column, columns) for column in columns]
        without_pool = [sum(v for c, v in column.holds.items() if c != "pool_unused") for column in columns]
        result.append(Panel(model, kind, records[0]["scenario"]["batch"], tuple(columns),
                            int(1.25 * max([*without_pool, MIB]))))
    return result


def _versus_raw(column: Column, columns: list[Column]) -> Column:
    """A Keras column with its holds at the peak beside its raw backend's column in the same panel."""
    counterpart = next((c for c in columns if c.label == backends.raw(column.label) and c.holds), None)
    if counterpart is None or not column.holds:
        return column
    difference = sum(column.holds.values()) - sum(counterpart.holds.values())
    sign = "+" if difference >= 0 else "-"
    return replace(column, versus=f"{sign}{abs(difference) / MIB:,.0f} MiB vs {counterpart.label}")


def breakdown_bars(run: dict, path: Path) -> Path:
    """Per model and kind, per framework: what the process holds at its peak phase (a stacked breakdown: context,
    kernel modules, the model's tensors, cache, pool) beside what the model needs (its tensors only).

    The axis ends a little above the largest bar without a pool, so a 60 GB pool is cut, not allowed to
    flatten the rest: its true size is written on it.
    """
    found = breakdown_panels(run)
    kinds = list(dict.fromkeys(panel.kind for panel in found))
    figure, axes = _flow(len(found), max(len(kinds), 1))
    for axis, panel in zip(axes, found, strict=True):
        limit = panel.limit / MIB
        for index, column in enumerate(panel.columns):
            if column.phase is None:
                axis.text(index, 0, column.status, ha="center", va="bottom", fontsize=7)
                continue
            _stack(axis, index - 0.2, column.holds, STACK_ORDER, limit, 0.38)
            _stack(axis, index + 0.2, column.needs, MODEL_CATEGORIES, limit, 0.38)
            axis.text(index, -0.02, column.phase, transform=axis.get_xaxis_transform(), ha="center", va="top",
                      fontsize=7)
            if column.versus:
                axis.text(index - 0.2, min(sum(column.holds.values()) / MIB, limit), column.versus, ha="center",
                          va="bottom", fontsize=6)
        axis.set_xticks(range(len(panel.columns)), [f"\n{c.label}\nholds | needs"
                                                    + (" (plan)" if c.need_basis == STATIC_PLAN else "")
                                                    for c in panel.columns], fontsize=8)
        axis.set_ylim(0, limit)
        axis.set_ylabel("MiB at the peak phase")
        axis.grid(axis="y", alpha=0.3)
        axis.set_title(panel.title, fontsize=10)
    driver = "host RSS" if run["device"] == "cpu" else "NVML"
    what = f"where the peak goes: holds ({driver}, left bar) vs needs (the model's tensors, right bar)"
    names = [name for name in STACK_ORDER if name not in (GPU_ONLY if run["device"] == "cpu" else CPU_ONLY)]
    return _finish(figure, run, what, [n.replace("_", " ") for n in names], path, [CATEGORY_COLORS[n] for n in names])


@dataclass(frozen=True)
class ModeBar:
    mode: str
    holds: int  # the driver's highest phase
    needs: int | None  # the model's highest need; None where the allocator has no figure in this mode
    status: str


def mode_bars(run: dict) -> dict[tuple[str, str], list[ModeBar]]:
    """What `allocator_modes` draws: per (model, framework) of the training runs, one bar pair per mode."""
    found: dict[tuple[str, str], list[ModeBar]] = {}
    for record in run["records"]:
        scenario = record["scenario"]
        if scenario["kind"] != "train" or scenario["model"] in PROBES:
            continue
        held = [driver_peak(p, run["device"])[0] for p in record["phases"]]
        needed = [need(record, p["name"])[0] for p in record["phases"]]
        status = record["status"] + (f" in {record['failure']['phase']}" if record["failure"] else "")
        found.setdefault((scenario["model"], scenario["framework"]), []).append(
            ModeBar(scenario["allocator"], max((h for h in held if h is not None), default=0),
                    max((n for n in needed if n is not None), default=None), status))
    return found


def allocator_modes(run: dict, path: Path) -> Path:
    """Per model and framework, one pair of bars per allocator mode, named by the mode: what the process held
    at its highest phase and what the model needed; then each framework's context alone, lazy and eager."""
    bars = mode_bars(run)
    frameworks = list(dict.fromkeys(framework for _, framework in bars))
    context = [r for r in run["records"] if r["scenario"]["kind"] == "infer" and r["scenario"]["model"] not in PROBES]
    figure, axes = _flow(len(bars) + len(frameworks), max(len(frameworks), 1))
    for axis, ((model, framework), modes) in zip(axes, bars.items(), strict=False):
        for index, bar in enumerate(modes):
            for offset, value, color in ((-0.2, bar.holds, "C0"), (0.2, bar.needs or 0, "C1")):
                if value > 0:
                    axis.bar(index + offset, value / MIB, 0.38, color=color)
                    axis.text(index + offset, value / MIB, f"{value / MIB:,.0f}", ha="center", va="bottom",
                              fontsize=6)
            if bar.status != "ok":
                axis.text(index, 0.5, bar.status.replace(" in ", " in\n"), ha="center", va="center", fontsize=7,
                          color="C3", transform=axis.get_xaxis_transform())
        axis.set_xticks(range(len(modes)), [bar.mode for bar in modes], fontsize=8)
        axis.set_yscale("log")
        axis.set_ylabel("MiB at the highest phase (log)")
        axis.grid(axis="y", alpha=0.3)
        axis.set_title(f"{model}, {framework}", fontsize=9)
    for axis, framework in zip(axes[len(bars):], frameworks, strict=True):
        records = [r for r in context if r["scenario"]["framework"] == framework]
        values = [(context_alone(r, run["device"]) or 0) / MIB for r in records]
        axis.bar([r["scenario"]["cuda_module_loading"] for r in records], values, color="C7")
        for index, value in enumerate(values):
            axis.text(index, value, f"{value:,.0f}", ha="center", va="bottom", fontsize=7)
        axis.set_title(f"{framework}: the context phase alone by CUDA module loading (a preallocated pool left out)",
                       fontsize=9)
        axis.set_ylabel("MiB")
    driver = "host RSS" if run["device"] == "cpu" else "NVML"
    return _finish(figure, run, "each allocator mode: what the process holds vs what the model needs",
                   [f"holds ({driver} peak)", "needs (the allocator's in-phase peak or XLA's plan)", "context alone"],
                   path, ["C0", "C1", "C7"])


def estimate_vs_measured(run: dict, path: Path) -> Path:
    """One panel per view: each phase's estimate against its measurement, log-log, with y = x and +-25 %."""
    found = [row for row in errors.rows(run) if row.source == "footprint" and row.measured > 0]
    views = [view for view in errors.VIEW_NAMES if any(row.view == view for row in found)]
    frameworks = list(dict.fromkeys(row.framework for row in found))
    models = list(dict.fromkeys(row.model for row in found))
    figure, axes = _grid(1, len(views))
    for axis, view in zip(axes[0], views, strict=True):
        chosen = [row for row in found if row.view == view]
        for row in chosen:
            axis.scatter(row.measured / MIB, max(row.estimate, 1) / MIB, color=f"C{frameworks.index(row.framework)}",
                         marker="os^vDP"[models.index(row.model) % 6], s=28, alpha=0.8)
        low = min(min(r.measured, max(r.estimate, 1)) for r in chosen) / MIB / 1.5
        high = max(max(r.measured, r.estimate) for r in chosen) / MIB * 1.5
        for factor, style in ((1.0, "-"), (1.25, ":"), (0.75, ":")):
            axis.plot([low, high], [low * factor, high * factor], style, color="grey", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(f"measured: {errors.VIEW_NAMES[view]} (MiB)")
        axis.set_ylabel("estimate (MiB)")
        axis.set_title(f"{view}: markers " + ", ".join(f"{'os^vDP'[i % 6]} {m}" for i, m in enumerate(models)),
                       fontsize=9)
        axis.grid(alpha=0.3)
    return _finish(figure, run, "estimate vs measurement per phase (lines: equal, +-25 %)", frameworks, path)


def technique_savings(run: dict, path: Path) -> Path:
    """Per technique, each framework's measured saving at the training peak (bars) and the predicted (marks)."""
    found = [s for s in across_records.savings(run) if s.unavailable is None]
    frameworks = list(dict.fromkeys(s.framework for s in across_records.savings(run)))
    models = list(dict.fromkeys(s.model for s in across_records.savings(run)))

    def label(saving: across_records.Saving) -> str:
        return saving.technique if len(models) == 1 else f"{saving.technique} ({saving.model})"

    ordered = sorted(across_records.savings(run), key=lambda s: models.index(s.model))
    labels = list(dict.fromkeys(label(s) for s in ordered))
    figure, axes = _grid(1, 2)
    width = 0.8 / max(len(frameworks), 1)
    for index, framework in enumerate(frameworks):
        mine = {label(s): s for s in found if s.framework == framework}
        xs = [i + (index - (len(frameworks) - 1) / 2) * width for i in range(len(labels))]
        axes[0][0].bar(xs, [mine[t].measured / MIB if t in mine else 0 for t in labels], width, color=f"C{index}")
        axes[0][0].scatter([x for x, t in zip(xs, labels, strict=True) if t in mine],
                           [mine[t].predicted / MIB for t in labels if t in mine], color="black", marker="_", s=90)
        axes[0][1].bar(xs, [mine[t].time_ratio or 0 if t in mine else 0 for t in labels], width, color=f"C{index}")
    for axis, label in zip(axes[0], ("memory saved at the peak (MiB); black: predicted", "step time / baseline"),
                           strict=True):
        axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        axis.set_ylabel(label)
        axis.axhline(0 if "memory" in label else 1, color="grey", linewidth=0.8)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_title("missing bar: not available in that framework (see the report)", fontsize=8)
    return _finish(figure, run, "what each technique saves against Adam with no technique", frameworks, path)


def execution_modes(run: dict, path: Path) -> Path:
    """Per model and kind, one bar per framework and mode: what the steady phase held (solid) and what compiling
    held beyond it (hatched), with the seconds compiling took; a mode that cannot run here says why."""
    found = across_records.execution_modes(run)
    groups = list(dict.fromkeys((m.model, m.kind) for m in found))
    frameworks = list(dict.fromkeys(m.framework for m in found))
    figure, axes = _grid(len(groups), 1)
    for axis, (model, kind) in zip((row[0] for row in axes), groups, strict=True):
        modes = [m for m in found if (m.model, m.kind) == (model, kind)]
        steady_name = "train_step_2" if kind == "train" else "inference"
        first = ("compile", "train_step_1") if kind == "train" else ("compile",)
        for row, mode in enumerate(modes):
            color = f"C{frameworks.index(mode.framework)}"
            steady = mode.peaks.get(steady_name)
            if mode.status != "ok" or steady is None:
                axis.text(0, row, f"  {mode.status}", va="center", fontsize=7)
                continue
            compiling = max((mode.peaks.get(name) or 0) for name in first)
            axis.barh(row, steady / MIB, color=color)
            axis.barh(row, max(compiling - steady, 0) / MIB, left=steady / MIB, color=color, alpha=0.35, hatch="//")
            seconds = sum(mode.seconds.get(name, 0.0) for name in first)
            axis.text(max(steady, compiling) / MIB, row, f" {' + '.join(first)}: {seconds:.1f} s", va="center",
                      fontsize=7)
        axis.set_yticks(range(len(modes)), [f"{m.framework} {m.execution}" for m in modes], fontsize=8)
        axis.invert_yaxis()
        axis.set_xlabel("MiB held by the process tree (solid: steady phase; hatched: more while compiling)")
        axis.set_title(f"{model}, {kind}", fontsize=9)
        axis.grid(axis="x", alpha=0.3)
    return _finish(figure, run, "what each execution mode holds, steady and while compiling", frameworks, path)


MARKERS = (("o", "circles"), ("s", "squares"), ("^", "triangles"), ("D", "diamonds"))


def sweeps(run: dict, path: Path) -> Path:
    """Memory against batch (keras-small) and depth (plain-N, with and without checkpointing), with fitted slopes."""
    frameworks = list(dict.fromkeys(r["scenario"]["framework"] for r in run["records"]))
    swept = {name: fits for name in ("batch", "depth") if (fits := across_records.sweep_fits(run, name))}
    figure, axes = _flow(len(swept))  # only the sweeps the run has: no empty panel
    for axis, (axis_name, fits) in zip(axes, swept.items(), strict=True):
        models = list(dict.fromkeys(fit.model for fit in fits))
        for fit in fits:
            xs, ys = zip(*fit.points, strict=True)
            color = f"C{frameworks.index(fit.framework)}"
            marker = MARKERS[models.index(fit.model) % len(MARKERS)][0]
            unit = "example" if axis_name == "batch" else "layer"
            described = (f"line, {fit.slope / MIB:.2f} MiB per {unit}" if fit.linear
                         else f"no line (exponent {fit.exponent:.2f})")
            axis.plot(xs, [max(y, 1) / MIB for y in ys], marker, color=color,
                      label=f"{fit.model} {fit.framework} {fit.technique} ({fit.view}): {described}")
            if fit.linear:  # the line only where it fits; elsewhere the points, joined, and their steps named
                axis.plot(xs, [max(fit.intercept + fit.slope * x, 1) / MIB for x in xs], "-", color=color, lw=1)
            else:
                axis.plot(xs, [max(y, 1) / MIB for y in ys], ":" if fit.technique == "checkpoint" else "--",
                          color=color, lw=1)
                for _, after, excess in fit.steps:
                    axis.annotate(f"+{excess / MIB:,.0f}", (after, max(dict(fit.points)[after], 1) / MIB),
                                  fontsize=6, color=color, textcoords="offset points", xytext=(3, -8))
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        shapes = ", ".join(f"{shape}: {model}" for model, (_, shape) in zip(models, MARKERS, strict=False))
        axis.set_xlabel(f"batch ({shapes})" if axis_name == "batch" else "depth N (plain-N, batch 8)")
        axis.set_ylabel("training peak (MiB)" if axis_name == "batch" else "activation memory at the peak (MiB)")
        axis.legend(fontsize=6, loc="upper left", bbox_to_anchor=(0, -0.16))  # below: the points stay visible
        axis.grid(alpha=0.3)
    figure.set_size_inches(max(7 * len(swept), 12), 9 if swept else 2.4)
    return _finish(figure, run, "growth with batch and depth: a line only where it fits (dotted: checkpointing)",
                   frameworks, path)


def fit_answers(run: dict, path: Path) -> Path:
    """Per question and framework, the largest batch within the budget (none: not even batch 1; unknown: a probe
    failed for another reason than memory)."""
    fits = run.get("fits", [])
    frameworks = list(dict.fromkeys(f["scenario"]["framework"] for f in fits))
    figure, axes = _grid(1, 1)
    labels = [f"{f['scenario']['framework']}: {f['scenario']['model']} {f['scenario']['kind']} "
              f"{f['scenario']['optimizer']} {f['scenario']['technique']} ({f['budget_bytes'] / 2**20:,.0f} MiB)"
              for f in fits]
    values = [f["largest_batch"] or 0 for f in fits]
    axes[0][0].barh(range(len(fits)), values, color=[f"C{frameworks.index(f['scenario']['framework'])}" for f in fits])
    axes[0][0].set_yticks(range(len(fits)), labels, fontsize=7)
    for index, (value, result) in enumerate(zip(values, fits, strict=True)):
        text = "unknown: " + result["unknown_reason"] if result["answer"] == "unknown" else value or "does not fit"
        axes[0][0].text(value, index, f" {text}", va="center", fontsize=7)
    axes[0][0].set_xlabel("largest batch within the budget")
    axes[0][0].invert_yaxis()
    return _finish(figure, run, "does it fit? largest batch per framework", frameworks, path)


def _phase_axis(record: dict) -> Callable[[float], float]:
    """Monotonic seconds -> x, where phase i spans [i, i + 1]: frameworks whose phases take different times share
    the bands, and a short phase stays visible (the seconds are in the record and the report)."""
    spans = [(p["started_at"], p["ended_at"]) for p in record["phases"]]

    def x(moment: float) -> float:
        for index, (start, end) in enumerate(spans):
            if moment < end or index == len(spans) - 1:
                return index + min(max((moment - start) / max(end - start, 1e-9), 0.0), 1.0)
        return float(len(spans))

    return x


def memory_timeline(record: dict) -> dict | None:
    """The samples a timeline draws: NVML's (the worker's processes, the device) on a GPU, the worker's own RSS
    sampler (anonymous, total) on the CPU; None where the record has none."""
    gpu = record["scenario"]["device"] == "cuda"
    chosen = record.get("nvml", {}).get("timeline") if gpu else record.get("timeline")
    return chosen if chosen and chosen.get("points") and record.get("phases") else None


def timelines(run: dict, path: Path) -> Path:
    """Per model and kind, each framework's memory through its phases: on the CPU anonymous RSS (solid, the figure
    that repeats) and total RSS (dotted) from the worker's sampler, on a GPU NVML's figure for the worker's
    processes (solid) and the device's (dotted); the allocator's reading at each phase's end (dots); the phases
    as bands."""
    groups = {key: [r for r in records if memory_timeline(r)]
              for key, records in panels([r for r in run["records"] if r["scenario"]["model"] not in PROBES]).items()}
    groups = {key: records for key, records in groups.items() if records}
    names = list(dict.fromkeys(variant(r) for records in groups.values() for r in records))
    figure, axes = _flow(len(groups))
    for axis, ((model, kind), records) in zip(axes, groups.items(), strict=True):
        for record in records:
            color, x = f"C{names.index(variant(record))}", _phase_axis(record)
            timeline = memory_timeline(record)
            xs = [x(timeline["start_monotonic_s"] + point[0] / 1000) for point in timeline["points"]]
            axis.plot(xs, [point[1] / 1024 for point in timeline["points"]], color=color, linewidth=1.2)
            axis.plot(xs, [point[2] / 1024 for point in timeline["points"]], color=color, linewidth=0.8, linestyle=":")
            ends = [(index + 1, allocated_now(p)) for index, p in enumerate(record["phases"])]
            axis.plot([i for i, value in ends if value is not None],
                      [value / MIB for _, value in ends if value is not None], "o", color=color, markersize=3)
        phases = PHASES[kind]
        for index in range(1, len(phases), 2):
            axis.axvspan(index, index + 1, color="0.93", zorder=0)
        axis.set_xticks([index + 0.5 for index in range(len(phases))], phases, fontsize=7)
        axis.set_xlim(0, len(phases))
        axis.set_ylabel("MiB")
        axis.set_title(f"{model}, {kind} (batch {records[0]['scenario']['batch']})", fontsize=9)
        axis.grid(axis="y", alpha=0.3)
    lines = ("anonymous RSS (solid), total (dotted)" if run["device"] != "cuda"
             else "NVML: the worker's processes (solid), the device (dotted)")
    return _finish(figure, run, f"memory through the phases: {lines}, the allocator (dots)", names, path)


PLOTS = {"default": breakdown_bars, "allocators": allocator_modes, "techniques": technique_savings, "sweeps": sweeps,
         "fit": fit_answers, "compile": execution_modes}
