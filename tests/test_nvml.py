"""NVML's windowing and PID logic, on hand-made sample series in NVML's shape (this machine has no GPU).

The series are fakes at the one boundary that cannot exist here, the driver; the real NvmlSource
is exercised by the calibration test on a GPU machine. The reading a worker asks for at each phase boundary goes
through the real pipes, a real worker and the real sampler, with only the driver faked.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable

import psutil
import pytest

from frameworks import worker
from models.record import SAMPLED_PEAK
from models.scenario import Scenario
from models.timeline import Timeline
from suites.run import nvml, orchestrator
from suites.run.nvml import Sample, Sampler, attribute, isolation
from suites.run.registry import ROOT

WORKER, HELPER, DESKTOP, HOST_PID = 4242, 4243, 100, 987654
MB = 10**6
HANG_S = 60  # bounds a wait only a hang reaches: what it bounds takes milliseconds


def _phases() -> list[dict]:
    return [{"name": "context", "started_at": 1.0, "ended_at": 2.0},
            {"name": "build", "started_at": 2.0, "ended_at": 3.0},
            {"name": "compile", "started_at": 3.0, "ended_at": 3.001}]


def _series(pids: tuple[int, ...]) -> list[Sample]:
    """Hand-made: the worker reaches 500 MB in context, 1,300 MB in build then drops to 900 MB."""
    own = [(1.0, 0), (1.5, 500), (1.9, 450), (2.2, 1300), (2.8, 900), (3.5, 900)]
    tree = frozenset({WORKER, HELPER})
    return [Sample(t, 250 * MB + used * MB, {pid: used * MB // len(pids) for pid in pids} | {DESKTOP: 250 * MB},
                   tree) for t, used in own]


BASELINE = Sample(0.5, 250 * MB, {DESKTOP: 250 * MB})


def test_process_peaks_are_the_maximum_inside_each_window() -> None:
    phases = _phases()
    summary = attribute(_series((WORKER, HELPER)), BASELINE, phases, read_seconds=0.003)
    context, build, compile_ = (p["nvml"] for p in phases)
    assert summary["view"] == "process"
    assert context["process_peak"] == {"bytes": 500 * MB, "semantics": SAMPLED_PEAK}
    assert context["process_end"]["bytes"] == 450 * MB
    assert build["process_peak"]["bytes"] == 1300 * MB and build["process_end"]["bytes"] == 900 * MB
    assert build["device_peak"]["bytes"] == 1550 * MB  # the desktop's 250 MB is in the device figure
    assert compile_ == {"samples": 0, "note": "no sample inside the phase: it was shorter than the interval"}
    assert summary["samples"] == 6 and summary["rate_hz"] == 2.0 and summary["read_cost_ms"] == 0.5
    # the timeline: every sample (fewer than the bound), the worker's tree and the device, in KiB from the first
    assert summary["timeline"]["points"][4] == [1800, 900 * MB // 1024, 1150 * MB // 1024]


def test_a_long_timeline_is_bounded_and_keeps_every_peak() -> None:
    timeline = Timeline(max_points=8)
    for step in range(100):
        timeline.add(step / 10, 1000 + (500 if step == 37 else step), 5)
    kept = timeline.to_dict(["a_kib", "b_kib"], 1)
    assert len(kept["points"]) < 8 and kept["samples_per_point"] == 16
    assert max(point[1] for point in kept["points"]) == 1500 and kept["points"][-1][1] == 1099  # the peaks survive


def test_another_process_at_the_start_is_a_warning() -> None:
    summary = attribute(_series((WORKER,)), BASELINE, _phases(), read_seconds=0.0)
    assert summary["other_processes_at_start"] == {DESKTOP: 250 * MB}
    assert any("when the run started" in warning for warning in summary["warnings"])
    assert summary["other_processes_during"] == []


def test_a_process_that_starts_during_the_run_is_marked() -> None:
    series = _series((WORKER,))
    series[3] = Sample(series[3].time, series[3].device_used, series[3].processes | {555: 64 * MB}, series[3].tree)
    summary = attribute(series, BASELINE, _phases(), read_seconds=0.0)
    assert summary["other_processes_during"] == [555]
    assert any("started on the GPU during the run" in warning for warning in summary["warnings"])


def test_in_a_container_the_device_figure_stands_in_and_says_so() -> None:
    phases = _phases()
    summary = attribute(_series((HOST_PID,)), BASELINE, phases, read_seconds=0.0)  # NVML shows the host's PID
    assert summary["view"].startswith("device")
    assert any(f"PIDs [{HOST_PID}] appeared" in warning for warning in summary["warnings"])
    assert "process_peak" not in phases[1]["nvml"]
    assert phases[1]["nvml"]["device_peak"]["bytes"] == 1550 * MB


def wait_for(condition: Callable[[], object], what: str) -> None:
    """Polls until `condition()` holds. The bound is a safety net against a hang: each wait here takes
    milliseconds (a tree refresh is TREE_REFRESH_S), so no speed of the machine decides the outcome."""
    deadline = time.monotonic() + HANG_S
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {HANG_S} s"
        time.sleep(0.01)


def test_sampler_follows_the_worker_and_its_children() -> None:
    replay = iter([(i * MB, {}) for i in range(10**6)])  # a fake driver: increasing device figures
    sampler = Sampler(lambda: next(replay), interval_s=0.001)
    hold, release = os.pipe()  # the worker's child (cat) lives until the test closes `release`, however long it takes
    worker = subprocess.Popen(["bash", "-c", f"cat <&{hold} & wait"], pass_fds=(hold,))
    os.close(hold)
    try:
        sampler.start(worker.pid)
        wait_for(lambda: len(sampler.samples) >= 2 and {pid for sample in sampler.samples for pid in sample.tree}
                 - {worker.pid}, "two samples, one with the worker's child (cat) in the tree")
    finally:
        os.close(release)
        samples = sampler.stop()
    worker.wait(HANG_S)
    assert [s.device_used for s in samples] == sorted(s.device_used for s in samples)
    assert all(earlier.time < later.time for earlier, later in zip(samples, samples[1:], strict=False))


def test_the_isolation_check_marks_other_processes_and_memory_above_its_baseline() -> None:
    uuid = "GPU-isolation-test"
    quiet = isolation(Sample(0.0, 600 * MB, {}), uuid)
    assert quiet["passed"] and quiet["lowest_used_bytes"] == 600 * MB
    busy = isolation(Sample(1.0, 900 * MB, {DESKTOP: 300 * MB}), uuid)
    assert not busy["passed"] and busy["reasons"] == [f"other compute processes on the GPU: PIDs [{DESKTOP}]",
                                                      f"used memory {300 * MB:,} bytes above its lowest reading"]
    assert isolation(Sample(2.0, 610 * MB, {}), uuid)["passed"]  # within the slack of the lowest reading


LONG_INTERVAL_S = 3600.0  # no periodic sample lands in a phase: every reading in one was asked for at its boundary
# The child waits up to HANG_S for each answer, not MARK_WAIT_S: whether the sampler answers, not how soon a loaded
# machine runs it, decides the test; within HANG_S, far below the interval, only an ask is answered. It asks once the
# test has seen the sampler's first (periodic) sample, which could otherwise be an ask's answer.
ASKING_WORKER = f"""
import json, sys, time
from frameworks import worker
worker.MARK_WAIT_S = {HANG_S}
readings = worker.DriverReadings()
sys.stdin.readline()
started_at = time.monotonic()
readings.take()
readings.take()
print(json.dumps([started_at, time.monotonic(), bool(readings.fds)]))
"""


def test_a_reading_asked_for_is_taken_at_once_inside_the_window_whatever_the_interval() -> None:
    """The worker's side (frameworks/worker.py DriverReadings) in a child process, through the real pipes: each
    ask is answered by a sample taken after it, long before the next periodic one."""
    sampler = Sampler(lambda: (7 * MB, {}), interval_s=LONG_INTERVAL_S)  # a FAKE driver
    environment = os.environ | sampler.open_marks()
    child = subprocess.Popen([sys.executable, "-c", ASKING_WORKER], cwd=ROOT, env=environment, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, pass_fds=sampler.worker_fds)
    sampler.close_worker_fds()
    sampler.start(child.pid)
    wait_for(lambda: sampler.samples, "the sampler's first sample")
    output, _ = child.communicate("go\n", timeout=3 * HANG_S)
    stopping = time.monotonic()
    samples = sampler.stop()
    assert time.monotonic() - stopping < HANG_S  # a stop does not wait out the interval
    started_at, ended_at, listening = json.loads(output)
    assert listening  # both asks answered: a worker that gets no answer stops listening
    assert len(samples) == 3 and sum(started_at <= s.time <= ended_at for s in samples) == 2


def test_a_worker_that_gets_no_answer_waits_a_bounded_time_once_and_never_again(
        capfd: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """An orchestrator whose sampler does not answer (here: nobody reads the pipe) costs the worker MARK_WAIT_S
    once; the phases go on without asking."""
    unread, ask = os.pipe()
    hear, silent = os.pipe()
    monkeypatch.setenv(worker.MARK_VARIABLE, f"{ask},{hear}")
    readings = worker.DriverReadings()
    assert worker.MARK_VARIABLE not in os.environ  # its children have no such pipes
    start = time.monotonic()
    readings.take()
    waited = time.monotonic() - start
    readings.take()
    os.set_blocking(unread, False)
    # waited for an answer, a bounded time (the upper bound a safety net), then gave up: the second take asked
    # nothing, so it waited for nothing
    assert worker.MARK_WAIT_S <= waited < HANG_S and os.read(unread, 64) == b"?"
    assert readings.fds == () and capfd.readouterr().err.count("not asking again") == 1
    os.close(unread)
    os.close(silent)


def test_a_settle_reads_until_the_figure_stops_moving_and_no_longer(monkeypatch: pytest.MonkeyPatch) -> None:
    """The context phase waits for NVML's figure to stop moving (a new context shows up to 20 ms late), not a fixed
    second: the sampler reads until SETTLE_READINGS in a row agree, then answers; a figure that never stops costs
    SETTLE_MAX_S at most. The worker's side is frameworks/worker.py DriverReadings, through the real pipes."""
    rising = iter(range(12))

    def context_appearing() -> tuple[int, dict[int, int]]:  # a FAKE driver: 12 readings rising, then still
        used = (100 + next(rising, 11)) * MB
        return used, {os.getpid(): used}

    for read, bound in ((context_appearing, nvml.SETTLE_MAX_S / 2), (lambda: (time.monotonic_ns(), {}), HANG_S)):
        sampler = Sampler(read, interval_s=LONG_INTERVAL_S)
        monkeypatch.setenv(worker.MARK_VARIABLE, sampler.open_marks()[worker.MARK_VARIABLE])
        readings = worker.DriverReadings()
        sampler.start(os.getpid())
        waited = readings.settle()
        samples = sampler.stop()
        assert waited < bound and readings.fds  # answered: the worker still listens
        if read is context_appearing:
            assert [s.device_used for s in samples[-nvml.SETTLE_READINGS:]] == [111 * MB] * nvml.SETTLE_READINGS
            assert len(samples) == 12 + nvml.SETTLE_READINGS - 1  # every rising reading, then the still ones
        else:
            assert waited >= nvml.SETTLE_MAX_S  # never still: it waited the bound, and answered


