"""The estimate's error over runs, the way the field measures it: per framework and view, the median, 90th
percentile and largest error, and the unsafe rate (the share of phases where the estimate, used as a limit, is
below the measured peak by more than 2 %: the job it sized would run out of memory).

The probe records are left out: their constants were taken from themselves, so their error is zero by
construction and would flatter the figures. Each row says which half of the zoo's split its net is in
(models/zoo_split.py): the tuned half (the catalogue's families, which the rules were shaped on) and the held-out
half are reported apart, since only the held-out figures say what a user's new net can expect. `table` is what
`python -m suites errors RUN.json...` prints: each run file read again with today's rules and its own probes'
constants. `margin` is the headroom that held-out spread asks for, which `estimate --budget` states.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from models import executions, zoo_split
from suites.analysis import accounting
from suites.analysis.constants import PROBES

VIEW_NAMES = {"driver": "rise above the context (driver's view)", "allocator": "allocator's peak"}
# A miss is judged as a user reads it: relative for a large need, absolute for a small one (a few MiB on heatmap68's
# 12 MiB is -40 % and no user's wrong answer); a row past both is past the bar.
RELATIVE_BAR = 0.15
ABSOLUTE_BAR_BYTES = 8 * 2**20
UNSAFE_SHORTFALL = 0.02  # below the measured peak by more than this: unsafe (a limit set by it runs out of memory)
MARGIN_QUANTILE = 0.95  # the margin covers this share of the held-out half's shortfalls


@dataclass(frozen=True)
class Row:
    framework: str
    model: str
    kind: str
    phase: str
    view: str
    source: str  # "footprint" (this suite's estimate) or "framework" (its own: memory_analysis, mem_tracker)
    measured: int
    estimate: int
    error: float
    technique: str = "none"
    half: str = zoo_split.HELD_OUT
    net: str = ""  # the net's name in the split: a model file's stem (two files may hold models of one name)
    size: int | None = None  # the input's height in pixels (None: a record older than the field)

    @property
    def miss(self) -> int:
        """The estimate's bytes beyond the measured (negative: short of it), the sign the relative error has."""
        return self.estimate - self.measured

    @property
    def within_bar(self) -> bool:
        return abs(self.error) <= RELATIVE_BAR or abs(self.miss) <= ABSOLUTE_BAR_BYTES

    def unsafe(self, margin: float = 0.0) -> bool:
        """Whether the estimate, grown by `margin`, is still below the measured peak by more than 2 %."""
        return self.estimate * (1 + margin) < self.measured * (1 - UNSAFE_SHORTFALL)


def rows(run: dict, phases: Iterable[str] = ()) -> list[Row]:
    """Every compared phase and view (`phases`: those only); a framework run in a mode other than its default is
    named with the mode (`torch compile`): the rules describe the default mode, and the error per mode shows what
    compiling changes."""
    found = []
    for record in run["records"]:
        scenario = record["scenario"]
        if scenario["model"] in PROBES:
            continue
        execution = scenario.get("execution", executions.DEFAULT)
        framework = scenario["framework"] + ("" if execution == executions.DEFAULT
                                             else f" {executions.resolve(scenario['framework'], execution)}")
        net = zoo_split.net_of(scenario)
        size = (record["model"].get("input_shape") or [None])[0]
        for phase, views in record.get("comparison", {}).items():
            if phases and phase not in phases:
                continue
            for view, figures in views.items():
                for source, key in (("footprint", ""), ("framework", "framework_")):
                    if figures.get(f"{key}relative_error") is not None:
                        found.append(Row(framework, scenario["model"], scenario["kind"], phase, view,
                                         source, figures["measured"], figures[f"{key}estimate"],
                                         figures[f"{key}relative_error"], scenario.get("technique", "none"),
                                         zoo_split.half_of(net), net, size))
    return found


def quantile(values: list[float], share: float) -> float:
    """The `share` quantile of `values`, interpolated between the two nearest (one value: itself)."""
    ordered = sorted(values)
    position = share * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def margin(found: list[Row]) -> float:
    """The headroom that keeps the estimate above the measured peak in `MARGIN_QUANTILE` of `found`: that quantile
    of the shortfalls (measured / estimate - 1), none where the estimate is high enough already."""
    return max(0.0, quantile([row.measured / row.estimate - 1 for row in found if row.estimate > 0], MARGIN_QUANTILE))


def summary(found: list[Row]) -> dict[tuple[str, str, str], dict]:
    """(framework, view, source) -> n, the median, 90th percentile and largest absolute relative error, the worst
    row, the unsafe rate (`Row.unsafe`) and how many rows are past the bar (`Row.within_bar`)."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in found:
        groups.setdefault((row.framework, row.view, row.source), []).append(row)
    result = {}
    for key, group in sorted(groups.items()):
        worst = max(group, key=lambda row: abs(row.error))
        sizes = [abs(row.error) for row in group]
        result[key] = {"n": len(group), "median": statistics.median(sizes), "p90": quantile(sizes, 0.9),
                       "max": abs(worst.error), "worst": worst,
                       "unsafe": sum(row.unsafe() for row in group) / len(group),
                       "past_bar": sum(not row.within_bar for row in group)}
    return result


def of_run(run: dict, phases: Iterable[str] = ()) -> dict[tuple[str, str, str], dict]:
    """The summary of a run file read again with today's rules (`accounting.reaccount`)."""
    return summary(rows({"records": accounting.reaccount(run)}, phases))


def _input(size: int | None) -> str:
    return "-" if size is None else f"{size} px"


def table(runs: list[tuple[str, dict]], phases: Iterable[str] = ()) -> str:
    """One Markdown row per run file, framework, view, half of the zoo's split and input size (an estimate judged
    at the size users train is judged apart from one at the zoo's small size): the phases compared, the median,
    90th percentile and worst error, the unsafe rate, the worst's miss in MiB and where it is, and how many phases
    are past the bar (this suite's estimate; the frameworks' own follow where they have one)."""
    lines = ["| run | framework | view | estimate | half | input | phases | median error | p90 error | worst error "
             f"| unsafe | worst miss (MiB) | worst at | past {RELATIVE_BAR:.0%} and {ABSOLUTE_BAR_BYTES >> 20} MiB |",
             "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name, run in runs:
        found = rows({"records": accounting.reaccount(run)}, phases)
        sizes = sorted({row.size for row in found}, key=lambda size: (size is None, size or 0))
        for half in zoo_split.HALVES:
            for size in sizes:
                group = [row for row in found if row.half == half and row.size == size]
                for (framework, view, source), figures in summary(group).items():
                    worst = figures["worst"]
                    lines.append(f"| {name} | {framework} | {view} | {source} | {half} | {_input(size)} | "
                                 f"{figures['n']} | {figures['median']:.1%} | {figures['p90']:.1%} | "
                                 f"{worst.error:+.1%} | {figures['unsafe']:.0%} | {worst.miss / 2**20:+,.1f} | "
                                 f"{worst.model} {worst.kind}"
                                 f"{'' if worst.technique == 'none' else ' ' + worst.technique} {worst.phase} | "
                                 f"{figures['past_bar']} |")
    return "\n".join(lines)
