"""Host memory of this process with a true per-phase peak.

Writing 5 to /proc/self/clear_refs resets the kernel's high-water mark (VmHWM) to the current
RSS, so VmHWM read at the end of a phase is the exact peak inside it, with no sampling.
"""

from __future__ import annotations

import resource
from pathlib import Path

from models.record import PEAK_SINCE_PHASE_START, PEAK_SINCE_PROCESS_START, counter

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


class HostMemory:
    """Resets and reads the process's peak RSS; says when the peak could not be reset."""

    def __init__(self) -> None:
        self.resettable = self._try_reset()

    @staticmethod
    def _try_reset() -> bool:
        try:
            _CLEAR_REFS.write_text("5")
            return True
        except OSError:
            return False

    def rss(self) -> int:
        return _status_bytes("VmRSS")

    def rss_split(self) -> dict[str, int]:
        """Anonymous (heap, tensors) vs file-backed (mapped libraries) resident bytes, now.

        File-backed pages depend on the page cache (a freshly installed library maps more at once),
        so compare anonymous bytes across machines; the peak (VmHWM) counts both.
        """
        return {"end_rss_anon_bytes": _status_bytes("RssAnon"), "end_rss_file_bytes": _status_bytes("RssFile")}

    def reset_peak(self) -> None:
        if self.resettable:
            _CLEAR_REFS.write_text("5")

    def peak(self) -> dict:
        if self.resettable:
            return counter(_status_bytes("VmHWM"), PEAK_SINCE_PHASE_START)
        return counter(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, PEAK_SINCE_PROCESS_START)
