"""A scenario that raises, hangs, aborts or runs out of memory is a recorded result; the run goes on."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from frameworks.worker import AUTOTUNER_WARNING, compile_ahead, load_adapter
from models.protocol import HELPER_PREFIX
from models.scenario import Scenario
from suites.analysis import fit
from suites.run import interrupts, oom_kills
from suites.run.orchestrator import _outcome, _read_record, out_of_memory, run_scenario
from suites.run.registry import ROOT
from suites.run.runfile import RunFile, load
from tests.conftest import FRAMEWORKS, gone, workers_of

# 2**16 inputs x 2**20 units: 256 GiB of fp32 weights, far beyond this machine, so allocation really fails.
TOO_LARGE = {"name": "too-large", "input_shape": [65536], "loss": "mse",
             "layers": [{"type": "dense", "units": 1048576}]}
ALLOCATOR_LINES = Path(__file__).parent / "data" / "xla_allocator_lines.txt"  # real lines, with where each came from
# The hang's timeout counts the worker's start: its compile phase must begin well inside it, however loaded the
# machine (keras-small on torch reached it in 1.6-2.1 s on this 2-core box, 2.3-2.8 s beside two busy loops, 3.7-4.1 s
# beside four; the probe on torch in 7 s with the load average at 18). The test waits all of it, while the other
# scenarios run.
HANG_TIMEOUT_S = 20


def replayed(section: str) -> list[str]:
    """The lines under `[section]` in ALLOCATOR_LINES, word for word (not its comments or blank lines)."""
    lines, current = [], None
    for line in ALLOCATOR_LINES.read_text().splitlines():
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
        elif line.strip() and not line.startswith("#") and current == section:
            lines.append(line)
    return lines


def test_failures_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    run = RunFile("failures", "cpu", tmp_path / "run.json")
    faults = (("build:raise", 120), ("compile:hang", HANG_TIMEOUT_S), ("context:abort", 120), (None, 120))
    # one batch per fault: the run file keeps one record per scenario, and these are four
    scenarios = [Scenario.create("torch", "probe", kind="infer", device="cpu", batch=batch)
                 for batch in range(1, len(faults) + 1)]
    # two at once, as `bench --jobs 2` runs them: the hang, second, waits out its timeout in one thread while the
    # others run one after another in the other; the run takes the records in the order asked
    with ThreadPoolExecutor(2) as pool:
        measured = [pool.submit(run_scenario, scenario, timeout=timeout, fault=fault)
                    for scenario, (fault, timeout) in zip(scenarios, faults, strict=True)]
    for record in measured:
        run.add(record.result())
    run.finish()
    records = load(tmp_path / "run.json")["records"]
    assert [r["status"] for r in records] == ["error", "timeout", "crashed", "ok"]
    assert [r["failure"]["phase"] for r in records[:3]] == ["build", "compile", "context"]
    assert "injected fault in phase build" in records[0]["failure"]["message"]
    assert "SIGABRT" in records[2]["failure"]["message"]
    # what finished before each failure is kept
    assert [p["name"] for p in records[0]["phases"]] == ["import", "context"]
    assert [p["name"] for p in records[1]["phases"]] == ["import", "context", "build"]
    # ended at its timeout, not the hang's end (the upper bound a safety net: the kill takes well under a second)
    assert HANG_TIMEOUT_S <= records[1]["run"]["wall_seconds"] < 2 * HANG_TIMEOUT_S
    assert [p["name"] for p in records[3]["phases"]] == list(scenarios[-1].phases)


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
    ('{"status": "ok", "scenario": {}, "phases": "all"}', "the worker's record: its phases are a string, not a list"),
    ('{"status": "ok", "scenario": {}, "phases": [{"name": "build"}]}',
     "the worker's record: its phase 1 ('build') has no valid host, allocator, seconds, started_at, ended_at"),
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
        return run_scenario(scenario, timeout=600, fault="compile:allocator-oom")  # JAX reaches compile in 5-15 s

    answer = fit.find(Scenario.create("jax", "plain-8", kind="train", device="cpu"), budget, probe, max_batch=4)
    assert answer["answer"] == "does not fit" and answer["largest_batch"] is None, answer
    (first,) = answer["probes"]
    assert first["status"] == "oom" and first["why"] == "out of memory in compile", first


def test_an_allocator_warning_is_no_out_of_memory_live_or_after_the_end() -> None:
    """Every line the c3d4247 fit probes were ended on (XLA's autotuner asking for scratch it may be refused), the
    same warning in TensorFlow's words and CUDA's driver refusing a pool's growth: none ends a worker, and a worker
    that crashes after them crashed; it did not run out of memory. (A live worker that goes on past the warning's
    line: tests/test_faults.py's `autotuner_warning` row.)"""
    warnings = replayed("not out of memory")
    assert len(warnings) == 20 and AUTOTUNER_WARNING in warnings  # the fault's line is the run's, word for word
    for line in warnings:
        assert out_of_memory(line) is None and out_of_memory(HELPER_PREFIX + line) is None, line
    output = "\n".join(HELPER_PREFIX + line for line in warnings)
    for returncode in (1, -signal.SIGSEGV):
        assert _outcome({"current_phase": "context"}, returncode, False, output, 60, [])[::2] == ("crashed", "context")


def test_a_line_that_says_an_allocation_failed_for_good_is_an_out_of_memory_in_its_phase() -> None:
    """The BFC allocator's last word, XLA's and TensorFlow's RESOURCE_EXHAUSTED and TensorFlow's op error, each found
    after the warnings: the worker's own line names the worker's phase, the compile helper's names `compile`,
    whatever phase the worker has reached (the helper compiles before the device phases)."""
    fatal, warnings = replayed("out of memory"), replayed("not out of memory")
    assert len(fatal) == 12
    for line in fatal:
        assert out_of_memory("\n".join([*warnings, line, *warnings])) == (line.strip(), None), line
        helper_line = HELPER_PREFIX + line
        assert out_of_memory("\n".join([*warnings, helper_line])) == (helper_line.strip(), "compile"), line
        assert _outcome({"current_phase": "build"}, 1, False, line, 60, [])[::2] == ("oom", "build")
        assert _outcome({"current_phase": "import"}, -signal.SIGABRT, False, helper_line, 60, []) == (
            "oom", f"killed by SIGABRT after: {helper_line.strip()}", "compile")


def test_the_compile_helper_s_output_comes_through_the_worker_line_by_line_after_its_prefix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker writes each line of its compile helper's output, stdout and stderr, to its own after HELPER_PREFIX
    as the helper writes it (the orchestrator reads it live), a last line without its newline too, and still reports
    the helper's failure. The helper is a shell script standing in for this interpreter: the CPU's JAX helper has
    nothing to say."""
    fatal, go = replayed("out of memory")[0], tmp_path / "go"
    helper = tmp_path / "helper"
    helper.write_text(f"#!/bin/sh\necho \"$3 started\"\nprintf '%s\\n' '{fatal}' >&2\n"
                      f"while [ ! -e '{go}' ]; do sleep 0.05; done\nprintf 'no newline'\nexit 3\n")
    helper.chmod(0o755)
    adapter = load_adapter(Scenario.create("jax", "plain-8", kind="train", device="cuda"))  # a GPU's: it compiles ahead
    for name in adapter.cache_environment(""):
        monkeypatch.setenv(name, "")  # so that the variables compile_ahead sets are undone after the test
    output = io.StringIO()  # the worker's stderr
    monkeypatch.setattr(sys, "executable", str(helper))
    monkeypatch.setattr(sys, "stderr", output)
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(compile_ahead(adapter, str(tmp_path))()))
    thread.start()
    deadline = time.monotonic() + 60
    while f"{HELPER_PREFIX}{fatal}\n" not in output.getvalue() and time.monotonic() < deadline:
        time.sleep(0.05)
    streamed = output.getvalue()
    go.touch()
    thread.join(timeout=60)
    assert streamed == f"{HELPER_PREFIX}ahead started\n{HELPER_PREFIX}{fatal}\n", streamed  # while it still ran
    assert output.getvalue() == f"{streamed}{HELPER_PREFIX}no newline\n"
    assert result["exit_code"] == 3 and result["failure"] == "the compile helper failed in its start: exit status 3"


def test_a_stop_while_a_worker_starts_is_raised_once_it_is_registered() -> None:
    """SIGTERM inside `interrupts.deferred()` (where the orchestrator starts and registers a worker) is raised at its
    end, not in the middle, where a worker forked but not yet known would outlive the run."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    interrupts.install()
    reached = []
    try:
        with pytest.raises(interrupts.Interrupted, match="stopped by SIGTERM"):
            with interrupts.deferred():
                os.kill(os.getpid(), signal.SIGTERM)  # to this thread, handled before os.kill returns
                assert interrupts.received[-1:] == ["SIGTERM"]  # the handler has run: it must not have raised here
                reached.append(True)
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)
        interrupts.received.clear()
    assert reached == [True]
