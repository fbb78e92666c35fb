"""Plots from run files only (never live objects), one function per kind of plot.

Each plot function returns a matplotlib Figure (laid out, not saved); `figures` lists every figure a run's report
has with the file it goes to, and `save` writes them. Every framework has one colour in every plot
(`framework_color`); an axis is logarithmic only where its values span more than LOG_RATIO.
"""

from __future__ import annotations

import math
import textwrap
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_hex, to_rgb  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter  # noqa: E402

from models import backends  # noqa: E402
from models.record import STATIC_PLAN, atomic_write  # noqa: E402
from models.scenario import PHASES, Scenario  # noqa: E402
from suites.analysis import (  # noqa: E402
    across_records,
    errors,
)
from suites.analysis.constants import PROBES  # noqa: E402
from suites.analysis.figures import (  # noqa: E402
    allocated_now,
    baseline,
    context_alone,
    driver_peak,
    need,
    pool_size,
    preallocated,
    summary_phase,
)
from suites.analysis.fit import budget_text  # noqa: E402

MIB = 2**20
DPI = 90
LOG_RATIO = 30  # a log axis only where the largest positive value is more than this many times the smallest
PANEL = (6.4, 3.4)  # inches of one panel in a grid: readable at any number of panels (the figure grows)
# One colour per framework in every plot; a label that starts with a framework's name (a variant, an execution
# mode) takes that colour or a shade of it. A framework not named here takes a spare colour, fixed by its name.
FRAMEWORK_COLORS = {"jax": "#1f77b4", "keras-jax": "#ff7f0e", "keras-tensorflow": "#2ca02c", "torch": "#d62728",
                    "keras-torch": "#9467bd"}
SPARE_COLORS = ("#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f")
FRAMEWORK_GID, NEEDS_GID = "framework:", "needs"  # artists' gids: what a bar or line stands for (read by the tests)


def variant(record: dict) -> str:
    return Scenario.from_dict(record["scenario"]).variant


