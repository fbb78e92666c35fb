"""Turns a suite's scenarios into pytest-benchmark tests: one fresh worker per test.

Each test records its scenario in the suite's run file whatever the outcome; it fails only
when the worker ended in `error` or `crashed` for no known cause (suites.known), which needs a look.
`oom` and `timeout` are results.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from models.record import phase
from models.scenario import Scenario
from suites import constants
from suites.figures import driver_peak, need
from suites.run.orchestrator import accounted
from suites.run.runfile import identity

NEEDS_A_LOOK = ("error", "crashed")


def summary(record: dict) -> str:
    """One progress line: status, the highest phase the process held and the most the model needed, the time."""
    status = record["status"]
    if status == "unavailable":
        return f"unavailable here: {record['failure']['message']}"
    text = status.upper() if status != "ok" else "ok"
    if record["failure"]:
        text += f" in {record['failure']['phase']}"
    for what, figure in (("holds", lambda name: driver_peak(phase(record, name), record["scenario"]["device"])[0]),
                         ("needs", lambda name: need(record, name)[0])):
        peaks = [(figure(p["name"]), p["name"]) for p in record["phases"] if figure(p["name"]) is not None]
        if peaks:
            peak, name = max(peaks)
            text += f"  {what} {peak / 2**30:.2f} GiB ({name})"
    return f"{text}  {record['run']['wall_seconds']:.1f} s"


def scenario_id(scenario: Scenario) -> str:
    """framework-model-kind, then whatever differs from the defaults, for `pytest -k`."""
    framework, *extras = scenario.variant_parts
    return "-".join([framework, scenario.model, scenario.kind, *extras])


def scenario_benchmark(suite: str, scenarios: list[Scenario]) -> Callable:
    requested = {identity(scenario.to_dict()): scenario.to_dict() for scenario in scenarios}

    resume = bool(os.environ.get("FOOTPRINT_RESUME"))
    started: list[bool] = []

    @pytest.mark.parametrize("scenario", scenarios, ids=[scenario_id(s) for s in scenarios])
    def test_scenario(benchmark, scenario: Scenario, record_property, run_files, executor) -> None:  # noqa: ANN001
        run = run_files(suite, scenario.device)
        run.request(requested)
        if not started:  # the executor is told the whole suite first, so a concurrent one can work ahead
            executor.start([s for s in scenarios if not (resume and run.has_ok(s))])
            run.data["executor"] = executor.describe()
            started.append(True)
        if resume and run.has_ok(scenario):
            pytest.skip("already ok in the run file (--resume)")
        benchmark.group = f"{scenario.model} {scenario.kind} ({scenario.device})"
        record = benchmark.pedantic(executor.result, args=(scenario,), rounds=1, iterations=1)
        if executor.concurrency > 1 and scenario.model not in constants.PROBES:
            record = accounted(record)  # measured beside the probes: estimated with the constants they gave
        run.add(record)
        if run.write_failure:  # said in one line by the run file; what was measured before stays
            pytest.exit(run.write_failure, returncode=1)
        if scenario.model in constants.PROBES:
            constants.update(record)
        benchmark.extra_info["record"] = record
        record_property("footprint", summary(record))
        if record["status"] in NEEDS_A_LOOK and not record["failure"].get("known_cause"):
            pytest.fail(f"{scenario.label}: {record['status']}: {record['failure']}", pytrace=False)

    return test_scenario
