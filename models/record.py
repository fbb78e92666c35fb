"""The record one scenario produces, shared by the worker that writes it and the suite that reads it."""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import IO

SCHEMA_VERSION = 1
# killed: by a signal from outside the worker, not for want of memory; unavailable: never run, with the reason
STATUSES = ("ok", "oom", "timeout", "crashed", "killed", "error", "unavailable")
RUNNING = "running"
TEMPORARY = ".footprint-tmp"  # the suffix of atomic_write's temporaries, so a later write finds a killed writer's


_NUMBERS = re.compile(r"\[\s*(-?[\d.eE+-]+(?:,\s*-?[\d.eE+-]+)*)\s*\]")


def to_json(data: object) -> str:
    """Indented JSON with each list of plain numbers on one line: a timeline's points stay one per line, and a run
    file holding one per scenario stays small."""
    return _NUMBERS.sub(lambda match: "[" + " ".join(match.group(1).split()) + "]", json.dumps(data, indent=1))


def alive(pid: int) -> bool:
    """Whether a process with this id runs (another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sweep_temporaries(path: Path) -> None:
    """Removes the temporaries of `path` that writers killed outright (SIGKILL) left: this user's, named by a pid
    that no longer runs. A live writer's is never touched."""
    for entry in path.parent.glob(f".{glob.escape(path.name)}.*{TEMPORARY}"):
        match = re.fullmatch(rf"\.{re.escape(path.name)}\.(\d+)\.\w+{re.escape(TEMPORARY)}", entry.name)
        with contextlib.suppress(OSError):
            if match and not alive(int(match[1])) and entry.stat().st_uid == os.getuid():
                entry.unlink()


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write-then-rename, so a reader (or a crash, or a full disk) never sees half a file: `write` fills a
    temporary beside `path` (`.NAME.PID.RANDOM.footprint-tmp`), which replaces it only once whole. The temporaries
    that killed writers left beside it go first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=TEMPORARY, dir=path.parent)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would make results unreadable to others
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_json(path: str | Path, data: object) -> None:
    atomic_write(path, lambda handle: handle.write((to_json(data) + "\n").encode()))


def one_line(error: BaseException) -> str:
    """The error in one line, for a record's failure message; where it says nothing, where it was raised."""
    text = " ".join(str(error).split())
    if not text and error.__traceback__:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        text = f"raised at {Path(frame.filename).name}:{frame.lineno} ({frame.line})"
    return f"{type(error).__name__}: {text}"[:500]


def phase(record: dict, name: str) -> dict | None:
    """The named phase of a record, or None when the scenario never reached it."""
    return next((p for p in record.get("phases", []) if p["name"] == name), None)

# What a memory figure means, recorded beside every value.
PEAK_SINCE_PHASE_START = "reset"  # the counter was reset when the phase began: a true in-phase peak
PEAK_SINCE_PROCESS_START = "cumulative"  # cannot be reset: the highest value so far in the process
PEAK_AT_MOST = "at most"  # a cumulative counter that did not rise in the phase: its peak was this or lower
STATIC_PLAN = "static plan"  # what a compiler plans to allocate, not a reading
AT_PHASE_END = "end of phase"  # a reading taken once, when the phase ended
SAMPLED_PEAK = "sampled peak"  # the highest of the samples taken inside the phase window


def counter(value: int, semantics: str) -> dict:
    return {"bytes": int(value), "semantics": semantics}
