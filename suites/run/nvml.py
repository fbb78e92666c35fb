"""The driver's view of GPU memory: NVML, sampled from the orchestrator while a worker runs.

NVML has no peak counter, so a thread samples the device's used memory and every process's
used memory at a fixed interval, and each phase gets the maximum of the samples inside its
window (the worker stamps phase start and end with the same system-wide monotonic clock). A phase
shorter than the interval would have none, so the worker also asks for a reading at each phase's start and
end and waits for it (`Sampler.open_marks`; frameworks/worker.py `DriverReadings`).
NVML reports host PIDs: where the worker's PID is not among them (a container's PID
namespace), the device-wide figure stands in, labelled so.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from types import ModuleType

import psutil

from models.protocol import ASK_SETTLED, MARK_VARIABLE, SETTLE_MAX_S
from models.record import AT_PHASE_END, SAMPLED_PEAK, counter
from models.timeline import Timeline

DEFAULT_INTERVAL_S = 0.002
TREE_REFRESH_S = 0.05
# A settle (ASK_SETTLED) reads every SETTLE_STEP_S until SETTLE_READINGS in a row agree, at most SETTLE_MAX_S
SETTLE_STEP_S = 0.02
SETTLE_READINGS = 3


@dataclass(frozen=True)
class Sample:
    time: float  # time.monotonic(), comparable with the worker's phase stamps on the same machine
    device_used: int
    processes: dict[int, int]  # NVML's PID -> used bytes
    tree: frozenset[int] = frozenset()  # the worker and its descendants when the sample was taken


class NvmlSource:
    """The real driver, one GPU. Construct only where NVML is installed and sees a GPU."""

    def __init__(self, index: int) -> None:
        import pynvml

        self.nvml = pynvml
        pynvml.nvmlInit()
        self.handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        self.index = index

    def read(self) -> tuple[int, dict[int, int]]:
        used = self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used
        processes = self.nvml.nvmlDeviceGetComputeRunningProcesses(self.handle)
        return used, {p.pid: p.usedGpuMemory or 0 for p in processes}

    def describe(self) -> dict[str, object]:
        nvml, handle = self.nvml, self.handle
        return {"index": self.index, "name": nvml.nvmlDeviceGetName(handle), "uuid": nvml.nvmlDeviceGetUUID(handle),
                "driver": nvml.nvmlSystemGetDriverVersion(),
                "total_bytes": nvml.nvmlDeviceGetMemoryInfo(handle).total}

    def close(self) -> None:
        self.nvml.nvmlShutdown()


@contextmanager
def _driver() -> Iterator[ModuleType]:
    """NVML, initialized for the block and shut down after it."""
    import pynvml

    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def visible_gpu_index() -> int:
    """NVML counts every GPU; the worker uses the first one CUDA_VISIBLE_DEVICES leaves it: an index (NVML's order
    is the PCI bus order, so CUDA_DEVICE_ORDER=PCI_BUS_ID makes the two agree) or a UUID, as the executors pin."""
    first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip()
    if first.isdigit():
        return int(first)
    if not first.startswith("GPU-"):
        return 0
    with _driver() as driver:
        return driver.nvmlDeviceGetIndex(driver.nvmlDeviceGetHandleByUUID(first))


def visible_gpu_name() -> str | None:
    """The GPU a worker here would run on, as NVML names it; None where there is no library, driver or GPU."""
    try:
        source = NvmlSource(visible_gpu_index())
    except Exception:  # noqa: BLE001 - nothing to name: the caller compares with no card
        return None
    try:
        return str(source.describe()["name"])
    finally:
        source.close()


def driver_versions() -> dict[str, str | None]:
    """The driver's version and the CUDA version it supports ("13.0"), for a check's environment; None each where
    NVML cannot say."""
    try:
        with _driver() as driver:
            version = driver.nvmlSystemGetDriverVersion()
            cuda = driver.nvmlSystemGetCudaDriverVersion()
    except Exception:  # noqa: BLE001 - no library, no driver: nothing to name
        return {"driver": None, "cuda": None}
    return {"driver": version.decode() if isinstance(version, bytes) else version,
            "cuda": f"{cuda // 1000}.{cuda % 1000 // 10}"}


def uuid_of(index: int) -> str:
    """The GPU's UUID, which names it the same way whatever CUDA_VISIBLE_DEVICES says."""
    with _driver() as driver:
        uuid = driver.nvmlDeviceGetUUID(driver.nvmlDeviceGetHandleByIndex(index))
    return uuid.decode() if isinstance(uuid, bytes) else uuid


