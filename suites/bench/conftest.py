"""pytest plumbing for the suites: the device banner, one line per scenario, the run files."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from suites.run import device, executors
from suites.run.orchestrator import DEFAULT_TIMEOUT_S
from suites.run.runfile import RunFile, identity


def pytest_report_header(config: pytest.Config) -> str:
    return f"footprint device: {device.describe(device.resolve(os.environ.get('FOOTPRINT_DEVICE', 'auto')))}"


def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple | None:
    """Shows each scenario's status and peak in place of PASSED."""
    line = dict(report.user_properties).get("footprint")
    if report.when == "call" and line:
        return report.outcome, "." if report.passed else "F", (line, {"green": report.passed, "red": report.failed})
    return None


class RunFiles:
    """The session's run files, one per suite and device, opened when a scenario first needs one."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.files: dict[tuple[str, str], RunFile] = {}

    def __call__(self, suite: str, resolved_device: str) -> RunFile:
        if (suite, resolved_device) not in self.files:
            self.files[suite, resolved_device] = run = RunFile(suite, resolved_device)  # --fresh: set aside already
            run.data["benchmark_machine_info"] = self.config.hook.pytest_benchmark_generate_machine_info(
                config=self.config)
        return self.files[suite, resolved_device]

    def keep(self, record: dict) -> None:
        """A record measured but not yet asked for when the run stopped, into the run file that asked for it."""
        key = identity(record["scenario"])
        for run in self.files.values():
            if key in run.requested:
                run.add(record)


@pytest.fixture(scope="session")
def run_files(pytestconfig: pytest.Config) -> Iterator[RunFiles]:
    files = RunFiles(pytestconfig)
    yield files
    for run in files.files.values():
        run.finish()


@pytest.fixture(scope="session")
def executor(run_files: RunFiles) -> Iterator[executors.Sequential]:
    """The executor `python -m suites bench` asked for (--executor, --jobs, --address), for the whole session. A
    stop keeps the records of scenarios that finished before it (`close`), though the suite had not reached them."""
    chosen = executors.create(os.environ.get("FOOTPRINT_EXECUTOR") or "local",
                              float(os.environ.get("FOOTPRINT_TIMEOUT") or DEFAULT_TIMEOUT_S),
                              int(os.environ.get("FOOTPRINT_JOBS") or 1), os.environ.get("FOOTPRINT_ADDRESS") or None,
                              os.environ.get("FOOTPRINT_OVERLAP", "1") == "1")
    try:
        yield chosen
    finally:
        for record in chosen.close():
            run_files.keep(record)