def panels(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Records grouped by (model, kind), in run order."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        grouped.setdefault((record["scenario"]["model"], record["scenario"]["kind"]), []).append(record)
    return grouped


def framework_of(label: str) -> str:
    """The framework a label names first ("torch compile", "jax b16 inplace": torch, jax)."""
    return backends.current(label.split()[0]) if label.strip() else label


def framework_color(label: str) -> str:
    """The colour of a framework, and of every label that starts with its name."""
    name = framework_of(label)
    return FRAMEWORK_COLORS.get(name) or SPARE_COLORS[zlib.crc32(name.encode()) % len(SPARE_COLORS)]


def _mix(color: str, toward: float) -> str:
    """The colour moved toward white (toward > 0) or black (< 0) by |toward|: the same hue, a shade of it."""
    target = 1.0 if toward > 0 else 0.0
    return to_hex(tuple(c + abs(toward) * (target - c) for c in to_rgb(color)))


def shades(labels: Iterable[str]) -> dict[str, str]:
    """Per label its framework's colour: the framework's own name its colour itself, a framework's other labels
    (variants, in order) shades of it from darker to lighter."""
    labels = list(dict.fromkeys(labels))
    result = {}
    for framework in dict.fromkeys(framework_of(label) for label in labels):
        mine = [label for label in labels if framework_of(label) == framework and label != framework]
        if framework in labels:
            result[framework] = framework_color(framework)
        for index, label in enumerate(mine):
            toward = 0.0 if len(mine) == 1 and framework not in labels else -0.45 + 1.0 * index / max(len(mine) - 1, 1)
            result[label] = _mix(framework_color(framework), toward)
    return result


def _mark(artists: Iterable, gid: str) -> None:
    """Name what artists stand for (a framework's bars and lines, the needs bars), for the tests to read."""
    for artist in artists:
        artist.set_gid(gid)


def _wrap(text: str, inches: float, fontsize: float) -> str:
    """Text broken into lines that fit `inches` at `fontsize` (a character taken as 0.58 of the font's size)."""
    width = max(int(inches * 72 / (0.58 * fontsize)), 20)
    return "\n".join(textwrap.fill(line, width) for line in text.split("\n"))


def _scale(axis: object, values: Iterable[float], which: str = "y") -> bool:
    """A logarithmic axis where the positive values span more than LOG_RATIO, else a linear one; True if log."""
    positive = [value for value in values if value and value > 0]
    log = bool(positive) and max(positive) / min(positive) > LOG_RATIO
    (axis.set_yscale if which == "y" else axis.set_xscale)("log" if log else "linear")
    if log:  # 1,000 rather than 10^3: MiB read as numbers, at 1, 2 and 5 of each decade so that an axis spanning
        # less than two decades still has labelled ticks (matplotlib's own minor labels would read 6 x 10^1)
        chosen = axis.yaxis if which == "y" else axis.xaxis
        chosen.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        chosen.set_major_formatter(FuncFormatter(_plain))
        chosen.set_minor_formatter(NullFormatter())
    return log


def _plain(value: float, _: object = None) -> str:
    """A tick value as a plain number: 0.5, 8, 1,024."""
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def _figure(width: float, height: float) -> Figure:
    """A figure with constrained layout (labels, titles and legends never cut), drawn with Agg at DPI."""
    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _grid(rows: int, columns: int, panel: tuple[float, float] = PANEL) -> tuple[Figure, list]:
    """A rows x columns grid of panels, each `panel` inches; with nothing to draw (a run of probes only, say), one
    note and no panel."""
    if not rows or not columns:
        figure = _figure(8, 2.4)
        axis = figure.add_subplot()
        axis.text(0.5, 0.5, "nothing to draw yet: no finished scenario beyond the probes", ha="center", va="center")
        axis.set_axis_off()
        return figure, []
    figure = _figure(panel[0] * columns, panel[1] * rows)
    return figure, figure.subplots(rows, columns, squeeze=False)


def _flow(count: int, columns: int = 2, panel: tuple[float, float] = PANEL) -> tuple[Figure, list]:
    """`count` panels in rows of `columns`, the last row's panels widened to fill it: a grid without holes."""
    if not count:
        return _grid(0, 0)
    columns = min(columns, count)
    rows = -(-count // columns)
    last = count - (rows - 1) * columns
    width = math.lcm(columns, last)
    figure = _figure(panel[0] * columns, panel[1] * rows)
    grid = figure.add_gridspec(rows, width)
    axes = []
    for index in range(count):
        row, column = divmod(index, columns)
        span = width // (columns if row < rows - 1 else last)
        axes.append(figure.add_subplot(grid[row, column * span:(column + 1) * span]))
    return figure, axes


def _patches(names: Sequence[str], colors: Sequence[str]) -> list[Patch]:
    """Legend entries: one coloured square per name."""
    return [Patch(facecolor=color, label=name) for name, color in zip(names, colors, strict=True)]


def _framework_patches(names: Iterable[str]) -> list[Patch]:
    """Legend entries for frameworks (or variants), each in its colour."""
    colors = shades(names)
    return _patches(list(colors), list(colors.values()))


def _finish(figure: Figure, run: dict, what: str, handles: Sequence) -> Figure:
    """Title and one legend above the panels (`handles`, each with its label), laid out so that nothing is cut: the
    title is the legend's, so constrained layout makes room for both at once."""
    width = figure.get_size_inches()[0]
    title = _wrap(f"footprint, suite {run['suite']}: {what}\n{run['device_description']}", width - 0.4, 11)
    longest = max((len(handle.get_label()) for handle in handles), default=0)
    columns = min(len(handles), max(int((width - 0.4) / (longest * 8 * 0.62 / 72 + 0.55)), 1), 6)
    rows = -(-len(handles) // columns) if handles else 0
    # the panels keep their size: the figure grows by the title and the legend
    figure.set_size_inches(width, figure.get_size_inches()[1] + 0.3 + 0.22 * (title.count("\n") + 1) + 0.19 * rows)
    if not handles:  # a run with nothing to draw (its probes only) has no legend either
        figure.suptitle(title, fontsize=11)
        return figure
    legend = figure.legend(handles=list(handles), loc="outside upper center", ncol=columns, fontsize=8, title=title,
                           title_fontsize=11, frameon=False)
    legend.get_title().set_multialignment("center")
    return figure


def figures(run: dict, path: Path) -> list[tuple[Figure, Path]]:
    """Every figure of a run's report with the file it goes to: the suite's plot at `path`, then where the run has
    them the estimate against the measurement (<stem>-estimate.png) and the timelines (<stem>-timeline.png)."""
    drawn = [(PLOTS.get(run["suite"], breakdown_bars)(run), path)]
    if errors.rows(run):
        drawn.append((estimate_vs_measured(run), path.with_name(f"{path.stem}-estimate.png")))
    if any(memory_timeline(record) for record in run["records"]):
        drawn.append((timelines(run), path.with_name(f"{path.stem}-timeline.png")))
    return drawn


def save(drawn: list[tuple[Figure, Path]]) -> list[Path]:
    """Each figure into its file (PNG at DPI; constrained layout keeps every label on the canvas); the paths, in
    order."""
    for figure, path in drawn:
        atomic_write(path, lambda handle, figure=figure: figure.savefig(handle, dpi=DPI, format="png"))
    return [path for _, path in drawn]


# One color per breakdown category, the same in every figure (one GPU run can have both kernel modules and runtime:
# the latter where the allocator does not report its pool); what no rule explains is hatched grey, so that it is never
# read as a known part.
CATEGORY_COLORS = {"context": "#7f7f7f", "kernel_modules": "#c7c7c7", "runtime": "#c49c94", "weights": "#1f77b4",
                   "gradients": "#aec7e8", "optimizer_state": "#ff7f0e", "inputs": "#ffbb78", "activations": "#2ca02c",
                   "library_workspace": "#98df8a", "unsplit_chunks": "#9edae5", "update_temporaries": "#dbdb8d",
                   "transient": "#c5b0d5",
                   "unexplained": "#ececec",
                   "allocator_cache": "#d62728", "pool_unused": "#f7b6d2"}
HATCHED = ("unexplained",)
# The parts of the model's need: its tensors, its activations, the estimate's named parts of the rest, the rest.
MODEL_CATEGORIES = ("weights", "gradients", "optimizer_state", "inputs", "activations", "unsplit_chunks",
                    "library_workspace", "update_temporaries", "transient", "unexplained")
# Bottom to top: what is there before the model, the model, then what the allocator keeps unused.
STACK_ORDER = ("context", "kernel_modules", "runtime", *MODEL_CATEGORIES, "allocator_cache", "pool_unused")


def _category_style(category: str) -> dict:
    """A category's look in a bar and in the legend alike: its colour, hatched (dark grey) where unexplained."""
    hatched = category in HATCHED
    return {"facecolor": CATEGORY_COLORS[category], "edgecolor": "0.4" if hatched else "white",
            "hatch": "////" if hatched else None}


def _stack(axis: object, x: float, parts: dict[str, int], categories: tuple[str, ...], limit: float,
           width: float, gid: str | None = None) -> None:
    """One stacked bar in MiB with its total above it; what passes `limit` is cut there, and the cut segments' true
    sizes written on it."""
    bottom, cut = 0.0, []
    for category in categories:
        value = parts.get(category, 0) / MIB
        if value <= 0:
            continue
        shown = min(value, max(limit - bottom, 0))
        if shown > 0:
            drawn = axis.bar(x, shown, width, bottom=bottom, linewidth=0.3, **_category_style(category))
            if gid:
                _mark(drawn, gid)
        if shown < value:
            cut.append(f"{category.replace('_', ' ')}\n{value:,.0f} MiB")
        bottom += shown
    total = sum(parts.get(category, 0) for category in categories) / MIB
    if total > 0:
        axis.text(x, bottom, f"{total:,.0f}", ha="center", va="bottom", fontsize=7, fontweight="bold")
    if cut:
        axis.text(x, limit * 0.97, "cut:\n" + "\n".join(cut), ha="center", va="top", fontsize=6)


@dataclass(frozen=True)
class Column:
    """One framework (or variant) in a breakdown panel: its peak phase and the parts of its two bars."""

    label: str
    phase: str | None  # None: the scenario has no breakdown (it failed early)
    status: str
    holds: dict[str, int]  # every part of the driver's peak, by category
    needs: dict[str, int]  # the model's own parts; empty where the framework has no allocator figure
    need_basis: str
    pooled: bool = False  # the driver's figures hold a pool mapped at start, sized by a setting, not by the model
    counterpart: str = ""  # a Keras column: the label of its raw backend's column with the same settings
    versus: str = ""  # a Keras column: how much more it holds or needs than its counterpart (`_versus_raw`)


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
            name, scenario = summary_phase(record), Scenario.from_dict(record["scenario"])
            parts = {c: p["bytes"] for c, p in record["breakdown"][name].items()} if name else {}
            if unknown := sorted(set(parts) - set(STACK_ORDER)):  # a part no bar draws would vanish from the plot
                raise ValueError(f"{scenario.variant}: breakdown part {', '.join(unknown)} is not in plots.STACK_ORDER")
            basis = need(record, name)[1] if name else ""
            needs = ({c: parts[c] for c in MODEL_CATEGORIES if c in parts}
                     if name and need(record, name)[0] is not None else {})
            raw = backends.raw(scenario.framework)
            columns.append(Column(scenario.variant, name, record["status"], parts, needs, basis, scenario.preallocates,
                                  " ".join([raw, *scenario.variant_parts[1:]]) if raw else ""))
        columns = [_versus_raw(column, columns) for column in columns]
        without_pool = [sum(v for c, v in column.holds.items() if c != "pool_unused") for column in columns]
        result.append(Panel(model, kind, records[0]["scenario"]["batch"], tuple(columns),
                            int(1.25 * max([*without_pool, MIB]))))
    return result


def _versus_raw(column: Column, columns: list[Column]) -> Column:
    """A Keras column beside its counterpart in the same panel, like with like and never a pool (a pool is sized by
    a setting, so a difference of pools says nothing of Keras): what the process holds where neither is pooled,
    else what the model needs where both have that figure on one basis, else nothing."""
    counterpart = next((c for c in columns if column.counterpart and c.label == column.counterpart), None)
    if counterpart is None or column.phase is None or counterpart.phase is None:
        return column
    if not (column.pooled or counterpart.pooled):
        view, mine, theirs = "holds", column.holds, counterpart.holds
    elif column.needs and counterpart.needs and column.need_basis == counterpart.need_basis:
        view, mine, theirs = "needs", column.needs, counterpart.needs
    else:
        return column
    difference = sum(mine.values()) - sum(theirs.values())
    sign = "+" if difference >= 0 else "-"
    return replace(column, versus=f"{view} {sign}{abs(difference) / MIB:,.0f} MiB\nvs {counterpart.label}")


def _column_label(column: Column) -> str:
    """A column's tick label: the framework, the phase drawn, "holds | needs" only where it has a needs bar, and what
    a Keras column holds or needs beyond its raw backend's."""
    if column.phase is None:
        return column.label
    pair = "\nholds | needs" + (" (plan)" if column.need_basis == STATIC_PLAN else "") if column.needs else ""
    return f"{column.label}\n{column.phase}{pair}" + (f"\n{column.versus}" if column.versus else "")


def breakdown_bars(run: dict) -> Figure:
    """Per model and kind, per framework: what the process holds at its summary phase (a stacked breakdown:
    context, kernel modules, the model's tensors, what no rule explains hatched grey, cache, pool, its total in MiB
    above it) and, where the framework's allocator says, beside it what the model needs; under a Keras column, how
    much more it holds or needs than its raw backend (`_versus_raw`).

    The axis ends a little above the largest bar without a pool, so a 60 GB pool is cut, not allowed to
    flatten the rest: its true size is written on it.
    """
    found = breakdown_panels(run)
    kinds = list(dict.fromkeys(panel.kind for panel in found))
    most = max((len(panel.columns) for panel in found), default=1)
    figure, axes = _flow(len(found), max(len(kinds), 1), (max(PANEL[0], 1.35 * most + 1.2), 3.9))
    for axis, panel in zip(axes, found, strict=True):
        limit = panel.limit / MIB
        for index, column in enumerate(panel.columns):
            if column.phase is None:
                axis.text(index, 0, column.status, ha="center", va="bottom", fontsize=7)
                continue
            if column.needs:
                _stack(axis, index - 0.2, column.holds, STACK_ORDER, limit, 0.38)
                _stack(axis, index + 0.2, column.needs, MODEL_CATEGORIES, limit, 0.38, NEEDS_GID)
            else:
                _stack(axis, index, column.holds, STACK_ORDER, limit, 0.5)
        axis.set_xticks(range(len(panel.columns)), [_column_label(c) for c in panel.columns], fontsize=8)
        axis.set_xlim(-0.6, len(panel.columns) - 0.4)
        axis.set_ylim(0, limit * 1.08)
        axis.set_ylabel("MiB at the peak phase")
        axis.grid(axis="y", alpha=0.3)
        axis.set_title(_wrap(panel.title, figure.get_size_inches()[0] / max(len(kinds), 1) - 0.8, 10), fontsize=10)
    driver = "host RSS" if run["device"] == "cpu" else "NVML"
    what = (f"where the peak goes: what the process holds ({driver}, stacked by part, its total in MiB on top); "
            "where the allocator has a figure, beside it what the model needs (its tensors)")
    drawn = [name for name in STACK_ORDER if any(c.holds.get(name) for p in found for c in p.columns)]
    return _finish(figure, run, what, [Patch(label=name.replace("_", " "), **_category_style(name)) for name in drawn])


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


def _bar_values(axis: object, xs: Sequence[float], values: Sequence[float], log: bool, fontsize: float = 7) -> None:
    """Each bar's value in MiB above it, and room for it under the axis' top."""
    for x, value in zip(xs, values, strict=True):
        if value > 0:
            axis.text(x, value, f"{value:,.0f}", ha="center", va="bottom", fontsize=fontsize)
    top = max([*values, 1])
    axis.set_ylim(top=top * (2.5 if log else 1.15))
    if not log:
        axis.set_ylim(bottom=0)


def allocator_modes(run: dict) -> Figure:
    """Per model and framework, one pair of bars per allocator mode, named by the mode, in the framework's colour:
    what the process held at its highest phase (solid) and what the model needed (hatched, where the allocator has a
    figure); then each framework's context alone, lazy and eager. MiB on every bar."""
    bars = mode_bars(run)
    frameworks = list(dict.fromkeys(framework for _, framework in bars))
    context = [r for r in run["records"] if r["scenario"]["kind"] == "infer" and r["scenario"]["model"] not in PROBES]
    context_frameworks = [f for f in frameworks if any(r["scenario"]["framework"] == f for r in context)]
    figure, axes = _flow(len(bars) + len(context_frameworks), max(len(frameworks), 1), (5.8, 3.4))
    for axis, ((model, framework), modes) in zip(axes, bars.items(), strict=False):
        color, paired = framework_color(framework), any(bar.needs for bar in modes)
        shown = [(index + (-0.2 if paired else 0), bar.holds / MIB, False) for index, bar in enumerate(modes)]
        shown += [(index + 0.2, (bar.needs or 0) / MIB, True) for index, bar in enumerate(modes) if paired]
        shown = [(x, value, needs) for x, value, needs in shown if value > 0]
        for x, value, needs in shown:
            if needs:
                _mark(axis.bar(x, value, 0.38, color=_mix(color, 0.7), edgecolor=color, hatch="//"), NEEDS_GID)
            else:
                _mark(axis.bar(x, value, 0.38 if paired else 0.5, color=color), FRAMEWORK_GID + framework)
        log = _scale(axis, [value for _, value, _ in shown])
        _bar_values(axis, [x for x, _, _ in shown], [value for _, value, _ in shown], log, 6 if paired else 7)
        for index, bar in enumerate(modes):
            if bar.status != "ok":
                axis.text(index, 0.5, bar.status.replace(" in ", " in\n"), ha="center", va="center", fontsize=7,
                          color="black", transform=axis.get_xaxis_transform())
        axis.set_xticks(range(len(modes)), [bar.mode for bar in modes], fontsize=8)
        axis.set_xlim(-0.6, len(modes) - 0.4)
        axis.set_ylabel("MiB at the highest phase" + (" (log)" if log else ""))
        axis.grid(axis="y", alpha=0.3)
        axis.set_title(f"{model}, {framework}" + (": holds | needs" if paired else ": holds"), fontsize=9)
    for axis, framework in zip(axes[len(bars):], context_frameworks, strict=True):
        records = [r for r in context if r["scenario"]["framework"] == framework]
        values = [(context_alone(r, run["device"]) or 0) / MIB for r in records]
        _mark(axis.bar(range(len(records)), values, 0.5, color=framework_color(framework)),
              FRAMEWORK_GID + framework)
        axis.set_xticks(range(len(records)), [r["scenario"]["cuda_module_loading"] for r in records], fontsize=8)
        axis.set_xlim(-0.6, len(records) - 0.4)
        _bar_values(axis, range(len(records)), values, _scale(axis, values))
        axis.set_title(_wrap(f"{framework}: the context phase alone by CUDA module loading (a preallocated pool left "
                             "out)", 5.0, 9), fontsize=9)
        axis.set_ylabel("MiB")
        axis.grid(axis="y", alpha=0.3)
    driver = "host RSS" if run["device"] == "cpu" else "NVML"
    handles = [Patch(facecolor="0.45", label=f"holds ({driver} peak)"),
               Patch(facecolor="0.9", edgecolor="0.45", hatch="//",
                     label="needs (the allocator's in-phase peak or XLA's plan)"),
               *_framework_patches(frameworks)]
    return _finish(figure, run, "each allocator mode: what the process holds vs what the model needs, in the "
                   "framework's colour", handles)


MODEL_MARKERS = "os^vDP"


def estimate_vs_measured(run: dict) -> Figure:
    """One panel per view: each phase's estimate against its measurement, with y = x and +-25 %; log-log where the
    values span orders of magnitude. Colour: the framework; marker: the model."""
    found = [row for row in errors.rows(run) if row.source == "footprint" and row.measured > 0]
    views = [view for view in errors.VIEW_NAMES if any(row.view == view for row in found)]
    frameworks = list(dict.fromkeys(row.framework for row in found))
    models = list(dict.fromkeys(row.model for row in found))
    figure, axes = _grid(1, len(views), (5.2, 4.8))
    for axis, view in zip(axes[0] if views else [], views, strict=True):
        chosen = [row for row in found if row.view == view]
        for framework in frameworks:
            for index, model in enumerate(models):
                mine = [row for row in chosen if (row.framework, row.model) == (framework, model)]
                if mine:
                    _mark([axis.scatter([r.measured / MIB for r in mine], [max(r.estimate, 1) / MIB for r in mine],
                                        color=framework_color(framework), s=28, alpha=0.8,
                                        marker=MODEL_MARKERS[index % len(MODEL_MARKERS)])],
                          FRAMEWORK_GID + framework)
        values = [value / MIB for r in chosen for value in (r.measured, max(r.estimate, 1))]
        log = _scale(axis, values, "x")
        _scale(axis, values, "y")  # the same scale on both: y = x stays a diagonal
        low, high = (min(values) / 1.5 if log else 0.0), max(values) * (1.5 if log else 1.08)
        for factor, style in ((1.0, "-"), (1.25, ":"), (0.75, ":")):
            axis.plot([low, high], [low * factor, high * factor], style, color="grey", linewidth=0.8)
        axis.set_xlim(low, high)
        axis.set_ylim(low, high)
        axis.set_xlabel(f"measured: {errors.VIEW_NAMES[view]} (MiB)")
        axis.set_ylabel("estimate (MiB)")
        axis.set_title(f"{view} view", fontsize=10)
        axis.grid(alpha=0.3)
    handles = [*_framework_patches(frameworks),
               *(Line2D([], [], color="black", marker=MODEL_MARKERS[index % len(MODEL_MARKERS)], linestyle="none",
                        label=model) for index, model in enumerate(models))]
    return _finish(figure, run, "estimate vs measurement per phase (lines: equal, +-25 %); colour: framework, "
                   "marker: model", handles)


def _room(axis: object, values: Sequence[float], share: float = 0.22) -> None:
    """x limits with room for a value written at each bar's end, on either side of zero."""
    low, high = min([*values, 0.0]), max([*values, 0.0])
    span = max(high - low, 1e-9)
    axis.set_xlim(low - (share * span if low < 0 else 0), high + share * span)


BAR = 0.15  # inches of one horizontal bar


def technique_savings(run: dict) -> Figure:
    """Per model (one row each), per technique and framework: the measured saving at the training peak (bars, MiB
    written at their end) with the predicted one (a black mark), and the step time against the baseline."""
    everything = across_records.savings(run)
    frameworks = list(dict.fromkeys(s.framework for s in everything))
    models = list(dict.fromkeys(s.model for s in everything))
    if not models:
        return _finish(_grid(0, 0)[0], run, "what each technique saves against Adam with no technique", [])
    techniques = {model: list(dict.fromkeys(s.technique for s in everything if s.model == model)) for model in models}
    heights = [max(1.8, BAR * len(techniques[m]) * len(frameworks) + 0.25 * len(techniques[m])) + 0.9 for m in models]
    figure = _figure(13, sum(heights))
    grid = figure.add_gridspec(len(models), 2, height_ratios=heights, width_ratios=(3, 2))
    step = 0.8 / len(frameworks)
    for row, model in enumerate(models):
        memory = figure.add_subplot(grid[row, 0])
        time = figure.add_subplot(grid[row, 1], sharey=memory)
        mine = {(s.technique, s.framework): s for s in everything if s.model == model}
        saved, ratios = [], []
        for index, technique in enumerate(techniques[model]):
            for place, framework in enumerate(frameworks):
                y, saving = index + (place - (len(frameworks) - 1) / 2) * step, mine.get((technique, framework))
                if saving is None:
                    continue
                if saving.unavailable:
                    memory.text(0, y, f" {framework}: not available", va="center", fontsize=6, color="0.35")
                    continue
                color, gid = framework_color(framework), FRAMEWORK_GID + framework
                value = saving.measured / MIB
                _mark(memory.barh(y, value, step * 0.9, color=color), gid)
                ends = [value]
                if saving.predicted is not None:
                    memory.plot([saving.predicted / MIB], [y], "|", color="black", markersize=9, markeredgewidth=1.6)
                    ends.append(saving.predicted / MIB)
                end = max(ends) if value >= 0 else min(ends)  # the value after the bar and its mark
                memory.text(end, y, f" {value:,.{0 if abs(value) >= 10 else 1}f} ", va="center",
                            ha="left" if value >= 0 else "right", fontsize=7)
                saved += ends
                if saving.time_ratio:
                    _mark(time.barh(y, saving.time_ratio, step * 0.9, color=color), gid)
                    time.text(saving.time_ratio, y, f" {saving.time_ratio:.2f}x", va="center", fontsize=7)
                    ratios.append(saving.time_ratio)
        for axis in (memory, time):
            for index in range(1, len(techniques[model])):
                axis.axhline(index - 0.5, color="0.85", linewidth=0.6)
            axis.grid(axis="x", alpha=0.3)
        memory.set_yticks(range(len(techniques[model])), techniques[model], fontsize=9)
        memory.set_ylim(len(techniques[model]) - 0.5, -0.5)  # the first technique on top
        time.tick_params(axis="y", labelleft=False)
        memory.axvline(0, color="grey", linewidth=0.8)
        time.axvline(1, color="grey", linewidth=0.8)
        _room(memory, saved)
        _room(time, ratios, 0.18)
        memory.set_xlabel("MiB saved at the peak (negative: it cost memory)")
        time.set_xlabel("step time / the baseline's")
        memory.set_title(f"{model}: memory saved against Adam with no technique (black |: predicted)", fontsize=10)
        time.set_title(f"{model}: step time", fontsize=10)
    return _finish(figure, run, "what each technique saves against Adam with no technique (no bar: not run; see "
                   "the report for why a technique is not available)", _framework_patches(frameworks))


def execution_modes(run: dict) -> Figure:
    """Per model and kind, one bar per framework and mode in the framework's colour: what the steady phase held
    (solid) and what compiling held beyond it (hatched), with both in MiB and the seconds compiling took; a mode
    that cannot run here says why."""
    found = across_records.execution_modes(run)
    groups = list(dict.fromkeys((m.model, m.kind) for m in found))
    frameworks = list(dict.fromkeys(m.framework for m in found))
    if not groups:
        return _finish(_grid(0, 0)[0], run, "what each execution mode holds, steady and while compiling", [])
    heights = [max(1.8, 0.24 * sum((m.model, m.kind) == group for m in found)) + 1.0 for group in groups]
    figure = _figure(10, sum(heights))
    grid = figure.add_gridspec(len(groups), 1, height_ratios=heights)
    for row, (model, kind) in enumerate(groups):
        axis = figure.add_subplot(grid[row, 0])
        modes = [m for m in found if (m.model, m.kind) == (model, kind)]
        steady_name = "train_step_2" if kind == "train" else "inference"
        first = ("compile", "train_step_1") if kind == "train" else ("compile",)
        largest = 1.0
        for place, mode in enumerate(modes):
            color = framework_color(mode.framework)
            steady = mode.peaks.get(steady_name)
            if mode.status != "ok" or steady is None:
                axis.text(0, place, _wrap(f"  {mode.status}", 6.5, 7), va="center", fontsize=7)
                continue
            compiling = max((mode.peaks.get(name) or 0) for name in first)
            _mark(axis.barh(place, steady / MIB, 0.7, color=color), FRAMEWORK_GID + mode.framework)
            axis.barh(place, max(compiling - steady, 0) / MIB, 0.7, left=steady / MIB, color=color, alpha=0.35,
                      hatch="//")
            seconds = sum(mode.seconds.get(name, 0.0) for name in first)
            held = f"{steady / MIB:,.0f} MiB" + (f", {compiling / MIB:,.0f} compiling"
                                                 if round(compiling / MIB) > round(steady / MIB) else "")
            axis.text(max(steady, compiling) / MIB, place, f" {held}; {' + '.join(first)}: {seconds:.1f} s",
                      va="center", fontsize=7)
            largest = max(largest, steady / MIB, compiling / MIB)
        axis.set_yticks(range(len(modes)), [f"{m.framework} {m.execution}" for m in modes], fontsize=8)
        axis.set_ylim(len(modes) - 0.5, -0.5)
        axis.set_xlim(0, largest / 0.58)  # room for the text after the longest bar
        axis.set_xlabel("MiB held by the process tree (solid: steady phase; hatched: more while compiling)")
        axis.set_title(f"{model}, {kind}", fontsize=10)
        axis.grid(axis="x", alpha=0.3)
    return _finish(figure, run, "what each execution mode holds, steady and while compiling",
                   _framework_patches(frameworks))


MARKERS = (("o", "circles"), ("s", "squares"), ("^", "triangles"), ("D", "diamonds"))


def sweeps(run: dict) -> Figure:
    """Memory against batch (keras-small) and depth (plain-N, with and without checkpointing), with fitted slopes:
    colour the framework, marker the model, hollow and dotted a checkpointed run. One view per panel (a row per
    view): a framework whose figure is its allocator's (keras-tensorflow on the CPU) never shares an axis with the
    whole process's."""
    fits_by = {name: across_records.sweep_fits(run, name) for name in ("batch", "depth")}
    swept = {(name, view): fits for view in errors.VIEW_NAMES for name in ("batch", "depth")
             if (fits := [fit for fit in fits_by[name] if fit.view == view])}
    frameworks = list(dict.fromkeys(fit.framework for fits in swept.values() for fit in fits))
    entries = max((len(fits) for fits in swept.values()), default=0)
    figure, axes = _flow(len(swept), 2, (max(6.8, 13 / min(max(len(swept), 1), 2)), 4.6 + 0.16 * entries))
    for axis, ((axis_name, view), fits) in zip(axes, swept.items(), strict=True):
        models = list(dict.fromkeys(fit.model for fit in fits))
        xs_all, ys_all = [], []
        for fit in fits:
            xs, ys = zip(*fit.points, strict=True)
            color, style = framework_color(fit.framework), ":" if fit.technique == "checkpoint" else "-"
            marker = MARKERS[models.index(fit.model) % len(MARKERS)][0]
            unit = "example" if axis_name == "batch" else "layer"
            described = (f"line, {fit.slope / MIB:.2f} MiB per {unit}" if fit.linear
                         else f"no line (exponent {fit.exponent:.2f})")
            points = [max(y, 1) / MIB for y in ys]
            _mark(axis.plot(xs, points, marker, color=color, linestyle="none",
                            markerfacecolor="none" if fit.technique == "checkpoint" else color,
                            label=f"{fit.model} {fit.framework} {fit.technique}: {described}"),
                  FRAMEWORK_GID + fit.framework)
            if fit.linear:  # the line only where it fits; elsewhere the points, joined, and their steps named
                axis.plot(xs, [max(fit.intercept + fit.slope * x, 1) / MIB for x in xs], style, color=color, lw=1)
            else:
                axis.plot(xs, points, style, color=color, lw=1, alpha=0.7)
                for _, after, excess in fit.steps:
                    axis.annotate(f"+{excess / MIB:,.0f}", (after, max(dict(fit.points)[after], 1) / MIB),
                                  fontsize=6, color=color, textcoords="offset points", xytext=(3, -8))
            xs_all += xs
            ys_all += points
        if _scale(axis, xs_all, "x"):
            axis.set_xscale("log", base=2)
            axis.xaxis.set_major_formatter(FuncFormatter(_plain))
        _scale(axis, ys_all, "y")
        shapes = ", ".join(f"{shape}: {model}" for model, (_, shape) in zip(models, MARKERS, strict=False))
        axis.set_xlabel(f"batch ({shapes})" if axis_name == "batch" else "depth N (plain-N, batch 8)")
        axis.set_ylabel("training peak (MiB)" if axis_name == "batch" else "activation memory at the peak (MiB)")
        axis.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.13))  # below: the points stay visible
        axis.grid(alpha=0.3)
        axis.set_title(f"growth with {axis_name}: {errors.VIEW_NAMES[view]}", fontsize=10)
    return _finish(figure, run, "growth with batch and depth: a line only where it fits (hollow, dotted: "
                   "checkpointing)", _framework_patches(frameworks))


def fit_answers(run: dict) -> Figure:
    """Per question and framework, the largest batch within the budget (none: not even batch 1; unknown: a probe
    failed for another reason than memory)."""
    fits = run.get("fits", [])
    frameworks = list(dict.fromkeys(f["scenario"]["framework"] for f in fits))
    if not fits:
        return _finish(_grid(0, 0)[0], run, "does it fit? largest batch per framework", [])
    figure = _figure(10, max(1.8, 0.26 * len(fits)) + 0.8)
    axis = figure.add_subplot()
    labels = [f"{f['scenario']['model']} {f['scenario']['kind']} {f['scenario']['optimizer']} "
              f"{f['scenario']['technique']} ({budget_text(f['budget_bytes'])}): {f['scenario']['framework']}"
              for f in fits]
    values = [f["largest_batch"] or 0 for f in fits]
    for index, (value, result) in enumerate(zip(values, fits, strict=True)):
        framework = result["scenario"]["framework"]
        _mark(axis.barh(index, value, 0.7, color=framework_color(framework)), FRAMEWORK_GID + framework)
        text = ("unknown: " + result["unknown_reason"] if result["answer"] == "unknown"
                else f"batch {value}" if value else "does not fit, not even batch 1")
        axis.text(value, index, _wrap(f" {text}", 4.5, 7), va="center", fontsize=7)
    axis.set_yticks(range(len(fits)), labels, fontsize=8)
    axis.set_ylim(len(fits) - 0.5, -0.5)
    axis.set_xlim(0, max([*values, 1]) * 1.35)
    axis.set_xlabel("largest batch within the budget")
    axis.xaxis.set_major_locator(MaxNLocator(integer=True))
    axis.grid(axis="x", alpha=0.3)
    return _finish(figure, run, "does it fit? largest batch per framework", _framework_patches(frameworks))


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


@dataclass(frozen=True)
class Samples:
    """One record's timeline in plot units: x in phase bands, MiB on y."""

    xs: list[float]
    solid: list[float]  # the worker's processes (NVML), anonymous RSS (CPU)
    dotted: list[float]  # the device (NVML), total RSS (CPU)
    dots: list[tuple[int, float]]  # the allocator's reading at each phase's end
    pool: float | None  # MiB from which the driver's figures are a preallocated pool; None where none is


def samples(record: dict) -> Samples:
    """What a timeline draws of a record (one that `memory_timeline` finds)."""
    x, timeline = _phase_axis(record), memory_timeline(record)
    points = timeline["points"]
    ends = [(index + 1, allocated_now(phase)) for index, phase in enumerate(record["phases"])]
    # a pool whose size the framework does not say (TensorFlow's default) starts where the context phase's peak does
    pool = (pool_size(record) or baseline(record, record["scenario"]["device"])) if preallocated(record) else None
    return Samples([x(timeline["start_monotonic_s"] + point[0] / 1000) for point in points],
                   [point[1] / 1024 for point in points], [point[2] / 1024 for point in points],
                   [(index, value / MIB) for index, value in ends if value is not None], pool / MIB if pool else None)


def _broken(axis: object) -> tuple[object, object]:
    """Two axes in the place of one, for an axis broken between them: a strip above for the pools, the rest below at
    its own scale, the cut marked on both."""
    figure, spec = axis.figure, axis.get_subplotspec()
    axis.remove()
    inner = spec.subgridspec(2, 1, height_ratios=(1, 2.2))
    upper = figure.add_subplot(inner[0])
    lower = figure.add_subplot(inner[1], sharex=upper)
    upper.spines.bottom.set_visible(False)
    lower.spines.top.set_visible(False)
    upper.tick_params(axis="x", bottom=False, labelbottom=False)
    cut = {"marker": [(-1, -0.5), (1, 0.5)], "markersize": 10, "linestyle": "none", "color": "black",
           "clip_on": False}
    upper.plot([0, 1], [0, 0], transform=upper.transAxes, **cut)
    lower.plot([0, 1], [1, 1], transform=lower.transAxes, **cut)
    return upper, lower


def timelines(run: dict) -> Figure:
    """Per model and kind, each framework's memory through its phases: on the CPU anonymous RSS (solid, the figure
    that repeats) and total RSS (dotted) from the worker's sampler, on a GPU NVML's figure for the worker's
    processes (solid) and the device's (dotted); the allocator's reading at each phase's end (dots); the phases
    as bands. Colour: the framework, a shade of it per variant.

    A preallocated pool (JAX's 61 GB on an H100) would squash every other line into a strip, so where one lifts its
    lines far above the rest the axis is broken: the pools in a strip above, the rest below at its own scale, every
    line at its true value in both (unlike a pool left as a note, its own level stays readable; unlike a panel of
    its own, each framework stays on one axis beside the others).
    """
    groups = {key: [r for r in records if memory_timeline(r)]
              for key, records in panels([r for r in run["records"] if r["scenario"]["model"] not in PROBES]).items()}
    groups = {key: records for key, records in groups.items() if records}
    colors = shades(variant(r) for records in groups.values() for r in records)
    drawn = {key: {variant(r): samples(r) for r in records} for key, records in groups.items()}
    pooled = any(s.pool for found in drawn.values() for s in found.values())
    width = max(PANEL[0], 11 / min(max(len(groups), 1), 2))
    figure, slots = _flow(len(groups), 2, (width, 5.4 if pooled else 3.8))
    for slot, ((model, kind), found) in zip(slots, drawn.items(), strict=True):
        phases = PHASES[kind]
        cut = _pool_break(found, len(phases))
        axes = _broken(slot) if cut else (slot,)
        for axis in axes:
            for name, drawn_samples in found.items():
                _draw_samples(axis, drawn_samples, colors[name], FRAMEWORK_GID + name)
            for index in range(1, len(phases), 2):
                axis.axvspan(index, index + 1, color="0.93", zorder=0)
            axis.set_xlim(0, len(phases))
            axis.yaxis.set_major_formatter(FuncFormatter(_plain))
            axis.grid(axis="y", alpha=0.3)
        axes[-1].set_xticks([index + 0.5 for index in range(len(phases))], phases, fontsize=7, rotation=20,
                            ha="right", rotation_mode="anchor")
        axes[-1].set_ylim(0, cut[0] if cut else None)
        axes[-1].set_ylabel("MiB")
        axes[0].set_title(f"{model}, {kind} (batch {groups[model, kind][0]['scenario']['batch']})", fontsize=10)
        if cut:
            axes[0].set_ylim(*cut[1:])
            axes[0].yaxis.set_major_locator(MaxNLocator(3))
            axes[0].text(0.99, 0.5, _wrap(_pools_note(found), width * 0.6, 7), transform=axes[0].transAxes,
                         ha="right", va="center", fontsize=7, bbox={"facecolor": "white", "edgecolor": "none",
                                                                     "alpha": 0.8})
    lines = ("anonymous RSS (solid), total (dotted)" if run["device"] != "cuda"
             else "NVML: the worker's processes (solid), the device (dotted)")
    return _finish(figure, run, f"memory through the phases: {lines}, the allocator (dots)",
                   _patches(list(colors), list(colors.values())))


def _pool_break(found: dict[str, Samples], bands: int) -> tuple[float, float, float] | None:
    """Where a panel's axis breaks: the top of the lower axis, the bottom and top of the pools' strip (MiB); None
    where no pool lifts its lines to more than twice the rest. Only what lies inside the phase bands sets the scale:
    what the worker's processes held before the first phase or after the last (at ec3adfa, up to 12.9 GB before a
    JAX worker's import) is drawn on the edges, cut."""
    low = min((s.pool for s in found.values() if s.pool), default=math.inf)  # from here up, a line is a pool's
    values = [y for s in found.values() for line in (s.solid, s.dotted)
              for x, y in zip(s.xs, line, strict=True) if 0 < x < bands]
    below = [y for y in values if y < low] + [y for s in found.values() for _, y in s.dots]
    above = [y for y in values if y >= low]
    if not above or max(below, default=0) >= low / 2:
        return None
    pad = max(0.15 * (max(above) - min(above)), 0.004 * max(above))
    return max(below, default=1) * 1.1, min(above) - pad, max(above) + pad


def _pools_note(found: dict[str, Samples]) -> str:
    """What the strip above a broken axis holds: which frameworks preallocated pools, of what sizes."""
    names = list(dict.fromkeys(framework_of(name) for name, s in found.items() if s.pool))
    sizes = sorted({s.pool for s in found.values() if s.pool})
    what = (f"a {sizes[0]:,.0f} MiB pool" if len(sizes) == 1
            else "pools of " + ", ".join(f"{size:,.0f}" for size in sizes) + " MiB")
    return f"axis broken: {' and '.join(names)} preallocated {what}"


def _draw_samples(axis: object, found: Samples, color: str, gid: str) -> None:
    """One record's lines and dots on an axis, each marked with what it stands for."""
    _mark([*axis.plot(found.xs, found.solid, color=color, linewidth=1.2),
           *axis.plot(found.xs, found.dotted, color=color, linewidth=0.8, linestyle=":"),
           *axis.plot([i for i, _ in found.dots], [value for _, value in found.dots], "o", color=color, markersize=3)],
          gid)


PLOTS = {"default": breakdown_bars, "allocators": allocator_modes, "techniques": technique_savings, "sweeps": sweeps,
         "fit": fit_answers, "compile": execution_modes}