def process_tree(root: int) -> frozenset[int]:
    try:
        parent = psutil.Process(root)
        return frozenset({root, *(child.pid for child in parent.children(recursive=True))})
    except psutil.Error:
        return frozenset({root})


@dataclass
class Sampler:
    """Samples `read` every `interval_s` in a thread until stopped, and at once whenever the worker asks
    (`open_marks`); tracks the worker's process tree."""

    read: Callable[[], tuple[int, dict[int, int]]]
    interval_s: float = DEFAULT_INTERVAL_S
    samples: list[Sample] = field(default_factory=list)
    read_seconds: float = 0.0
    worker_fds: tuple[int, ...] = field(default=(), init=False)  # the worker's ends of the marks, until it has them
    _asked: int | None = field(default=None, init=False)  # this side of the marks: the worker's asks, the answers
    _answer: int | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def sample(self, tree: frozenset[int] = frozenset()) -> Sample:
        start = time.monotonic()
        used, processes = self.read()
        self.read_seconds += time.monotonic() - start
        return Sample(start, used, processes, tree)

    def open_marks(self) -> dict[str, str]:
        """Pipes by which the worker asks for a reading at a phase boundary: it writes a byte to one and waits for
        the same byte back on the other, which comes once a sample taken after the ask is kept. Returns the
        worker's environment naming its ends; pass `worker_fds` to it, then `close_worker_fds`."""
        self._asked, ask = os.pipe()
        hear, self._answer = os.pipe()
        os.set_blocking(self._answer, False)  # a worker that stopped listening never blocks the sampler
        self.worker_fds = (ask, hear)
        return {MARK_VARIABLE: f"{ask},{hear}"}

    def close_worker_fds(self) -> None:
        """Once the worker holds its ends: its exit is then the sampler's end of file."""
        for fd in self.worker_fds:
            os.close(fd)
        self.worker_fds = ()

    def start(self, root_pid: int) -> None:
        self._woken, self._wake = os.pipe()  # `stop` writes here: a wait of a long interval ends at once
        self._thread = threading.Thread(target=self._loop, args=(root_pid,), daemon=True, name="nvml-sampler")
        self._thread.start()

    def _loop(self, root_pid: int) -> None:
        tree, refreshed = process_tree(root_pid), time.monotonic()
        events, due = select.poll(), 0.0  # not select(): an orchestrator running many workers may pass FD_SETSIZE
        for fd in (self._woken, self._asked):
            if fd is not None:
                events.register(fd, select.POLLIN)
        while True:
            ready = dict(events.poll(max(0.0, due - time.monotonic()) * 1000))
            if self._woken in ready:
                return
            asked = os.read(self._asked, 256) if self._asked in ready else b""
            if self._asked in ready and not asked:  # the worker and every process it shared its end with are gone
                events.unregister(self._asked)
                continue
            if time.monotonic() - refreshed > TREE_REFRESH_S:
                tree, refreshed = tree | process_tree(root_pid), time.monotonic()
            sample = self.sample(tree)
            self.samples.append(sample)
            if ASK_SETTLED in asked:
                sample = self._settle(tree)
            if asked:  # taken after the ask was written: the same bytes back say so
                with suppress(OSError):  # the worker gave up waiting, or is gone
                    os.write(self._answer, asked)
            due = sample.time + self.interval_s

    def _settle(self, tree: frozenset[int]) -> Sample:
        """Reads every SETTLE_STEP_S until the last SETTLE_READINGS agree (the device's and each process's bytes),
        at most SETTLE_MAX_S; returns the last reading."""
        deadline = time.monotonic() + SETTLE_MAX_S
        while time.monotonic() < deadline:
            last = self.samples[-SETTLE_READINGS:]
            if len(last) == SETTLE_READINGS and all((s.device_used, s.processes) == (last[0].device_used,
                                                                                  last[0].processes) for s in last):
                break
            time.sleep(SETTLE_STEP_S)
            self.samples.append(self.sample(tree))
        return self.samples[-1]

    def stop(self) -> list[Sample]:
        if self._thread:
            os.write(self._wake, b"x")
            self._thread.join()
            os.close(self._wake)
            os.close(self._woken)
        self.close_worker_fds()
        for fd in (self._asked, self._answer):
            if fd is not None:
                os.close(fd)
        self._thread = self._asked = self._answer = None
        return self.samples


