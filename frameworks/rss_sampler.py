"""Samples this process's anonymous and total resident memory in a thread: the CPU figure that repeats run to
run, and the scenario's memory timeline.

The kernel's high-water mark (VmHWM, host_memory.py) is exact but counts file-backed pages (shared libraries,
the page cache), which differ from run to run; anonymous pages (the heap, tensors) repeat. The kernel keeps no
high-water mark of anonymous pages alone, so they are sampled here: every INTERVAL_S, and once at each phase's
start and end. A spike shorter than the interval can be missed, which is why VmHWM stays beside it.

The timeline keeps at most MAX_POINTS points (tens of KiB, inside the figures it measures, and small enough for
a run file to hold one per scenario): when it fills, neighbours are merged, each point keeping the largest of
the samples it stands for, so every peak survives exactly.
"""

from __future__ import annotations

import os
import threading
import time

from models.record import SAMPLED_PEAK, counter

INTERVAL_S = 0.002
MAX_POINTS = 512
_PAGE = os.sysconf("SC_PAGE_SIZE")


def read() -> tuple[int, int]:
    """(anonymous, total) resident bytes now, from /proc/self/statm (resident minus shared is anonymous)."""
    with open("/proc/self/statm", "rb") as statm:
        fields = statm.read().split()
    resident, shared = int(fields[1]) * _PAGE, int(fields[2]) * _PAGE
    return resident - shared, resident


class RssSampler:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._points: list[list[float]] = []  # [time, anonymous, total], each the largest over `_stride` samples
        self._stride, self._pending = 1, 0
        self._peak, self._samples = 0, 0
        self._thread = threading.Thread(target=self._loop, name="footprint-rss-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.sample()

    def sample(self) -> None:
        anonymous, total = read()
        with self._lock:
            self._peak, self._samples = max(self._peak, anonymous), self._samples + 1
            if self._pending and self._points:  # fold into the last point, which stands for `_stride` samples
                last = self._points[-1]
                last[1], last[2] = max(last[1], anonymous), max(last[2], total)
            else:
                self._points.append([time.monotonic(), anonymous, total])
            self._pending = (self._pending + 1) % self._stride
            if len(self._points) >= MAX_POINTS:
                self._halve()

    def _halve(self) -> None:
        merged = []
        for index in range(0, len(self._points), 2):
            pair = self._points[index:index + 2]
            merged.append([pair[0][0], max(p[1] for p in pair), max(p[2] for p in pair)])
        self._points, self._stride, self._pending = merged, self._stride * 2, 0

    def phase_started(self) -> None:
        """The phase's peak counts from now: a sample now is its first."""
        with self._lock:
            self._peak, self._samples = 0, 0
        self.sample()

    def phase_peak(self) -> dict:
        """The largest anonymous RSS sampled since `phase_started`, a sample now included, and how many there were."""
        self.sample()
        with self._lock:
            return counter(self._peak, SAMPLED_PEAK) | {"samples": self._samples, "interval_s": INTERVAL_S}

    def timeline(self) -> dict:
        """The points as [milliseconds since the first, anonymous KiB, total KiB]: short numbers, a small record."""
        with self._lock:
            start = self._points[0][0] if self._points else time.monotonic()
            return {"start_monotonic_s": start, "columns": ["ms", "rss_anon_kib", "rss_kib"],
                    "interval_s": INTERVAL_S, "samples_per_point": self._stride,
                    "points": [[round((t - start) * 1000), a // 1024, r // 1024] for t, a, r in self._points]}
