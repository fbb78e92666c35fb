"""Every plot legible (issue 24): each committed run file's figures, rendered into a temporary folder, read from the
matplotlib Figure objects after layout: panels of a readable size, no text outside the canvas, one colour per
framework in every plot (a variant a shade of it), "needs" said only where a needs bar is drawn, no log axis
over values that span less than plots.LOG_RATIO; and (issue 31) no pool that flattens the other lines of a timeline,
no label that compares a pool, one view per sweeps axis, no breakdown part that vanishes."""

from __future__ import annotations

import colorsys
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from matplotlib.axis import Axis
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from models import backends
from models.scenario import Scenario
from suites.analysis import accounting, across_records, errors, figures, fit
from suites.report import plots
from suites.run import runfile
from tests.conftest import published_runs

ROOT = Path(__file__).resolve().parents[1]
MIN_PANEL = (2.0, 1.2)  # inches: the smallest panel a person reads


RUN_FILES = published_runs()
POOLED_RUN = ROOT / "results" / "h100-ec3adfa" / "default-cuda.json"  # jax and keras-jax with JAX's 61 GB pool
# The figures by the name of their file, every framework drawn, and the run each figure draws, by the same name.
Drawn = tuple[list[tuple[str, Figure]], set[str], dict[str, dict]]


def load(path: Path) -> dict:
    """A run file as render() reads it: current names, records re-accounted, fit answers re-read."""
    run = runfile.load(path)
    run["records"] = accounting.reaccount(run)
    run["fits"] = [fit.reread(result) for result in run.get("fits", [])]
    return run


def frameworks_of(run: dict) -> set[str]:
    return {backends.current(entry["scenario"]["framework"]) for entry in (*run["records"], *run.get("fits", []))}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory: pytest.TempPathFactory) -> Drawn:
    """Every committed run file's figures, saved into a temporary folder (the save lays them out)."""
    out = tmp_path_factory.mktemp("plots")
    found, frameworks, runs = [], set(), {}
    for path in RUN_FILES:
        run = load(path)
        frameworks |= frameworks_of(run)
        target = out / path.relative_to(ROOT / "results")
        target.parent.mkdir(parents=True, exist_ok=True)
        figures = plots.figures(run, target.with_suffix(".png"))
        written = plots.save(figures)
        assert written and all(p.exists() and p.parent == target.parent for p in written)
        found += [(str(p.relative_to(out)), figure) for figure, p in figures]
        runs |= {str(p.relative_to(out)): run for _, p in figures}
    return found, frameworks, runs


def test_every_committed_run_file_is_rendered() -> None:
    assert len(RUN_FILES) >= 15
    assert {path.name for path in RUN_FILES} >= {"techniques-cpu.json", "allocators-cpu.json", "fit-cpu.json",
                                                 "compile-cpu.json", "default-cpu.json", "default-cuda.json"}


# The checks: each takes a laid-out figure and names what is wrong with it (an empty list: nothing).


def _drawn_tick_labels(axis: Axis) -> tuple[list[Text], list[Text]]:
    """Every tick label of an axis, and those drawn: visible, of a tick inside the view."""
    low, high = sorted(axis.get_view_interval())
    every, shown = [], []
    for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
        inside = low - 1e-9 * abs(high - low) <= tick.get_loc() <= high + 1e-9 * abs(high - low)
        for label in (tick.label1, tick.label2):
            every.append(label)
            if inside and label.get_visible():
                shown.append(label)
    return every, shown


def texts(figure: Figure) -> list[Text]:
    """Every text the figure draws: titles, axis and tick labels, legend texts, bar annotations."""
    ticks, shown = set(), []
    for axes in figure.axes:
        for axis in (axes.xaxis, axes.yaxis):
            every, drawn_labels = _drawn_tick_labels(axis)
            ticks |= {id(label) for label in every}
            shown += drawn_labels
    found = [text for text in figure.findobj(Text) if id(text) not in ticks] + shown
    return [text for text in found if text.get_visible() and text.get_text().strip()]


