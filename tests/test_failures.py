"""A scenario that raises, hangs, aborts or runs out of memory is a recorded result; the run goes on."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from models.scenario import Scenario
from suites.analysis import fit
from suites.run import interrupts, oom_kills
from suites.run.orchestrator import _outcome, _read_record, run_scenario
from suites.run.registry import ROOT
from suites.run.runfile import RunFile, load
from tests.conftest import FRAMEWORKS, gone, workers_of

# 2**16 inputs x 2**20 units: 256 GiB of fp32 weights, far beyond this machine, so allocation really fails.
TOO_LARGE = {"name": "too-large", "input_shape": [65536], "loss": "mse",
             "layers": [{"type": "dense", "units": 1048576}]}


def test_failures_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    run = RunFile("failures", "cpu", tmp_path / "run.json")
    faults = (("build:raise", 120), ("compile:hang", 20), ("context:abort", 120), (None, 120))
    # one batch per fault: the run file keeps one record per scenario, and these are four
    for batch, (fault, timeout) in enumerate(faults, start=1):
        scenario = Scenario.create("torch", "keras-small", kind="infer", device="cpu", batch=batch)
        run.add(run_scenario(scenario, timeout=timeout, fault=fault))
    run.finish()
    records = load(tmp_path / "run.json")["records"]
    assert [r["status"] for r in records] == ["error", "timeout", "crashed", "ok"]
    assert [r["failure"]["phase"] for r in records[:3]] == ["build", "compile", "context"]
    assert "injected fault in phase build" in records[0]["failure"]["message"]
    assert "SIGABRT" in records[2]["failure"]["message"]
    # what finished before each failure is kept
    assert [p["name"] for p in records[0]["phases"]] == ["import", "context"]
    assert [p["name"] for p in records[1]["phases"]] == ["import", "context", "build"]
    assert records[1]["run"]["wall_seconds"] < 60
    assert [p["name"] for p in records[3]["phases"]] == list(scenario.phases)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_layer_too_large_for_the_machine_is_an_oom(framework: str, spec_file) -> None:  # noqa: ANN001
    scenario = Scenario.create(framework, model_file=str(spec_file(TOO_LARGE)), kind="infer", device="cpu")
    record = run_scenario(scenario, timeout=300)
    assert record["status"] == "oom", record["failure"]
    assert record["failure"]["phase"] == "build"
    assert [p["name"] for p in record["phases"]] == ["import", "context"]


def test_an_outside_kill_is_killed_not_oom_and_fit_cannot_answer() -> None:
    """The issue's case: `kill -9` of fit's worker from outside. Without an out-of-memory kill counted by the
    kernel it is `killed`, and fit answers unknown (exit 3), not "does not fit"."""
    command = [sys.executable, "-m", "suites", "fit", "--framework", "torch", "--model", "probe", "--budget", "4GiB",
               "--device", "cpu"]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as fit:
        workers_of(fit)[0].send_signal(signal.SIGKILL)
        output, errors = fit.communicate(timeout=120)
    assert fit.returncode == 3, output + errors
    assert "unknown: batch 1: killed in" in output
    assert "killed by SIGKILL from outside the suite, with no out-of-memory kill counted by the kernel" in output


def test_a_sigkill_is_oom_only_where_the_kernel_counted_an_out_of_memory_kill(tmp_path: Path) -> None:
    # a fake /proc: the kernel's counters cannot be made to rise here without running the machine out of memory
    (tmp_path / "vmstat").write_text("pgfault 10\noom_kill 3\n")
    before = oom_kills.counts(tmp_path)
    assert before == {"machine": 3}
    (tmp_path / "vmstat").write_text("pgfault 12\noom_kill 4\n")
    assert oom_kills.rose(before, oom_kills.counts(tmp_path)) == ["machine"]
    assert oom_kills.rose(before, before) == []
    assert oom_kills.counts(tmp_path / "absent") == {}  # no counter readable: no evidence, never an error
    record = {"current_phase": "build"}
    assert _outcome(record, -signal.SIGKILL, False, "", 60, ["machine"])[0] == "oom"
    assert _outcome(record, -signal.SIGKILL, False, "", 60, [])[0] == "killed"
    assert _outcome(record, -signal.SIGTERM, False, "", 60, [])[0] == "killed"
    assert _outcome(record, -signal.SIGSEGV, False, "", 60, [])[0] == "crashed"
    assert _outcome(record, -signal.SIGSEGV, False, "std::bad_alloc", 60, [])[0] == "oom"


@pytest.mark.parametrize("content, reason", [
    ("[1, 2]", "the worker's record is a JSON list, not an object"),
    ('{"status": "ok", "scenario": {}, "phases": "all"}', "the worker's record has no valid phases"),
    ('{"status": 3, "scenario": {}, "phases": []}', "the worker's record has no valid status"),
])
def test_a_record_of_the_wrong_shape_is_crashed_with_the_reason(content: str, reason: str, tmp_path: Path) -> None:
    (tmp_path / "record.json").write_text(content)
    scenario = Scenario.create("torch", "probe", device="cpu")
    record, fault = _read_record(tmp_path / "record.json", scenario)
    assert fault == reason and record["status"] == "running" and record["scenario"] == scenario.to_dict()


def test_sigterm_stops_a_run_kills_its_worker_and_exits_130(tmp_path: Path) -> None:
    out = tmp_path / "record.json"
    command = [sys.executable, "-m", "suites", "run", "--framework", "torch", "--model", "probe", "--device", "cpu",
               "--out", str(out)]
    with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as run:
        workers = workers_of(run)
        run.send_signal(signal.SIGTERM)
        _, errors = run.communicate(timeout=60)
    assert run.returncode == 130 and errors.strip() == "python -m suites: stopped by SIGTERM; the run is incomplete"
    assert workers and gone(workers)
    assert not out.exists()


def test_an_allocator_out_of_memory_ends_the_worker_as_oom_in_its_phase_not_at_its_timeout() -> None:
    """XLA's BFC allocator waits up to 10 s for each allocation once its pool is full, and a JAX worker under a fit
    budget waits that again for every array it dispatched (a fit probe ran past 100 s on the H100). The allocator's
    last word, then its waiting, is a FAKE here (the worker's `allocator-oom` fault): the CPU has no BFC pool."""
    budget = fit.parse_budget("2GiB")

    def probe(scenario: Scenario) -> dict:
        return run_scenario(scenario, timeout=120, fault="compile:allocator-oom")

    answer = fit.find(Scenario.create("jax", "plain-8", kind="train", device="cpu"), budget, probe, max_batch=4)
    assert answer["answer"] == "does not fit" and answer["largest_batch"] is None, answer
    (first,) = answer["probes"]
    assert first["status"] == "oom" and first["why"] == "out of memory in compile", first


def test_a_stop_while_a_worker_starts_is_raised_once_it_is_registered() -> None:
    """SIGTERM inside `interrupts.deferred()` (where the orchestrator starts and registers a worker) is raised at its
    end, not in the middle, where a worker forked but not yet known would outlive the run."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    interrupts.install()
    reached = []
    try:
        with pytest.raises(interrupts.Interrupted, match="stopped by SIGTERM"):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler has run by now: it must not have raised here
                reached.append(True)
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        interrupts.received.clear()
    assert reached == [True]
