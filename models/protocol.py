"""What the orchestrator and a worker agree on across the process boundary, beside the record itself: both sides
import it, and neither imports the other (the orchestrator never imports a framework's code)."""

from __future__ import annotations

import ctypes
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

Value = TypeVar("Value")

# The worker writes each line of its compile helper's output after this prefix: the orchestrator reads an
# out-of-memory line live, and names the compile phase for a helper's line whatever phase the worker has reached.
HELPER_PREFIX = "compile helper: "
# The orchestrator's NVML sampler's pipes, "ASK,HEAR" (file descriptors the worker inherits): the worker asks for a
# reading at each phase boundary and waits until it is taken, so a phase shorter than the interval has one.
MARK_VARIABLE = "FOOTPRINT_NVML_MARK"
# What the worker writes there, answered with the same byte: a reading now, or readings until NVML's figure stops
# moving (a new CUDA context shows in NVML up to 20 ms after it exists: the H100 run at ec3adfa), at most
# SETTLE_MAX_S; the context phase waits for the second, so its peak holds the whole context.
ASK_READING, ASK_SETTLED = b"?", b"s"
SETTLE_MAX_S = 1.0
# The name a job's scenario (`Scenario.to_dict`) has in the folder of the process that starts the job, which passes
# its path: on the command line, a large spec's (an 8,000-layer chain) would be past the 128 KiB Linux allows one
# argument.
SCENARIO_FILE = "scenario.json"


def write_scenario(scenario: dict, folder: str | Path) -> str:
    """Writes a scenario as SCENARIO_FILE in `folder` and returns its path, a job's SCENARIO_FILE argument."""
    path = Path(folder, SCENARIO_FILE)
    path.write_text(json.dumps(scenario))
    return str(path)


# A bench's one compilation cache, shared by its scenarios' compile helpers (a folder the orchestrator makes for the
# run and removes after it): a scenario whose helper would compile the same programs under the same allocator
# settings as an earlier one's (a pool-off twin's helper runs as its pooled run's does: pool off) loads them from
# there and starts no helper (frameworks/worker.py compile_ahead).
COMPILE_CACHE_VARIABLE = "FOOTPRINT_COMPILE_CACHE"


def programs_key(scenario: dict, helper_settings: dict[str, str]) -> str:
    """What a scenario's helper compiles and autotunes under, as a file name: the scenario's settings but its
    allocator mode, which changes where the worker's arrays live, not the programs, and the allocator variables the
    helper runs with, under which the autotuner found its scratch (a cap changes what it may choose)."""
    settings = {name: value for name, value in scenario.items() if name != "allocator"}
    text = json.dumps([settings, helper_settings], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


PR_SET_PDEATHSIG = 1  # linux/prctl.h
# Linux's prctl, looked up once here: a child asks for its parent-death signal between fork and exec (`subprocess`'s
# preexec_fn), where loading a library could deadlock
_PRCTL = getattr(ctypes.CDLL(None, use_errno=True), "prctl", None)


def end_with_parent(sent: int) -> bool:
    """Asks the kernel to send `sent` to this process when the thread that started it ends, even by SIGKILL, so a
    worker (or a check's bench) never outlives the process that waits on it. False where it cannot (not Linux)."""
    return _PRCTL is not None and _PRCTL(PR_SET_PDEATHSIG, sent) == 0


# A worker started ahead of its turn (the orchestrator's overlap): the file descriptor of a pipe's read end it waits
# on after its import phase, before its first phase that may touch a device (its context) and before its compile
# helper. RELEASE read there lets it go on; the end of the file (its orchestrator gone, or its run stopped) ends it.
GATE_VARIABLE = "FOOTPRINT_GATE_FD"
RELEASE = b"g"


def numbered(name: str, values: Sequence[Value]) -> dict[str, Value]:
    """Arrays a job saves one per output of the net, `output0`, `output1`... (`targets0`...): a net may return
    several (an FPN's levels), each with its own target."""
    return {f"{name}{index}": value for index, value in enumerate(values)}


def in_order(name: str, saved: Mapping[str, Value]) -> list[Value]:
    """The arrays `numbered` saved under `name`, in the net's order of outputs."""
    found: list[Value] = []
    while f"{name}{len(found)}" in saved:
        found.append(saved[f"{name}{len(found)}"])
    return found