def too_small(figure: Figure) -> list[str]:
    width, height = figure.get_size_inches()
    return [f"panel {axes.get_title()!r} is {axes.get_position().width * width:.1f} x "
            f"{axes.get_position().height * height:.1f} in"
            for axes in figure.axes if axes.axison and (axes.get_position().width * width < MIN_PANEL[0]
                                                         or axes.get_position().height * height < MIN_PANEL[1])]


def outside(figure: Figure) -> list[str]:
    renderer = figure.canvas.get_renderer()
    canvas = figure.bbox
    problems = []
    for text in texts(figure):
        box = text.get_window_extent(renderer)
        if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"{text.get_text()[:40]!r} at {box.bounds} outside {canvas.bounds}")
    return problems


def _color(artist: object) -> str | None:
    if isinstance(artist, Line2D):
        return to_hex(artist.get_color(), keep_alpha=False)
    if isinstance(artist, Patch):
        return to_hex(artist.get_facecolor(), keep_alpha=False)
    colors = getattr(artist, "get_facecolor", lambda: [])()
    return to_hex(colors[0], keep_alpha=False) if len(colors) else None


def colors(figure: Figure, frameworks: set[str]) -> list[tuple[str, str]]:
    """(label, colour) of what stands for a framework or one of its variants: marked bars, lines and points, and
    the legend entries whose text starts with a framework's name."""
    found = []
    for artist in figure.findobj(lambda a: str(a.get_gid() or "").startswith(plots.FRAMEWORK_GID)):
        if (color := _color(artist)) is not None:
            found.append((artist.get_gid().removeprefix(plots.FRAMEWORK_GID), color))
    legends = [*figure.legends, *(axes.get_legend() for axes in figure.axes if axes.get_legend())]
    for legend in legends:
        for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True):
            label = text.get_text()
            if label.split() and label.split()[0] in frameworks and (color := _color(handle)) is not None:
                found.append((label, color))
    return found


def needs_without_bar(figure: Figure) -> list[str]:
    """A panel that says "needs" (title, axis or tick labels, annotations, its legend) must draw a needs bar."""
    problems = []
    for axes in figure.axes:
        said = [*axes.texts, axes.title, axes.xaxis.label, axes.yaxis.label,
                *_drawn_tick_labels(axes.xaxis)[1], *_drawn_tick_labels(axes.yaxis)[1],
                *(axes.get_legend().get_texts() if axes.get_legend() else [])]
        if any(re.search(r"\bneeds\b", text.get_text()) for text in said if text.get_visible()) and not any(
                patch.get_gid() == plots.NEEDS_GID for patch in axes.patches):
            problems.append(f"panel {axes.get_title()!r} says needs without a needs bar")
    return problems


def _values(axes: object, which: str) -> list[float]:
    """The positive data values the artists of a panel place along x or y."""
    index = 0 if which == "x" else 1
    values = []
    for line in axes.lines:
        values += list(line.get_xdata() if which == "x" else line.get_ydata())
    for collection in axes.collections:
        values += [point[index] for point in collection.get_offsets()]
    for patch in axes.patches:
        if isinstance(patch, Rectangle) and patch.get_data_transform() == axes.transData:
            start, size = (patch.get_x(), patch.get_width()) if which == "x" else (patch.get_y(), patch.get_height())
            values += [start, start + size]
    return [float(value) for value in values if value is not None and float(value) > 0]


def needless_log(figure: Figure) -> list[str]:
    problems = []
    for axes in figure.axes:
        for which in ("x", "y"):
            if (axes.get_xscale() if which == "x" else axes.get_yscale()) != "log":
                continue
            values = _values(axes, which)
            if values and max(values) / min(values) <= plots.LOG_RATIO:
                problems.append(f"panel {axes.get_title()!r}: log {which} over {min(values):,.1f} to "
                                f"{max(values):,.1f}")
    return problems


