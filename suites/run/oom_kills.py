"""The kernel's counts of processes it killed for want of memory: the evidence that makes a SIGKILL an `oom`.

An outside `kill -9` and the out-of-memory killer end a worker the same way; only the kernel's own counters tell
them apart. Read before and after a worker: a count that rose while it ran is the evidence.
"""

from __future__ import annotations

from pathlib import Path

_PROC = Path("/proc")
_CGROUPS = Path("/sys/fs/cgroup")


def _field(path: Path, name: str) -> int | None:
    """`name N` from a kernel key-value file; None where the file or the line is not there."""
    try:
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == name:
                return int(value)
    except (OSError, ValueError):
        return None
    return None


def _own_cgroup_files(proc: Path) -> list[Path]:
    """This process's memory cgroup's kill counters: v2's memory.events, v1's memory.oom_control."""
    found = []
    try:
        lines = (proc / "self" / "cgroup").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            found.append(_CGROUPS / path.lstrip("/") / "memory.events")
        elif "memory" in controllers.split(","):
            found.append(_CGROUPS / "memory" / path.lstrip("/") / "memory.oom_control")
    return found


def counts(proc: Path = _PROC) -> dict[str, int]:
    """Every kill count readable here: the machine's (/proc/vmstat, Linux 4.13+) and this process's cgroup's (which
    counts kills by a container's own limit); the worker shares the cgroup of the process that starts it."""
    found = {"machine": _field(proc / "vmstat", "oom_kill")}
    for path in _own_cgroup_files(proc):
        found[str(path)] = _field(path, "oom_kill")
    return {source: count for source, count in found.items() if count is not None}


def rose(before: dict[str, int], after: dict[str, int]) -> list[str]:
    """The counters that rose between two readings, named for the record."""
    return [source for source, count in after.items() if count > before.get(source, count)]
