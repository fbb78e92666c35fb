"""`python -m suites bench`: checks the selection, runs the suite under pytest, renders the report."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pytest

from models.protocol import COMPILE_CACHE_VARIABLE
from suites.bench.matrix import batch_grid, search_bound, size, suite_settings, technique_filter
from suites.report import summary
from suites.report.render import render
from suites.run import device, executors, interrupts, runfile
from suites.run.orchestrator import FOLDER_PREFIX
from suites.run.registry import ROOT, interpreter
from suites.run.runfile import run_path


def run_suite(suite: str, requested_device: str, frameworks: str, models: str, timeout: float,
              start: str = "merge", engine: str = "local", jobs: int = 1, address: str = "", batches: str = "",
              max_batch: int | None = None, techniques: str = "", overlap: bool = True) -> int:
    """`start`: merge (add or replace this run's scenarios in the run file), resume (also skip those already
    ok) or fresh (start the run file over). `engine`, `jobs`, `address`, `overlap`: suites.run.executors."""
    executors.check(engine, jobs, address)
    os.environ.update({"FOOTPRINT_FRAMEWORKS": frameworks, "FOOTPRINT_MODELS": models,
                       "FOOTPRINT_DEVICE": device.resolve(requested_device), "FOOTPRINT_TIMEOUT": str(timeout),
                       "FOOTPRINT_RESUME": "1" if start == "resume" else "",
                       "FOOTPRINT_EXECUTOR": engine, "FOOTPRINT_JOBS": str(jobs), "FOOTPRINT_ADDRESS": address,
                       "FOOTPRINT_BATCHES": batches,
                       "FOOTPRINT_MAX_BATCH": "" if max_batch is None else str(max_batch),
                       "FOOTPRINT_TECHNIQUES": techniques, "FOOTPRINT_OVERLAP": "1" if overlap else ""})
    parts, chosen, _, resolved = suite_settings(suite)  # bad input fails here, before anything runs
    batch_grid(parts)
    search_bound(suite)
    technique_filter(parts)
    for framework in chosen:
        interpreter(framework, resolved)
    path = run_path(suite, resolved)
    runfile.lock(path)  # a second run on the same file is refused here, in one line
    if start == "fresh":
        for kept in runfile.set_aside(path):
            print(f"footprint: --fresh: the run starts over; what was there is kept as {kept}", flush=True)
    runfile.earlier_run(path, suite, resolved)  # one that must not be written over is refused here, in one line
    runfile.stored_records(path)  # what is no record is quarantined here, where its line is seen
    print(f"footprint: suite {suite}, {size(suite)} on {device.describe(resolved)}", flush=True)
    started = time.time()
    # the bench's compilation cache, its scenarios' one shared thing (orchestrator.set_variables), named as the
    # orchestrator's worker folders are: where this process is killed outright, a later run removes it
    cache = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-compiled")
    os.environ[COMPILE_CACHE_VARIABLE] = cache
    try:
        # pytest-benchmark runs each scenario once and prints no seconds table: the memory lines below replace it
        code = pytest.main([str(ROOT / "suites" / "bench" / f"bench_{suite}.py"), "-v", "-p", "no:cacheprovider",
                            "--benchmark-disable", "-W", "ignore::DeprecationWarning"])
    finally:
        shutil.rmtree(cache, ignore_errors=True)
        del os.environ[COMPILE_CACHE_VARIABLE]
    if path.exists():
        run = runfile.load(path)
        print(summary.tables(run), flush=True)
        warning = cuda_build_warning(_ours(run, started))
        if warning:
            print(warning, file=sys.stderr, flush=True)
        _report(path)
        code = code or _nothing_measured(run, started)
    if interrupts.received:  # pytest ended the suite at the signal; the run file says it is incomplete
        print(f"footprint: stopped by {interrupts.received[0]}; the run is incomplete (--resume goes on)", flush=True)
        return interrupts.EXIT_CODE
    return int(code)


def _report(path: Path) -> None:
    """The report beside the run file; a disk that filled says so in one line (the run file holds the records)."""
    try:
        written = render(path)
    except OSError as error:
        print(f"footprint: error: cannot write the report: {error.strerror or error}; the records are in "
              f"{path.name} (python -m suites report renders it later)", file=sys.stderr, flush=True)
        return
    for name in (path, *written):
        print(f"footprint: wrote {name.relative_to(ROOT) if name.is_relative_to(ROOT) else name}")


def _ours(run: dict, started: float) -> list[dict]:
    """This bench's records: a run file keeps earlier benches' too."""
    return [record for record in run["records"] if record.get("run", {}).get("started_at_unix", 0) >= started]


def cuda_build_warning(records: list[dict]) -> str | None:
    """One line for the bench where torch is a CUDA build measuring on the CPU (the record's `cuda_build_on_cpu`,
    frameworks/torch_adapter.py): otherwise only `compare` against a CPU build's run says so."""
    found = {record["scenario"]["framework"]: record["framework"]["versions"] for record in records
             if "cuda_build_on_cpu" in record.get("framework", {}).get("versions", {})}
    if not found:
        return None
    versions = next(iter(found.values()))
    return (f"footprint: warning: {', '.join(sorted(found))}: torch {versions['torch']} is a CUDA build measuring on "
            f"the CPU: {versions['cuda_build_on_cpu']}; the tox envs pin the +cpu build (README.md)")


def _nothing_measured(run: dict, started: float) -> int:
    """1 where this run's scenarios all ended without a measurement (every one timed out, say): they stay results
    in the run file, but a suite that measured nothing must not exit as a success. Fit answers count as measured."""
    ours = [record for record in _ours(run, started) if record["status"] != "unavailable"]
    answered = [result for result in run.get("fits", []) if result.get("answer") not in (None, "unknown")]
    if not ours or answered or any(record["status"] == "ok" for record in ours):
        return 0
    statuses = sorted({record["status"] for record in ours})
    print(f"footprint: error: nothing was measured: all {len(ours)} scenarios of this run ended "
          f"{' or '.join(statuses)} (their records are in the run file)", file=sys.stderr, flush=True)
    return 1
