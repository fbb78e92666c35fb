"""Samples this process's anonymous and total resident memory in a thread: the CPU figure that repeats run to
run, and the scenario's memory timeline (models.timeline, bounded, every peak kept).

The kernel's high-water mark (VmHWM, host_memory.py) is exact but counts file-backed pages (shared libraries,
the page cache), which differ from run to run; anonymous pages (the heap, tensors) repeat. The kernel keeps no
high-water mark of anonymous pages alone, so they are sampled here: every INTERVAL_S, and once at each phase's
start and end. A spike shorter than the interval can be missed, which is why VmHWM stays beside it. The interval
is 10 ms: at 2 ms the thread's requests for the GIL slowed Keras-on-TensorFlow's Python-heavy tracing by about a
quarter (measured on the 2-core CPU machine); at 10 ms no slowdown was measurable.
"""

from __future__ import annotations

import os
import threading
import time

from models.record import SAMPLED_PEAK, counter
from models.timeline import Timeline

INTERVAL_S = 0.01
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
        self._timeline = Timeline()
        self._peak, self._samples = 0, 0
        self._thread = threading.Thread(target=self._loop, name="footprint-rss-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.sample()

    def sample(self) -> None:
        anonymous, total = read()
        with self._lock:
            self._peak, self._samples = max(self._peak, anonymous), self._samples + 1
            self._timeline.add(time.monotonic(), anonymous, total)

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
        with self._lock:
            return self._timeline.to_dict(["rss_anon_kib", "rss_kib"], 1024) | {"interval_s": INTERVAL_S}
