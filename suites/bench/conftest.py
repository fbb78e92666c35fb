"""pytest plumbing for the suites: the device banner, one line per scenario, the run files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

import pytest

from suites.run import device, executors
from suites.run.orchestrator import DEFAULT_TIMEOUT_S
from suites.run.runfile import RunFile


def pytest_report_header(config: pytest.Config) -> str:
    return f"footprint device: {device.describe(device.resolve(os.environ.get('FOOTPRINT_DEVICE', 'auto')))}"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple | None:
    """Shows each scenario's status and peak in place of PASSED."""
    line = dict(report.user_properties).get("footprint")
    if report.when == "call" and line:
        return report.outcome, "." if report.passed else "F", (line, {"green": report.passed, "red": report.failed})
    return None


@pytest.fixture(scope="session")
def run_files(pytestconfig: pytest.Config) -> Iterator[Callable[[str, str], RunFile]]:
    files: dict[tuple[str, str], RunFile] = {}

    def run_file(suite: str, resolved_device: str) -> RunFile:
        if (suite, resolved_device) not in files:
            fresh = bool(os.environ.get("FOOTPRINT_FRESH"))  # python -m suites bench --fresh
            files[suite, resolved_device] = run = RunFile(suite, resolved_device, fresh=fresh)
            machine = pytestconfig.hook.pytest_benchmark_generate_machine_info(config=pytestconfig)
            run.data["benchmark_machine_info"] = machine
        return files[suite, resolved_device]

    yield run_file
    for run in files.values():
        run.finish()


@pytest.fixture(scope="session")
def executor() -> Iterator[executors.Sequential]:
    """The executor `python -m suites bench` asked for (--executor, --jobs, --address), for the whole session."""
    chosen = executors.create(os.environ.get("FOOTPRINT_EXECUTOR") or "local",
                              float(os.environ.get("FOOTPRINT_TIMEOUT") or DEFAULT_TIMEOUT_S),
                              int(os.environ.get("FOOTPRINT_JOBS") or 1), os.environ.get("FOOTPRINT_ADDRESS") or None)
    try:
        yield chosen
    finally:
        chosen.close()
