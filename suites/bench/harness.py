"""Turns a suite's scenarios into pytest-benchmark tests: one fresh worker per test.

Each test records its scenario in the suite's run file whatever the outcome; it fails only
when the worker ended in `error` or `crashed` for no known cause (suites.run.known), which needs a look.
`oom` and `timeout` are results.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

from models.scenario import Scenario
from suites.report import readout
from suites.run.runfile import identity


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
        run.add(record)
        if run.write_failure:  # said in one line by the run file; what was measured before stays
            pytest.exit(run.write_failure, returncode=1)
        benchmark.extra_info["record"] = record
        record_property("footprint", readout.one_line(record))
        if readout.needs_a_look(record):
            pytest.fail("\n".join([f"{scenario.label}: {readout.failure_line(record)}",
                                   *readout.frame_lines(record["failure"])]), pytrace=False)

    return test_scenario
