"""Host memory of this process and the processes it started, with a true per-phase peak.

Writing 5 to /proc/self/clear_refs resets the kernel's high-water mark (VmHWM) to the current
RSS, so VmHWM read at the end of a phase is the exact peak inside it, with no sampling. A framework
may start processes of its own (Inductor's compile workers): their high-water marks are reset and read
the same way, through /proc/<pid>, and reported beside this process's. A child that ended inside the
phase (a compiler run by Inductor) is seen through getrusage(RUSAGE_CHILDREN): the kernel's largest
peak of any finished child, counted where it rose inside the phase. Adding the peaks bounds the tree's
joint peak from above (each process peaks at its own moment).
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

from models.record import PEAK_SINCE_PHASE_START, PEAK_SINCE_PROCESS_START, counter

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _status_bytes(field: str, status: Path = _STATUS) -> int:
    for line in status.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def _finished_children_peak() -> int:
    """The largest peak RSS of any child this process has waited for, since it started (the kernel keeps one)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def _descendants(root: int) -> list[int]:
    """Every live process below `root`, from the kernel's parent links in /proc/<pid>/stat."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


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
        self.finished_children_before = _finished_children_peak()
        if self.resettable:
            _CLEAR_REFS.write_text("5")
        for child in _descendants(os.getpid()):
            try:
                Path(f"/proc/{child}/clear_refs").write_text("5")
            except OSError:  # gone, or not ours to reset: its peak then counts from its start
                pass

    def children(self) -> dict:
        """The processes below this one now, and the sum of their peaks since the phase began (or they did); and the
        largest peak of a child that finished inside the phase, where one rose above every earlier one."""
        peaks = []
        for child in _descendants(os.getpid()):
            try:
                peaks.append(_status_bytes("VmHWM", Path(f"/proc/{child}/status")))
            except (OSError, KeyError, ValueError):  # ended meanwhile, or a zombie with no memory left
                continue
        finished = _finished_children_peak()
        risen = finished > getattr(self, "finished_children_before", finished)
        return {"processes_counted": 1 + len(peaks) + risen,
                **({"children_peak_rss": counter(sum(peaks), PEAK_SINCE_PHASE_START)} if peaks else {}),
                **({"finished_child_peak_rss": counter(finished, PEAK_SINCE_PROCESS_START)} if risen else {})}

    def peak(self) -> dict:
        if self.resettable:
            return counter(_status_bytes("VmHWM"), PEAK_SINCE_PHASE_START)
        return counter(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, PEAK_SINCE_PROCESS_START)