def color_problems(found: list[tuple[str, str, str]]) -> list[str]:
    """From (figure, label, colour): one colour per framework everywhere, distinct frameworks distinct colours, each
    variant a shade of its framework's colour (the same hue)."""
    problems, base = [], {}
    for name, label, color in found:
        if len(label.split()) == 1:
            base.setdefault(label, {}).setdefault(color, []).append(name)
    for framework, seen in base.items():
        if len(seen) > 1:
            problems.append(f"{framework} in {len(seen)} colours: " + "; ".join(
                f"{color} in {sorted(set(names))[:3]}" for color, names in seen.items()))
    chosen = {framework: next(iter(seen)) for framework, seen in base.items()}
    if len(set(chosen.values())) < len(chosen):
        problems.append(f"two frameworks share a colour: {chosen}")
    for name, label, color in found:
        framework = label.split()[0]
        if label == framework or framework not in chosen:
            continue
        hue, _, saturation = colorsys.rgb_to_hls(*to_rgb(color))
        want, _, want_saturation = colorsys.rgb_to_hls(*to_rgb(chosen[framework]))
        if want_saturation > 0.1 and min(abs(hue - want), 1 - abs(hue - want)) > 0.03:
            problems.append(f"{name}: {label} in {color}, not a shade of {framework}'s {chosen[framework]}")
    return problems


def pooled(run: dict) -> set[str]:
    """The variants (column and line labels) whose driver figures hold a preallocated pool."""
    return {plots.variant(record) for record in run["records"]
            if Scenario.from_dict(record["scenario"]).preallocates}


SCALE = 2.0  # the axis that holds a timeline's lines without a pool ends within this many times their highest point


def _tops(axes: object, keep: Callable[[str], bool]) -> list[float]:
    """The highest point inside the x view of each line marked with a label `keep` takes."""
    left, right = axes.get_xlim()
    tops = []
    for line in axes.lines:
        gid = str(line.get_gid() or "")
        if gid.startswith(plots.FRAMEWORK_GID) and keep(gid.removeprefix(plots.FRAMEWORK_GID)):
            inside = [y for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True) if left < x < right]
            tops += [max(inside)] if inside else []
    return tops


def squashed(figure: Figure, pools: set[str]) -> list[str]:
    """A timeline whose pools flatten the other lines: the axis whose view holds the highest point of the lines
    without a pool must end within SCALE times it, and each pooled line's highest point must be in some axis' view
    (the pool shown, not cut away)."""
    problems, pooled_tops, shown = [], set(), set()
    for axes in figure.axes:
        bottom, top = axes.get_ylim()
        highest = max(_tops(axes, lambda name: name not in pools), default=None)
        if highest and bottom <= highest <= top and top > SCALE * highest:
            problems.append(f"panel {axes.get_title()!r}: the lines without a pool reach {highest:,.0f} on an axis "
                            f"up to {top:,.0f}")
        tops = _tops(axes, lambda name: name in pools)
        pooled_tops |= set(tops)
        shown |= {y for y in tops if bottom <= y <= top}
    return problems + [f"a pooled line's top {y:,.0f} is in no axis' view" for y in sorted(pooled_tops - shown)]


VERSUS = re.compile(r"(?:\b(?P<view>holds|needs) )?[+-][\d,.]+ MiB\s+vs (?P<other>.+)$")


def versus_labels(figure: Figure, pools: set[str]) -> tuple[list[str], list[str]]:
    """Every "+N MiB vs X" label (each a column's tick label, the column's name its first line), and the problems: a
    label that does not say what it compares, or that compares what a process holds where either side holds a
    pool."""
    found, problems = [], []
    for text in texts(figure):
        if not (match := VERSUS.search(text.get_text())):
            continue
        column, other = text.get_text().split("\n")[0], match["other"]
        found.append(f"{column}: {match[0]}")
        if match["view"] is None:
            problems.append(f"{column}: {match[0]!r} does not say what it compares")
        elif match["view"] == "holds" and {column, other} & pools:
            problems.append(f"{column}: {match[0]!r} compares what a pool holds")
    return found, problems


