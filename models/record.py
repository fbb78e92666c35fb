"""The record one scenario produces, shared by the worker that writes it and the suite that reads it."""

from __future__ import annotations

import contextlib
import errno
import glob
import json
import os
import re
import stat
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
_FILE_KINDS = {stat.S_IFDIR: "a folder", stat.S_IFIFO: "a FIFO", stat.S_IFCHR: "a device", stat.S_IFBLK: "a device",
               stat.S_IFSOCK: "a socket"}


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


def regular_file(path: str | Path) -> os.stat_result:
    """The status of a file a user named, which must be a regular one (or a link to one): checked before anything
    reads it, as an OSError its reader already says in one line. A FIFO would hang the read, a device such as
    /dev/zero feed it without end."""
    found = os.stat(path)
    if not stat.S_ISREG(found.st_mode):
        kind = _FILE_KINDS.get(stat.S_IFMT(found.st_mode), "of another kind")
        raise OSError(errno.EINVAL, f"not a regular file ({kind})")
    return found


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


FRAMES_KEPT = 8  # a failure's frames: the innermost ones, where it was raised
FRAME_FIELD_CHARS = 160  # each frame's file, function and source line at most (a file keeps its end)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LIBRARY = re.compile(r".*/(?:site|dist)-packages/")


def _short_path(filename: str) -> str:
    """A frame's file as a person finds it: a library's below its site-packages (a tox env's are inside the clone),
    ours below the clone, anything else as it is."""
    if _LIBRARY.match(filename):
        return _LIBRARY.sub("", filename, count=1)
    return os.path.relpath(filename, _ROOT) if filename.startswith(_ROOT + os.sep) else filename


def last_frames(error: BaseException) -> list[dict]:
    """Where the error was raised: its own traceback's last FRAMES_KEPT frames (file, line, function, source line),
    innermost last, each field capped, for a record's failure. A cause it was raised from is not followed: the
    frames say where this error left the code. It runs where memory ran out (after the record's reserve is
    released), so it keeps little and never raises: where the frames cannot be read, none are kept."""
    try:
        return [{"file": _short_path(frame.filename)[-FRAME_FIELD_CHARS:], "line": frame.lineno,
                 "function": frame.name[:FRAME_FIELD_CHARS], "code": (frame.line or "")[:FRAME_FIELD_CHARS]}
                for frame in traceback.extract_tb(error.__traceback__, limit=-FRAMES_KEPT)]
    except Exception:
        return []


def load_json(path: str | Path) -> object:
    """A JSON file's data: an OSError where it is no regular file (`regular_file`, before any read) or cannot be
    read; JSON nested deeper than Python's parser recurses is a ValueError, as any other JSON that cannot be read,
    not the RecursionError no reader expects from bad input."""
    regular_file(path)
    text = Path(path).read_text()
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("its JSON is nested too deeply to read") from None


def json_kind(value: object) -> str:
    """A JSON value's kind in words, for a line saying what a file holds instead of what was expected."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


# What every reader takes for granted in a record beside its scenario and status: these fields are objects where
# present (`failure` may be null), and its phases hold what the figures read (`phases_fault`).
RECORD_OBJECTS = ("model", "framework", "allocator", "run", "nvml", "timeline", "worker", "estimate", "breakdown",
                  "comparison", "floor")
PHASE_VIEWS = ("host", "allocator")  # every phase's, read for each figure
OPTIONAL_VIEWS = ("nvml", "tensors", "notes")
COUNTER_VIEWS = ("host", "allocator", "nvml")  # where each object is a counter (`counter`)
PHASE_TIMES = ("seconds", "started_at", "ended_at")


def shape_fault(record: dict) -> str | None:
    """What in a record its readers could not read (a field of the wrong kind, a malformed phase), in a few words,
    or None: the one check of a record's shape, for the worker's record the orchestrator reads and for every record a
    run file or its store holds, so a record no figure can be read from is refused where it is read, never merged."""
    wrong = [field for field in RECORD_OBJECTS if field in record and not isinstance(record[field], dict)]
    if record.get("failure") is not None and not isinstance(record["failure"], dict):
        wrong.append("failure")
    if wrong:
        return f"its {', '.join(wrong)} {'is' if len(wrong) == 1 else 'are'} not an object"
    phases = record.get("phases")
    if not isinstance(phases, list):
        return f"its phases are {json_kind(phases)}, not a list"
    for index, measured in enumerate(phases):
        fault = _phase_fault(measured)
        if fault:
            return f"its phase {index + 1} {fault}"
    return None


def _phase_fault(measured: object) -> str | None:
    if not isinstance(measured, dict):
        return f"is {json_kind(measured)}, not an object"
    if not isinstance(measured.get("name"), str):
        return "has no name"
    views = [view for view in (*PHASE_VIEWS, *OPTIONAL_VIEWS) if view in PHASE_VIEWS or view in measured]
    wrong = [view for view in views if not isinstance(measured.get(view), dict)]
    wrong += [name for name in PHASE_TIMES if not _is_number(measured.get(name))]
    if not wrong:  # each counter of its views, the host's peak among them
        counters = {f"{view}.{name}": value for view in COUNTER_VIEWS for name, value in measured.get(view, {}).items()
                    if isinstance(value, dict)}
        counters.setdefault("host.peak_rss", measured["host"].get("peak_rss"))
        wrong = [name for name, value in counters.items() if not _is_counter(value)]
    return f"({measured['name']!r}) has no valid {', '.join(wrong)}" if wrong else None


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_counter(value: object) -> bool:
    """`counter`'s shape: a whole number of bytes and what the figure means."""
    return (isinstance(value, dict) and isinstance(value.get("bytes"), int) and not isinstance(value["bytes"], bool)
            and isinstance(value.get("semantics"), str))


def phase(record: dict, name: str) -> dict | None:
    """The named phase of a record, or None when the scenario never reached it."""
    return next((p for p in record.get("phases", []) if p["name"] == name), None)


def worker_seconds(record: dict) -> float:
    """The worker's wall time less its wait at its gate: a worker started ahead waits there while the one before it
    measures, and that wait costs the run nothing."""
    waited = ((record.get("worker") or {}).get("gate") or {}).get("waited_s", 0.0)
    return (record.get("run") or {}).get("wall_seconds", 0.0) - waited


# What a memory figure means, recorded beside every value.
PEAK_SINCE_PHASE_START = "reset"  # the counter was reset when the phase began: a true in-phase peak
PEAK_SINCE_PROCESS_START = "cumulative"  # cannot be reset: the highest value so far in the process
PEAK_AT_MOST = "at most"  # a cumulative counter that did not rise in the phase: its peak was this or lower
STATIC_PLAN = "static plan"  # what a compiler plans to allocate, not a reading
AT_PHASE_END = "end of phase"  # a reading taken once, when the phase ended
SAMPLED_PEAK = "sampled peak"  # the highest of the samples taken inside the phase window


def counter(value: int, semantics: str) -> dict:
    return {"bytes": int(value), "semantics": semantics}
