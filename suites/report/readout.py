"""What a person reads in a terminal: one scenario's phases as a table, and a suite's scenarios one line each.

The JSON record stays the source (`run --json`, `--out`, the run file); these only choose what to show.
"""

from __future__ import annotations

from models import executions
from models.record import phase, worker_seconds
from models.scenario import Scenario
from suites.analysis import figures
from suites.analysis.explain import wrap
from suites.analysis.figures import driver_peak, mib, need, peaks


def _modelled(scenario: Scenario) -> bool:
    """Whether the rules model the scenario's execution: its framework's default (what the constants' probes ran),
    or the mode Keras's default becomes on its device; compiled or op-by-op code otherwise is not modelled."""
    return scenario.execution_mode in (executions.resolve(scenario.framework, executions.DEFAULT),
                                       executions.auto_means(scenario.framework, scenario.device))


def label(scenario: Scenario) -> str:
    """The scenario's label as a person reads it: an inference scenario has no optimizer (Scenario.label keeps the
    unused field, since stores and comparisons key on it)."""
    if scenario.kind == "train":
        return scenario.label
    return scenario.label.replace(f" b{scenario.batch} {scenario.optimizer} ", f" b{scenario.batch} ", 1)


NEEDS_A_LOOK = ("error", "crashed")  # oom and timeout are results


def needs_a_look(record: dict) -> bool:
    """Whether a scenario failed as the bench counts it: `error` or `crashed` for no known cause
    (suites.run.known)."""
    return record["status"] in NEEDS_A_LOOK and not (record.get("failure") or {}).get("known_cause")


def failure_line(record: dict) -> str:
    """The status, the phase it ended in and the failure's one-line message."""
    failure = record.get("failure") or {}
    return (record["status"] + (f" in {failure['phase']}" if failure.get("phase") else "")
            + (f": {failure['message']}" if failure.get("message") else ""))


def frame_lines(failure: dict | None, indent: str = "    ") -> list[str]:
    """A failure's frames (`failure.frames`, innermost last), a line each (wrapped to a terminal's width), to show
    under its message: where it was raised. None where the orchestrator named the failure (a kill, a timeout) or the
    record is older."""
    return [line for frame in (failure or {}).get("frames") or [] if isinstance(frame, dict)
            for line in wrap(f"at {frame.get('file')}:{frame.get('line')} in {frame.get('function')}"
                             + (f": {frame['code']}" if frame.get("code") else ""), indent)]


def phase_table(record: dict) -> str:
    """Per phase: what the process held, what the model needed, how far that rose above the context phase (the
    driver's view), the estimate of that rise and its error, seconds; then what each column is, and where the
    error is not the rules' (a mode they do not model, a pool that fills the driver's figures)."""
    scenario = Scenario.from_dict(record["scenario"])
    failure = record.get("failure") or {}
    star, starred = "" if _modelled(scenario) else "*", False
    lines = [*wrap(f"{label(scenario)}: {failure_line(record)}"),
             *frame_lines(failure),
             f"{'phase':<14}{'holds MiB':>11}{'needs MiB':>11}{'rise MiB':>10}{'estimate MiB':>14}"
             f"{'error vs rise':>15}{'seconds':>9}"]
    for name in scenario.phases:
        measured = phase(record, name)
        if measured is None:  # the phase it failed in says how, as the line above does
            lines.append(f"{name:<14}{record['status'] if name == failure.get('phase') else 'not reached':>11}")
            continue
        driver = record.get("comparison", {}).get(name, {}).get("driver", {})
        error = driver.get("relative_error")
        shown = "-" if error is None else f"{error:+.1%}{star}"
        starred |= shown.endswith("*")
        lines.append(f"{name:<14}{mib(driver_peak(measured, scenario.device)[0]):>11}{mib(need(record, name)[0]):>11}"
                     f"{mib(driver.get('measured')):>10}{mib(driver.get('estimate')):>14}{shown:>15}"
                     f"{measured['seconds']:>9.2f}")
    said = ["holds: " + ("NVML's figure for the worker's processes" if scenario.device == "cuda"
                         else "host RSS of the worker (VmHWM, its processes added)")
            + "; needs: the allocator's own peak in the phase; rise: holds less the context phase's (the driver's "
              "view); estimate: the rules' tensors and the measured runtime overhead, of that rise; error vs rise: "
              "(estimate - rise) / rise"]
    if missing := figures.no_allocator_figures(record):
        said.append(f"needs {missing}")
    if figures.preallocated(record):
        said.append("no rise: a pool mapped when the device started fills the driver's figures")
    if starred:
        said.append(f"*: the rules, and the probes that gave the constants, are {scenario.framework}'s default "
                    f"execution ({executions.resolve(scenario.framework, executions.DEFAULT)}); the estimate does not "
                    f"model {scenario.execution_mode}: its error here is what the mode changes, not the rules' error")
    return "\n".join([*lines, *(line for text in said for line in wrap(text))])


def one_line(record: dict) -> str:
    """One scenario's line: status, the highest phase the process held and the most the model needed, the time its
    worker took (less its wait at its gate)."""
    status = record["status"]
    if status == "unavailable":
        return f"unavailable here: {record['failure']['message']}"
    text = status.upper() if status != "ok" else "ok"
    if record["failure"]:
        text += f" in {record['failure']['phase']}"
    for what, peak in zip(("holds", "needs"), peaks(record), strict=True):
        if peak:
            text += f"  {what} {mib(peak[0])} MiB ({peak[1]})"
    return f"{text}  {worker_seconds(record):.1f} s"