class FakeNvml:
    """A FAKE of the driver, the one boundary this machine cannot have: each process below this one (the worker)
    "holds" its host RSS on the GPU."""

    def read(self) -> tuple[int, dict[int, int]]:
        held = {}
        for child in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                held[child.pid] = child.memory_info().rss
        return 100 * MB + sum(held.values()), held

    def describe(self) -> dict[str, object]:
        return {"index": 0, "name": "FAKE GPU", "uuid": "GPU-fake-phase-marks", "driver": "fake",
                "total_bytes": 80 * 2**30}

    def close(self) -> None:
        pass


def test_every_phase_of_a_real_worker_has_a_driver_figure_however_short(monkeypatch: pytest.MonkeyPatch) -> None:
    """The c3d4247 case: torch's compile phase took 0.3 ms, inside NVML's 2 ms interval, and had no figure. Here a
    real CPU worker, the orchestrator's real sampler at an interval longer than the run and the real handshake;
    only NVML is faked (the orchestrator samples only cuda scenarios: its source is the seam)."""
    monkeypatch.setattr(orchestrator, "_nvml_source", lambda scenario: (FakeNvml(), ""))
    monkeypatch.setattr(nvml, "Sampler", functools.partial(Sampler, interval_s=LONG_INTERVAL_S))
    record = orchestrator.run_scenario(Scenario.create("torch", "heatmap68", kind="infer", device="cpu"))
    assert record["status"] == "ok", record.get("failure")
    assert record["nvml"]["view"] == "process" and nvml.MARK_VARIABLE in record["run"]["env_set"]
    assert min(p["seconds"] for p in record["phases"]) < LONG_INTERVAL_S / 1000  # the compile phase: < 3.6 s
    for measured in record["phases"]:  # the two asked for at its start and its end; the periodic one was before
        assert measured["nvml"]["samples"] == 2 and measured["nvml"]["process_peak"]["bytes"] > 0, measured