def mixed_views(figure: Figure, run: dict) -> list[str]:
    """A sweeps panel whose title does not name one view, or that draws a fit of another view than its title's."""
    problems = []
    for axes in figure.axes:
        if axes.get_legend() is None:
            continue
        title = axes.get_title()
        views = [view for view, said in errors.VIEW_NAMES.items() if said in title]
        if len(views) != 1:
            problems.append(f"panel {title!r} names {len(views)} views")
            continue
        fits = across_records.sweep_fits(run, title.split(":")[0].removeprefix("growth with "))
        for label in (text.get_text() for text in axes.get_legend().get_texts()):
            model, framework, technique = label.split(":")[0].split()
            if not any((f.model, f.framework, f.technique, f.view) == (model, framework, technique, views[0])
                       for f in fits):
                problems.append(f"panel {title!r} draws {label!r}, not of that view")
    return problems


# The tests.


def test_every_panel_is_a_readable_size(drawn: Drawn) -> None:
    problems = [f"{name}: {problem}" for name, figure in drawn[0] for problem in too_small(figure)]
    assert not problems, "\n".join(problems)


def test_no_label_is_cut(drawn: Drawn) -> None:
    problems = [f"{name}: {problem}" for name, figure in drawn[0] for problem in outside(figure)]
    assert not problems, "\n".join(problems)


def test_one_colour_per_framework_in_every_plot(drawn: Drawn) -> None:
    figures, frameworks, _ = drawn
    found = [(name, label, color) for name, figure in figures for label, color in colors(figure, frameworks)]
    assert {label for _, label, _ in found} >= frameworks  # every framework is drawn somewhere, by colour
    problems = color_problems(found)
    assert not problems, "\n".join(problems)


def test_needs_is_said_only_beside_a_needs_bar(drawn: Drawn) -> None:
    problems = [f"{name}: {problem}" for name, figure in drawn[0] for problem in needs_without_bar(figure)]
    assert not problems, "\n".join(problems)
    assert any(patch.get_gid() == plots.NEEDS_GID for _, figure in drawn[0] for axes in figure.axes
               for patch in axes.patches)  # the check has something to read


def test_a_log_axis_only_over_orders_of_magnitude(drawn: Drawn) -> None:
    problems = [f"{name}: {problem}" for name, figure in drawn[0] for problem in needless_log(figure)]
    assert not problems, "\n".join(problems)


def test_framework_colours_are_fixed_and_variants_are_shades() -> None:
    assert plots.framework_color("torch compile") == plots.framework_color("torch") != plots.framework_color("jax")
    assert plots.framework_color("tensorflow") == plots.FRAMEWORK_COLORS["keras-tensorflow"]  # its older name
    assert plots.framework_color("mxnet") == plots.framework_color("mxnet")  # a spare colour, fixed by the name
    made = plots.shades(["torch", "torch b16", "torch b32", "jax b16"])
    assert made["torch"] == plots.FRAMEWORK_COLORS["torch"] and made["jax b16"] == plots.FRAMEWORK_COLORS["jax"]
    assert len(set(made.values())) == 4
    assert not color_problems([("made", label, color) for label, color in made.items()])


def _main_figures(drawn: Drawn, suite: str) -> list[tuple[str, Figure, dict]]:
    """The suite plot (not the estimate or the timeline) of every committed run of a suite, with its run."""
    return [(name, figure, drawn[2][name]) for name, figure in drawn[0]
            if drawn[2][name]["suite"] == suite and not name.endswith(("-estimate.png", "-timeline.png"))]


