"""What a person reads in a terminal: one scenario's phases as a table, and a suite's scenarios one line each.

The JSON record stays the source (`run --json`, `--out`, the run file); these only choose what to show.
"""

from __future__ import annotations

from models.record import phase
from models.scenario import Scenario
from suites.analysis.figures import driver_peak, mib, need, peaks


def _error(record: dict, name: str) -> str:
    figures = record.get("comparison", {}).get(name, {}).get("driver", {})
    return "-" if figures.get("relative_error") is None else f"{figures['relative_error']:+.1%}"


def phase_table(record: dict) -> str:
    """Per phase: what the process held, what the model needed, the estimate's error (driver's view), seconds."""
    scenario = Scenario.from_dict(record["scenario"])
    failure = record.get("failure") or {}
    lines = [f"{scenario.label}: {record['status']}"
             + (f" in {failure['phase']}" if failure.get("phase") else "")
             + (f": {failure['message']}" if failure.get("message") else ""),
             f"{'phase':<14}{'holds MiB':>12}{'needs MiB':>12}{'estimate error':>16}{'seconds':>10}"]
    for name in scenario.phases:
        measured = phase(record, name)
        if measured is None:
            lines.append(f"{name:<14}{'not reached':>12}")
            continue
        holds = driver_peak(measured, scenario.device)[0]
        lines.append(f"{name:<14}{mib(holds):>12}{mib(need(record, name)[0]):>12}{_error(record, name):>16}"
                     f"{measured['seconds']:>10.2f}")
    lines.append("holds: " + ("NVML's figure for the worker's processes" if scenario.device == "cuda"
                              else "host RSS of the worker (VmHWM, its processes added)")
                 + "; needs: the allocator's own peak in the phase; error: the estimate against the rise above "
                   "the context")
    return "\n".join(lines)


def one_line(record: dict) -> str:
    """One scenario's line: status, the highest phase the process held and the most the model needed, the time."""
    status = record["status"]
    if status == "unavailable":
        return f"unavailable here: {record['failure']['message']}"
    text = status.upper() if status != "ok" else "ok"
    if record["failure"]:
        text += f" in {record['failure']['phase']}"
    for what, peak in zip(("holds", "needs"), peaks(record), strict=True):
        if peak:
            text += f"  {what} {mib(peak[0])} MiB ({peak[1]})"
    return f"{text}  {record['run']['wall_seconds']:.1f} s"