ISOLATION_SLACK_BYTES = 64 * 2**20
_LOWEST_USED: dict[str, int] = {}  # GPU UUID -> the lowest used memory seen before a scenario in this process


def isolation(baseline: Sample, uuid: str) -> dict:
    """The check before a scenario: no other compute process on the GPU, and its memory at its baseline (within
    ISOLATION_SLACK_BYTES of the lowest reading before any scenario in this process; a Ray worker process runs
    many). A failed check marks the record; it does not stop the run."""
    lowest = _LOWEST_USED[uuid] = min(_LOWEST_USED.get(uuid, baseline.device_used), baseline.device_used)
    reasons = ([f"other compute processes on the GPU: PIDs {sorted(baseline.processes)}"] if baseline.processes
               else []) + ([f"used memory {baseline.device_used - lowest:,} bytes above its lowest reading"]
                           if baseline.device_used - lowest > ISOLATION_SLACK_BYTES else [])
    return {"passed": not reasons, "reasons": reasons, "gpu_uuid": uuid, "device_used_bytes": baseline.device_used,
            "lowest_used_bytes": lowest}


def attribute(samples: list[Sample], baseline: Sample, phases: list[dict], read_seconds: float,
              released: float | None = None) -> dict:
    """Puts each phase's NVML peaks into `phase['nvml']`; returns the run's NVML summary.

    `baseline` is the sample taken before the worker could touch the device: every process in it is someone else's.
    `released`: when a worker started ahead passed its gate; its phases before then (its import) ran while another
    worker measured, with no device context of its own, and were not sampled.
    """
    tree = frozenset().union(*(sample.tree for sample in samples))
    seen = {pid for sample in samples for pid in sample.processes}
    visible = bool(seen & tree)
    # per sample, the worker's tree's bytes (the device's where NVML does not show the worker's PIDs)
    own = [sum(used for pid, used in s.processes.items() if pid in tree) if visible else s.device_used
           for s in samples]
    others_at_start = {pid: used for pid, used in baseline.processes.items() if pid not in tree}
    newcomers = sorted(seen - tree - others_at_start.keys())
    warnings = []
    if others_at_start:
        warnings.append(f"other processes used the GPU when the run started: {others_at_start} (PID: bytes)")
    if visible and newcomers:
        warnings.append(f"other processes started on the GPU during the run: PIDs {newcomers}")
    if not visible:
        warnings.append("the worker's PID is not among NVML's processes (a container's PID namespace?): "
                        "device-wide used memory stands in for the process's"
                        + (f"; PIDs {newcomers} appeared during the run, likely the worker seen from the host"
                           if newcomers else ""))
    for phase in phases:
        if released is not None and phase["ended_at"] <= released:
            phase["nvml"] = {"samples": 0, "note": "before its gate: started ahead, the worker held no device context "
                                                   "while another worker measured; NVML was read from its release on"}
            continue
        inside = [i for i, s in enumerate(samples) if phase["started_at"] <= s.time <= phase["ended_at"]]
        if not inside:
            phase["nvml"] = {"samples": 0, "note": "no sample inside the phase: it was shorter than the interval"}
            continue
        figures: dict[str, object] = {"samples": len(inside)}
        figures["device_peak"] = counter(max(samples[i].device_used for i in inside), SAMPLED_PEAK)
        figures["device_end"] = counter(samples[inside[-1]].device_used, AT_PHASE_END)
        if visible:
            figures["process_peak"] = counter(max(own[i] for i in inside), SAMPLED_PEAK)
            figures["process_end"] = counter(own[inside[-1]], AT_PHASE_END)
            # the worker's tree on the GPU in the phase (compile workers with a CUDA context count too)
            figures["processes_counted"] = len({pid for i in inside for pid in samples[i].processes if pid in tree})
        phase["nvml"] = figures
    span = samples[-1].time - samples[0].time if len(samples) > 1 else 0.0
    timeline = Timeline()
    for sample, mine in zip(samples, own, strict=True):
        timeline.add(sample.time, mine, sample.device_used)
    return {
        "view": "process" if visible else "device (worker PID not visible to NVML)",
        "samples": len(samples),
        "rate_hz": round((len(samples) - 1) / span, 1) if span else None,
        "read_cost_ms": round(1000 * read_seconds / max(len(samples), 1), 4),
        "baseline_device_used_bytes": baseline.device_used,
        "other_processes_at_start": others_at_start,
        "other_processes_during": newcomers if visible else [],
        "warnings": warnings,
        "timeline": timeline.to_dict(["process_kib", "device_kib"], 1024),
    }