def test_a_pool_does_not_flatten_a_timeline(drawn: Drawn) -> None:
    timelines = [(name, figure, drawn[2][name]) for name, figure in drawn[0] if name.endswith("-timeline.png")]
    problems = [f"{name}: {problem}" for name, figure, run in timelines for problem in squashed(figure, pooled(run))]
    assert not problems, "\n".join(problems)
    pooled_runs = [name for name, _, run in timelines if pooled(run)]
    assert "h100-ec3adfa/default-cuda-timeline.png" in pooled_runs  # the check has pools to read


def test_the_timeline_of_a_pooled_run_breaks_its_axis_at_the_pool() -> None:
    run = load(POOLED_RUN)
    assert pooled(run) == {"jax", "keras-jax"}
    figure = plots.timelines(run)
    assert not squashed(figure, pooled(run))
    pool = next(figures.pool_size(r) for r in run["records"] if plots.variant(r) == "jax") / plots.MIB
    notes = [text.get_text() for text in texts(figure) if text.get_text().startswith("axis broken")]
    assert len(notes) == 5 and all(f"{pool:,.0f} MiB pool" in note.replace("\n", " ") for note in notes)
    for axes in figure.axes:  # each pool's strip starts above the pool, the axis below it ends under half the pool
        assert axes.get_ylim()[0] > pool or axes.get_ylim()[1] < pool / 2


def test_no_label_compares_a_pool(drawn: Drawn) -> None:
    found, problems = [], []
    for name, figure in drawn[0]:
        labels, wrong = versus_labels(figure, pooled(drawn[2][name]))
        found += [f"{name}: {label}" for label in labels]
        problems += [f"{name}: {problem}" for problem in wrong]
    assert not problems, "\n".join(problems)
    pooled_figure = [label for label in found if label.startswith("h100-ec3adfa/default-cuda.png")]
    assert any(re.search(r"keras-jax: needs [+-][\d,]+ MiB\s+vs jax$", label) for label in pooled_figure)
    assert any(re.search(r"keras-torch: holds [+-][\d,]+ MiB\s+vs torch$", label) for label in pooled_figure)


def test_each_sweeps_axis_shows_one_view(drawn: Drawn) -> None:
    found = _main_figures(drawn, "sweeps")
    problems = [f"{name}: {problem}" for name, figure, run in found for problem in mixed_views(figure, run)]
    assert not problems, "\n".join(problems)
    views = {f.view for _, _, run in found for name in ("batch", "depth") for f in across_records.sweep_fits(run, name)}
    assert views == set(errors.VIEW_NAMES)  # the committed sweeps have both views to keep apart


def test_every_breakdown_part_has_a_place_and_an_unknown_one_fails() -> None:
    assert set(plots.CATEGORY_COLORS) == set(plots.STACK_ORDER)
    looks = {(style["facecolor"], style["hatch"]) for style in map(plots._category_style, plots.STACK_ORDER)}
    assert len(looks) == len(plots.STACK_ORDER)  # no two parts look alike
    assert set(plots.MODEL_CATEGORIES) <= set(plots.STACK_ORDER)
    run = load(POOLED_RUN)
    assert plots.breakdown_panels(run)
    record = next(r for r in run["records"] if plots.variant(r) == "torch" and r["scenario"]["model"] == "heatmap68")
    record["breakdown"][figures.summary_phase(record)]["mystery"] = {"bytes": plots.MIB}
    with pytest.raises(ValueError, match="mystery"):
        plots.breakdown_panels(run)


def test_unexplained_is_hatched_grey(drawn: Drawn) -> None:
    entries = [handle for _, figure in drawn[0] for legend in figure.legends
               for text, handle in zip(legend.get_texts(), legend.legend_handles, strict=True)
               if text.get_text() == "unexplained"]
    assert entries and all(handle.get_hatch() for handle in entries)
    _, _, saturation = colorsys.rgb_to_hls(*to_rgb(plots.CATEGORY_COLORS["unexplained"]))
    assert saturation < 0.05  # grey
