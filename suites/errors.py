"""The estimate's error over a run: one row per phase and view, and the median and max per framework.

The probe records are left out: their constants were taken from themselves, so their error is zero by
construction and would flatter the figures.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from models import executions
from suites.constants import PROBES

VIEW_NAMES = {"driver": "rise above the context (driver's view)", "allocator": "allocator's peak"}


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
                                         figures[f"{key}relative_error"]))
    return found


def summary(found: list[Row]) -> dict[tuple[str, str, str], dict[str, float]]:
    """(framework, view, source) -> n, median and max of the absolute relative error."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for row in found:
        groups.setdefault((row.framework, row.view, row.source), []).append(abs(row.error))
    return {key: {"n": len(errors), "median": statistics.median(errors), "max": max(errors)}
            for key, errors in sorted(groups.items())}
