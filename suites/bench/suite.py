"""`python -m suites bench`: checks the selection, runs the suite under pytest, renders the report."""

from __future__ import annotations

import os

import pytest

from suites.bench.matrix import batch_grid, size, suite_settings
from suites.report import summary
from suites.report.render import render
from suites.run import device, executors, interrupts, runfile
from suites.run.registry import ROOT, interpreter
from suites.run.runfile import run_path


def run_suite(suite: str, requested_device: str, frameworks: str, models: str, timeout: float,
              start: str = "merge", engine: str = "local", jobs: int = 1, address: str = "", batches: str = "") -> int:
    """`start`: merge (add or replace this run's scenarios in the run file), resume (also skip those already
    ok) or fresh (start the run file over). `engine`, `jobs`, `address`: suites.run.executors."""
    executors.check(engine, jobs, address)
    os.environ.update({"FOOTPRINT_FRAMEWORKS": frameworks, "FOOTPRINT_MODELS": models,
                       "FOOTPRINT_DEVICE": device.resolve(requested_device), "FOOTPRINT_TIMEOUT": str(timeout),
                       "FOOTPRINT_RESUME": "1" if start == "resume" else "",
                       "FOOTPRINT_FRESH": "1" if start == "fresh" else "",
                       "FOOTPRINT_EXECUTOR": engine, "FOOTPRINT_JOBS": str(jobs), "FOOTPRINT_ADDRESS": address,
                       "FOOTPRINT_BATCHES": batches})
    parts, chosen, _, resolved = suite_settings(suite)  # bad input fails here, before anything runs
    batch_grid(parts)
    for framework in chosen:
        interpreter(framework, resolved)
    runfile.lock(run_path(suite, resolved))  # a second run on the same file is refused here, in one line
    print(f"footprint: suite {suite}, {size(suite)} on {device.describe(resolved)}", flush=True)
    # pytest-benchmark runs each scenario once and prints no seconds table: the memory lines below replace it
    code = pytest.main([str(ROOT / "suites" / "bench" / f"bench_{suite}.py"), "-v", "-p", "no:cacheprovider",
                        "--benchmark-disable", "-W", "ignore::DeprecationWarning"])
    path = run_path(suite, resolved)
    if path.exists():
        print(summary.tables(runfile.load(path)), flush=True)
        for written in (path, *render(path)):
            print(f"footprint: wrote {written.relative_to(ROOT) if written.is_relative_to(ROOT) else written}")
    if interrupts.received:  # pytest ended the suite at the signal; the run file says it is incomplete
        print(f"footprint: stopped by {interrupts.received[0]}; the run is incomplete (--resume goes on)", flush=True)
        return interrupts.EXIT_CODE
    return int(code)
