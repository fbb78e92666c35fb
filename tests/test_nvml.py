"""NVML's windowing and PID logic, on hand-made sample series in NVML's shape (this machine has no GPU).

The series are fakes at the one boundary that cannot exist here, the driver; the real NvmlSource
is exercised by the calibration test on a GPU machine.
"""

from __future__ import annotations

import subprocess
import time

from models.record import SAMPLED_PEAK
from models.timeline import Timeline
from suites.run.nvml import Sample, Sampler, attribute, isolation

WORKER, HELPER, DESKTOP, HOST_PID = 4242, 4243, 100, 987654
MB = 10**6


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


def test_sampler_follows_the_worker_and_its_children() -> None:
    replay = iter([(i * MB, {}) for i in range(10**6)])  # a fake driver: increasing device figures
    sampler = Sampler(lambda: next(replay), interval_s=0.001)
    worker = subprocess.Popen(["bash", "-c", "sleep 0.6 & wait"])
    try:
        sampler.start(worker.pid)
        time.sleep(0.3)
        grandchildren = {child for sample in sampler.samples for child in sample.tree} - {worker.pid}
        worker.wait()
    finally:
        samples = sampler.stop()
    assert len(samples) >= 2
    assert [s.device_used for s in samples] == sorted(s.device_used for s in samples)
    assert all(earlier.time < later.time for earlier, later in zip(samples, samples[1:], strict=False))
    assert grandchildren, "the sampler should see the worker's child (sleep) in the tree"


def test_the_isolation_check_marks_other_processes_and_memory_above_its_baseline() -> None:
    uuid = "GPU-isolation-test"
    quiet = isolation(Sample(0.0, 600 * MB, {}), uuid)
    assert quiet["passed"] and quiet["lowest_used_bytes"] == 600 * MB
    busy = isolation(Sample(1.0, 900 * MB, {DESKTOP: 300 * MB}), uuid)
    assert not busy["passed"] and busy["reasons"] == [f"other compute processes on the GPU: PIDs [{DESKTOP}]",
                                                      f"used memory {300 * MB:,} bytes above its lowest reading"]
    assert isolation(Sample(2.0, 610 * MB, {}), uuid)["passed"]  # within the slack of the lowest reading
