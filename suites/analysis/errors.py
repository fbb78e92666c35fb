"""The estimate's error over a run: one row per phase and view, and the median and max per framework.

The probe records are left out: their constants were taken from themselves, so their error is zero by
construction and would flatter the figures. `table` is what `python -m suites errors RUN.json...` prints and
docs/findings.md's table of errors is: each run file read again with today's rules and its own probes' constants.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from models import executions
from suites.analysis import accounting
from suites.analysis.constants import PROBES

VIEW_NAMES = {"driver": "rise above the context (driver's view)", "allocator": "allocator's peak"}
# A miss is judged as a user reads it: relative for a large need, absolute for a small one (a few MiB on heatmap68's
# 12 MiB is -40 % and no user's wrong answer); a row past both is past the bar.
RELATIVE_BAR = 0.15
ABSOLUTE_BAR_BYTES = 8 * 2**20


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

    @property
    def miss(self) -> int:
        """The estimate's bytes beyond the measured (negative: short of it), the sign the relative error has."""
        return self.estimate - self.measured

    @property
    def within_bar(self) -> bool:
        return abs(self.error) <= RELATIVE_BAR or abs(self.miss) <= ABSOLUTE_BAR_BYTES


def rows(run: dict) -> list[Row]:
    """Every compared phase and view; a framework run in a mode other than its default is named with the mode
    (`torch compile`): the rules describe the default mode, and the error per mode shows what compiling changes."""
    found = []
    for record in run["records"]:
        scenario = record["scenario"]
        if scenario["model"] in PROBES:
            continue
        execution = scenario.get("execution", executions.DEFAULT)
        framework = scenario["framework"] + ("" if execution == executions.DEFAULT
                                             else f" {executions.resolve(scenario['framework'], execution)}")
        for phase, views in record.get("comparison", {}).items():
            for view, figures in views.items():
                for source, key in (("footprint", ""), ("framework", "framework_")):
                    if figures.get(f"{key}relative_error") is not None:
                        found.append(Row(framework, scenario["model"], scenario["kind"], phase, view,
                                         source, figures["measured"], figures[f"{key}estimate"],
                                         figures[f"{key}relative_error"], scenario.get("technique", "none")))
    return found


def summary(found: list[Row]) -> dict[tuple[str, str, str], dict]:
    """(framework, view, source) -> n, median and max of the absolute relative error, the worst row, and how many
    rows are past the bar (`Row.within_bar`)."""
    groups: dict[tuple[str, str, str], list[Row]] = {}
    for row in found:
        groups.setdefault((row.framework, row.view, row.source), []).append(row)
    result = {}
    for key, group in sorted(groups.items()):
        worst = max(group, key=lambda row: abs(row.error))
        result[key] = {"n": len(group), "median": statistics.median(abs(row.error) for row in group),
                       "max": abs(worst.error), "worst": worst,
                       "past_bar": sum(not row.within_bar for row in group)}
    return result


def of_run(run: dict) -> dict[tuple[str, str, str], dict]:
    """The summary of a run file read again with today's rules (`accounting.reaccount`)."""
    return summary(rows({"records": accounting.reaccount(run)}))


def table(runs: list[tuple[str, dict]]) -> str:
    """One Markdown row per run file, framework and view: the phases compared, median and worst error, the worst's
    miss in MiB and where it is, and how many phases are past the bar (this suite's estimate; the frameworks' own
    follow where they have one)."""
    lines = ["| run | framework | view | estimate | phases | median error | worst error | worst miss (MiB) | worst at "
             f"| past {RELATIVE_BAR:.0%} and {ABSOLUTE_BAR_BYTES >> 20} MiB |",
             "|---|---|---|---|---:|---:|---:|---:|---|---:|"]
    for name, run in runs:
        for (framework, view, source), figures in of_run(run).items():
            worst = figures["worst"]
            lines.append(f"| {name} | {framework} | {view} | {source} | {figures['n']} | {figures['median']:.1%} | "
                         f"{worst.error:+.1%} | {worst.miss / 2**20:+,.1f} | {worst.model} {worst.kind}"
                         f"{'' if worst.technique == 'none' else ' ' + worst.technique} {worst.phase} | "
                         f"{figures['past_bar']} |")
    return "\n".join(lines)
