"""Runs one scenario in a fresh worker process and always returns a complete record.

The parent owns the timeout and turns every way a worker can end (clean exit, exception,
out-of-memory, signal, hang) into a status with the phase and a message.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from models.protocol import COMPILE_CACHE_VARIABLE, GATE_VARIABLE, HELPER_PREFIX, RELEASE, write_scenario
from models.record import STATUSES, alive, shape_fault
from models.scenario import Scenario
from suites.run import device, environment, interrupts, known, nvml, oom_kills
from suites.run.registry import ROOT, interpreter

# Inherited from the caller; everything else the worker sees is set on purpose, or passed as below.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                 "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME")
# Passed from the caller too, by prefix: what a user sets to steer a framework or the libraries it computes with, so a
# run measures the framework as they run it (each by name and value in the record's `run.env_passed`). TensorFlow's
# (TF_ENABLE_ONEDNN_OPTS, TF_XLA_FLAGS, its threads and logs), XLA's (XLA_FLAGS), JAX's, Keras's, torch's (and
# torch.compile's Inductor), CUDA's, and the CPU's math libraries with their threads: OpenMP (and Intel's KMP_), MKL,
# OpenBLAS, oneDNN (DNNL_: its former name). Anything else a shell holds stays out, as the allowlist meant.
PASSED_PREFIXES = ("TF_", "XLA_", "JAX_", "KERAS_", "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "CUDA_", "OMP_", "KMP_",
                   "MKL_", "OPENBLAS_", "ONEDNN_", "DNNL_")
# ...but not KERAS_BACKEND (the Keras adapter sets it), nor Terraform's TF_ names (its variables, tokens and settings
# have nothing to do with TensorFlow, and would land in records), nor any name that says it holds a secret.
HELD_BACK = ("KERAS_BACKEND", "TF_VAR_", "TF_TOKEN_", "TF_CLI_", "TF_LOG", "TF_CLOUD_", "TF_REGISTRY_", "TF_INPUT",
             "TF_DATA_DIR", "TF_WORKSPACE", "TF_IN_AUTOMATION", "TF_PLUGIN_CACHE_DIR", "TF_IGNORE",
             "TF_APPEND_USER_AGENT", "TF_STATE_PERSIST_INTERVAL")
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "CREDENTIAL")
# What a line of a worker's output says where an allocation failed for good (lowercased): XLA's and TensorFlow's
# status, TensorFlow's op error, XLA's and TensorFlow's BFC allocator ("Allocator (GPU_0_bfc) ran out of memory trying
# to allocate 1.58GiB (rounded to 1698693120)requested by op ..."), torch's CUDA errors and the host's (ENOMEM,
# std::bad_alloc, Python's MemoryError). Not a bare "out of memory": CUDA's driver says it where the BFC allocator
# then does without (TensorFlow growing its pool, JAX's autotuner in 2019).
OOM_MARKERS = ("resource_exhausted", "oom when allocating tensor", "ran out of memory trying to allocate",
               "cuda out of memory", "cuda error: out of memory", "cannot allocate memory", "std::bad_alloc",
               "memoryerror")
# ...unless the line says the caller can do without the memory: the BFC allocator's warning where a request that may
# be refused was (XLA's autotuner asking for scratch). Read as a failure, it ended 4 of the fit's JAX probes on the
# H100 at c3d4247 as out of memory in import, context or compile (tests/data/xla_allocator_lines.txt).
NOT_A_FAILURE = "the caller indicates that this is not a failure"
DEFAULT_TIMEOUT_S = 600.0
# One folder per worker in the orchestrator's TMPDIR, named after the orchestrator's pid: a later run removes those
# whose orchestrator no longer runs (killed outright, it could not), and never one whose orchestrator is alive.
FOLDER_PREFIX = "footprint-"
OWN_FOLDER = re.compile(rf"{FOLDER_PREFIX}(\d+)-[a-z0-9_]+")
# A failure's `recorded_by`: the worker's own record ("worker"), or this side, from the exit and the output.
ORCHESTRATOR = "orchestrator"
GROUP_GONE_S = 10.0  # how long the worker's process group gets to be gone after its SIGKILL
# the workers of this process's threads, each with the stop of the executor that started it (`stop_running`), and
# those a stop killed before they had ended on their own
_RUNNING: dict[subprocess.Popen, threading.Event | None] = {}
_STOPPED: set[subprocess.Popen] = set()
_RUNNING_LOCK = threading.Lock()


class Stopped(Exception):
    """The executor stopped this scenario (`stop_running`): its worker was killed, or never started, so it has no
    record, and the run lists it as missing (--resume runs it again)."""


WORKER_SETTINGS = {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def set_variables(scenario: Scenario | None = None, folder: Path | None = None) -> dict[str, str]:
    """What the suite sets on purpose: our settings, the scenario's allocator variables and, given the scenario's
    own `folder`, empty compile caches there: torch.compile (Inductor, AOTAutograd, Triton on a GPU) would
    otherwise load what an earlier run compiled, and its phases would measure a cache, not compiling. Its TMPDIR
    is `folder/tmp` too: what the worker and its helpers leave there (the compile helper's folder) goes with the
    folder, however the worker ended. In a bench, the bench's XLA compilation cache (COMPILE_CACHE_VARIABLE), the
    one thing its scenarios share: a pool-off twin loads what its pooled run's compile helper compiled."""
    in_folder = ({"TORCHINDUCTOR_CACHE_DIR": str(folder / "inductor"), "TRITON_CACHE_DIR": str(folder / "triton"),
                 "TMPDIR": str(folder / "tmp")} if folder else {})
    bench = {COMPILE_CACHE_VARIABLE: os.environ[COMPILE_CACHE_VARIABLE]} if os.environ.get(COMPILE_CACHE_VARIABLE) \
        else {}
    return WORKER_SETTINGS | (scenario.allocator_settings["env"] if scenario else {}) | in_folder | bench


def passed_variables() -> dict[str, str]:
    """The caller's variables that steer a framework (PASSED_PREFIXES, less HELD_BACK and secrets), beside the
    allowlist's."""
    return {name: value for name, value in sorted(os.environ.items())
            if name.startswith(PASSED_PREFIXES) and not name.startswith(HELD_BACK) and name not in ENV_ALLOWLIST
            and not any(word in name for word in SECRET_WORDS)}


def worker_environment(scenario: Scenario | None = None, folder: Path | None = None) -> dict[str, str]:
    """The allowlist, the passed variables, then `set_variables`, which win: the worker's whole environment, fixed
    before any import (the adapter's own variables win in the worker too)."""
    inherited = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    return inherited | passed_variables() | set_variables(scenario, folder)


def overridden(passed: dict[str, str], suite_set: dict[str, str], worker: dict) -> dict[str, str]:
    """The passed variables the suite set otherwise on purpose (the orchestrator, the adapter in the worker, its
    compile cache), each with the value it set: what the run used in place of the user's."""
    helper = worker.get("compile_helper") or {}
    on_purpose = suite_set | (worker.get("env_set") or {}) | (helper.get("env_set") or {})
    return {name: on_purpose[name] for name, value in passed.items() if on_purpose.get(name, value) != value}


def _nvml_source(scenario: Scenario) -> tuple[nvml.NvmlSource | None, str]:
    """The driver for a GPU run, or why there is none."""
    if scenario.device != "cuda":
        return None, "the run is on the CPU: no GPU memory to sample"
    try:
        return nvml.NvmlSource(nvml.visible_gpu_index()), ""
    except Exception as error:  # no library, no driver, no such GPU: say which
        return None, f"NVML unavailable: {type(error).__name__}: {error}"


def _tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _shape_fault(record: object) -> str | None:
    """What is wrong with a worker's record that the orchestrator could not read on, or None."""
    if not isinstance(record, dict):
        return f"the worker's record is a JSON {type(record).__name__}, not an object"
    wrong = [key for key, kind in {"status": str, "scenario": dict}.items() if not isinstance(record.get(key), kind)]
    if wrong:
        return f"the worker's record has no valid {', '.join(wrong)}"
    fault = shape_fault(record)
    return f"the worker's record: {fault}" if fault else None


def _read_record(path: Path, scenario: Scenario) -> tuple[dict, str | None]:
    """The worker's record as far as it got (a bare one if it never wrote), and why it cannot be used, if so."""
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return scenario.bare_record(), None
    fault = _shape_fault(record)
    return (scenario.bare_record(), fault) if fault else (record, None)


# Signals that come from outside the worker (a person, a scheduler, a killer): the worker did not crash.
SENT_FROM_OUTSIDE = (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def out_of_memory(output: str) -> tuple[str, str | None] | None:
    """The first line of a worker's output that says an allocation failed for good (`OOM_MARKERS`, not
    `NOT_A_FAILURE`), stripped, with the phase it names: `compile` for a line of the compile helper (it compiles
    before the device phases, whatever phase the worker is in when the line is read), None for the worker's current one.
    None where no line says so. The one reading of output for out-of-memory evidence, live and after the end."""
    for line in output.splitlines():
        lowered = line.lower()
        if NOT_A_FAILURE not in lowered and any(marker in lowered for marker in OOM_MARKERS):
            return line.strip(), "compile" if line.startswith(HELPER_PREFIX) else None
    return None


def _outcome(record: dict, returncode: int, timed_out: bool, output_tail: str, timeout: float,
             oom_killed: list[str]) -> tuple[str, str, str | None]:
    """(status, message, phase) for a worker that did not finish with a status of its own. A SIGKILL is `oom` only
    where the kernel counted an out-of-memory kill while the worker ran (`oom_killed` names the counters that
    rose); otherwise the output's `out_of_memory` line decides, and names the phase where it came from the helper."""
    phase, oom = record.get("current_phase"), out_of_memory(output_tail)
    if timed_out:
        return "timeout", f"no result after {timeout:g} s; the worker was killed", phase
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if -returncode == signal.SIGKILL and oom_killed:
            return ("oom", f"killed by {name}; the kernel's out-of-memory kill count rose ({', '.join(oom_killed)})",
                    phase)
        if -returncode in SENT_FROM_OUTSIDE:
            uncounted = ", with no out-of-memory kill counted by the kernel" if name == "SIGKILL" else ""
            return "killed", f"killed by {name} from outside the suite{uncounted}", phase
        if oom:
            return "oom", f"killed by {name} after: {oom[0]}", oom[1] or phase
        return "crashed", f"killed by {name}", phase
    last = output_tail.splitlines()[-1] if output_tail else "no output"
    if oom:
        return "oom", f"exit status {returncode} after: {oom[0]}", oom[1] or phase
    return "crashed", f"exit status {returncode} without a result: {last}", phase


# Once an allocation failed for good, XLA's and TensorFlow's BFC allocator has waited up to 10 s for memory to be
# freed; a JAX run whose pool is full then waits that long again for every array it dispatched, and would run into
# its timeout (a 2 GiB fit probe of keras200m ran past 100 s): its outcome is known already.
ALLOCATOR_GRACE_S = 5.0  # time for the worker to raise and record the out-of-memory error itself
POLL_S = 0.5


def _out_of_memory_so_far(log: Path) -> tuple[str, str | None] | None:
    """`out_of_memory` of the worker's whole output so far."""
    return out_of_memory(log.read_text(errors="replace") if log.exists() else "")


def _wait(process: subprocess.Popen, log: Path, timeout: float) -> tuple[int, str | None]:
    """(exit status, why the suite ended it: "timeout", "allocator" or None). A worker whose output said an
    allocation failed for good and that has not ended a grace period later is ended then, not at its timeout.
    Either way its whole process group is gone when this returns (`_end`)."""
    deadline, allocator_deadline = time.monotonic() + timeout, None
    while not _exited(process, POLL_S):
        now = time.monotonic()
        if allocator_deadline is None and _out_of_memory_so_far(log):
            allocator_deadline = now + ALLOCATOR_GRACE_S
        ended = ("timeout" if now >= deadline else
                 "allocator" if allocator_deadline is not None and now >= allocator_deadline else None)
        if ended:
            return _end(process), ended
    return _end(process), None


def _exited(process: subprocess.Popen, seconds: float) -> bool:
    """Whether the worker exits within `seconds`, leaving it unreaped: while its zombie holds its pid, no other
    process can be given its group's id, so `_end` can kill the group it left without reaching a stranger."""
    deadline = time.monotonic() + seconds
    while os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _end(process: subprocess.Popen) -> int:
    """Kills the worker's process group, waits until none of it runs, then reaps the worker: a helper left by a
    worker that ended (or was killed from outside) outlives no call, and none writes in the folder being removed."""
    deadline = time.monotonic() + GROUP_GONE_S
    while True:
        _kill_group(process)  # again each time: a member may have forked since
        if not _group_running(process.pid) or time.monotonic() >= deadline:
            return process.wait()
        time.sleep(0.02)


def _group_running(group: int) -> bool:
    """Whether a process of the group still runs (a zombie does not: it holds nothing and writes nothing), from
    /proc; where there is none, whether the group still exists."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):  # ended while being read
            state, _, process_group = stat.read_text().rpartition(")")[2].split()[:3]
            if state != "Z" and int(process_group) == group:
                return True
    return False


def _kill_group(process: subprocess.Popen) -> None:
    """Kills the worker with its whole process group (helpers a framework started too), if it is still there."""
    if process.returncode is not None:  # reaped: its id may be another process's by now
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _remove(folder: Path) -> None:
    """Removes a worker's folder and never raises for it; an interrupt (SIGINT, SIGTERM) that comes while it does
    is raised once the folder is gone, so a stopped run leaves none behind."""
    stopped: BaseException | None = None
    for _ in range(3):  # an interrupt in the middle, or a file that appeared while removing
        try:
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                break
        except BaseException as error:  # an interrupt: the removal finishes first, it is raised below
            stopped = stopped or error
    if folder.exists():
        print(f"footprint: warning: could not remove {folder}", file=sys.stderr)
    if stopped:
        raise stopped


def remove_stale_folders(root: Path | None = None) -> list[Path]:
    """Removes the worker folders (`footprint-<pid>-...`) that orchestrators killed outright left in `root`
    (TMPDIR): those of this user whose pid no longer runs. A folder whose pid runs is kept, even where the pid
    is another process's by now."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in (root or Path(tempfile.gettempdir())).iterdir():
            match = OWN_FOLDER.fullmatch(entry.name)
            with contextlib.suppress(OSError):
                if (match and not alive(int(match[1])) and entry.is_dir() and not entry.is_symlink()
                        and entry.stat().st_uid == os.getuid()):
                    _remove(entry)
                    removed.append(entry)
    return removed


def stop_running(stop: threading.Event) -> None:
    """Sets `stop` and kills the workers started under it: an executor running several at once stops them this way.
    A worker that had ended on its own keeps its record, however late its thread reads it; one killed here, or one
    a thread would start after, is `Stopped` instead, so no kill of the stop's is ever a scenario's result."""
    with _RUNNING_LOCK:
        stop.set()
        for process, started_under in _RUNNING.items():
            if started_under is stop:
                if not _ended(process):
                    _STOPPED.add(process)
                _kill_group(process)


def _ended(process: subprocess.Popen) -> bool:
    """Whether the worker has exited, without reaping it (its own thread does)."""
    if process.returncode is not None:
        return True
    try:
        return _exited(process, 0)
    except ChildProcessError:  # reaped by its thread meanwhile
        return True


def _fault_for(scenario: Scenario, fault: str | None) -> str | None:
    """The fault this scenario gets: "PHASE:KIND@train" (or @infer) gives it to scenarios of that kind only, so a
    test can hold one scenario of a suite while another finishes."""
    fault, _, only = (fault or "").partition("@")
    return fault if fault and only in ("", scenario.kind) else None


def _unavailable(scenario: Scenario) -> dict:
    """The record of a technique the framework does not have: recorded, not imitated, with no worker run."""
    return scenario.bare_record() | {
            "status": "unavailable",
            "failure": {"phase": None, "message": scenario.unavailable, "recorded_by": ORCHESTRATOR},
            "nvml": {"available": False, "reason": "not run"},
            "run": {"git_commit": environment.git_commit(), "machine": environment.machine(), "wall_seconds": 0.0}}


@dataclass
class Started:
    """A scenario's worker, started by `start_worker` and registered in `_RUNNING`, maybe held at its gate (the
    overlap: it imports while another worker measures); `finish` releases it and waits for its record."""

    scenario: Scenario
    python: str
    tmp: Path
    log: Path
    out: Path
    process: subprocess.Popen
    source: nvml.NvmlSource | None
    no_source: str
    sampler: nvml.Sampler | None
    baseline: nvml.Sample | None  # None until released where it was held: the device's before it may touch it
    marks: dict[str, str]
    gate: int | None  # this side of its gate, until released; None for a worker started in its turn
    held: bool  # whether it was started ahead, at a gate
    started_at: float  # time.time() before it started
    start: float  # time.monotonic() then
    kills_before: dict[str, int]  # the kernel's out-of-memory kills then
    released: float | None = None
    ended: float | None = None

    def release(self) -> None:
        """Lets a held worker go on to its context (a worker that ended in its import never reads it)."""
        if self.gate is None:
            return
        self.baseline = self.sampler.sample() if self.sampler else None  # the device now: anyone on it is another
        with contextlib.suppress(OSError):  # it ended before its gate (its import failed): its record says so
            os.write(self.gate, RELEASE)
        os.close(self.gate)
        self.gate = None

    def abandon(self) -> None:
        """Ends the worker, its sampler and its folder, whatever state they are in: an interrupted or stopped run
        leaves none of them."""
        gate, self.gate = self.gate, None
        _discard(self.process, gate, self.sampler, self.source, self.tmp)


def _discard(process: subprocess.Popen | None, gate: int | None, sampler: nvml.Sampler | None,
             source: nvml.NvmlSource | None, tmp: Path) -> None:
    """Ends what a worker's start made, as far as it got: its gate, its process group, its sampler, its folder."""
    try:
        if gate is not None:
            os.close(gate)
        if process is not None:
            _end(process)
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(process, None)
            _STOPPED.discard(process)
        if sampler and source:
            sampler.stop()
            source.close()
        _remove(tmp)


def start_worker(scenario: Scenario, fault: str | None = None, stop: threading.Event | None = None,
                 held: bool = False) -> Started | dict:
    """Starts `scenario`'s worker in its own folder (`footprint-<pid>-...` in TMPDIR), or returns the record of a
    scenario that runs none (a technique the framework does not have). `held`: at a gate after its import phase,
    until `finish` releases it (models.protocol.GATE_VARIABLE); it holds no device context meanwhile, so the device
    baseline is read at its release. `fault`: see `run_scenario`."""
    fault = _fault_for(scenario, fault or os.environ.get("FOOTPRINT_FAULT") or None)
    scenario = replace(scenario, device=device.resolve(scenario.device))
    if scenario.unavailable:  # a technique the framework does not have: recorded, not imitated
        return _unavailable(scenario)
    python = interpreter(scenario.framework, scenario.device)
    source, no_source = _nvml_source(scenario)
    sampler = nvml.Sampler(source.read) if source else None
    baseline = None if held or not sampler else sampler.sample()  # before the worker exists: anyone is another
    remove_stale_folders()
    # named before it exists and made inside the `try`: a stop (SIGINT, SIGTERM) that lands as it is made still
    # finds it removed
    tmp = Path(tempfile.gettempdir()) / f"{FOLDER_PREFIX}{os.getpid()}-{secrets.token_hex(8)}"
    gate_end = worker_end = None
    process: subprocess.Popen | None = None
    try:
        tmp.mkdir(mode=0o700)
        out, log = tmp / "record.json", tmp / "output.txt"
        (tmp / "tmp").mkdir()  # the worker's TMPDIR: where missing, Python's tempfile would fall back to /tmp
        command = [python, "-m", "frameworks.worker", "scenario", write_scenario(scenario.to_dict(), tmp), str(out)]
        command += ["--fault", fault] if fault else []
        marks = sampler.open_marks() if sampler else {}  # a reading at each phase boundary, however short
        started_at, start, kills_before = time.time(), time.monotonic(), oom_kills.counts()
        gated: dict[str, str] = {}
        if held:
            worker_end, gate_end = os.pipe()
            gated = {GATE_VARIABLE: str(worker_end)}
        passed = (*(sampler.worker_fds if sampler else ()), *((worker_end,) if held else ()))
        with log.open("wb") as output:
            # started and registered as one step: a stop finds it in `_RUNNING` (another thread's `stop_running`),
            # or is raised once it is there (a stop raised inside Popen, after the fork, would leave it unseen)
            with interrupts.deferred(), _RUNNING_LOCK:
                if stop is not None and stop.is_set():
                    raise Stopped(f"{scenario.label}: stopped before its worker started")
                process = subprocess.Popen(command, cwd=ROOT, env=worker_environment(scenario, tmp) | marks | gated,
                                           stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                           start_new_session=True, pass_fds=passed)
                _RUNNING[process] = stop
        if sampler:
            sampler.close_worker_fds()
        return Started(scenario, python, tmp, log, out, process, source, no_source, sampler, baseline, marks, gate_end,
                       held, started_at, start, kills_before)
    except BaseException:  # interrupted, or it could not start: nothing of it outlives the call
        _discard(process, gate_end, sampler, source, tmp)
        raise
    finally:
        if worker_end is not None:
            os.close(worker_end)


def finish(started: Started | dict, timeout: float = DEFAULT_TIMEOUT_S, then: Callable[[], None] | None = None,
           after: tuple[str, float] | None = None) -> dict:
    """Releases the worker `start_worker` started (where it was held), calls `then` once it runs (the executor
    starts the next scenario's worker ahead there), waits for it and returns its complete record; never raises for
    the worker's faults (its executor's stop raises `Stopped`). Its folder and every process of its group are gone
    when this returns. The timeout counts from the release. `after`: the scenario whose worker ran before this one
    (its label, and when it ended), which a held worker's first phases overlapped: the record's `run.overlap`."""
    if isinstance(started, dict):  # no worker ran
        if then:
            then()
        return started
    try:
        started.release()
        started.released = time.monotonic()
        if started.sampler:
            started.sampler.start(started.process.pid)
        if then:
            then()
        returncode, gave_up = _wait(started.process, started.log, timeout)
        started.ended = time.monotonic()
        if started.process in _STOPPED:
            raise Stopped(f"{started.scenario.label}: its worker was stopped")
        (record, shape_fault), output_tail = _read_record(started.out, started.scenario), _tail(started.log)
        oom = _out_of_memory_so_far(started.log)
    except BaseException:  # interrupted (suites.run.interrupts): no worker outlives the run
        started.abandon()
        raise
    with _RUNNING_LOCK:
        _RUNNING.pop(started.process, None)
    _remove(started.tmp)
    scenario, timed_out = started.scenario, gave_up == "timeout"
    _attach_nvml(record, scenario, started.sampler, started.baseline, started.source, started.no_source,
                 started.released if started.held else None)
    _settle_status(record, shape_fault, gave_up, oom, returncode, timed_out, output_tail, timeout,
                   started.kills_before)
    suite_set, passed = set_variables(scenario, started.tmp) | started.marks, passed_variables()
    record["run"] = {
        "interpreter": started.python,
        "exit_code": returncode,
        "wall_seconds": round(started.ended - started.start, 3),
        "started_at_unix": round(started.started_at, 3),
        "host": socket.gethostname(),
        "timeout_s": timeout,
        "git_commit": environment.git_commit(),
        "machine": environment.machine(),
        "orchestrator_python": sys.version.split()[0],
        "env_set": suite_set,
        "env_inherited": sorted(name for name in ENV_ALLOWLIST if name in os.environ),
        "env_passed": passed,
        "env_overridden": overridden(passed, suite_set, record.get("worker") or {}),
        "output_tail": output_tail if record["status"] != "ok" else "",
        "overlap": _overlap(record, started, after),
    }
    cause = known.classify(record) if record["status"] != "ok" else None
    if cause:
        record["failure"]["known_cause"] = cause
    return record


def _attach_nvml(record: dict, scenario: Scenario, sampler: nvml.Sampler | None, baseline: nvml.Sample | None,
                 source: nvml.NvmlSource | None, no_source: str, released: float | None) -> None:
    """Adds to the record what NVML saw during the run (and how isolated it was), or why there is no reading.
    `released`: when a worker started ahead passed its gate (its sampling started then)."""
    if sampler and baseline and source:  # all three or none
        record["nvml"] = nvml.attribute(sampler.stop(), baseline, record["phases"], sampler.read_seconds, released)
        record["nvml"]["gpu"] = source.describe()
        record["isolation"] = nvml.isolation(baseline, str(record["nvml"]["gpu"]["uuid"]))
        source.close()
        for warning in record["nvml"]["warnings"] + [f"not isolated: {reason}"
                                                     for reason in record["isolation"]["reasons"]]:
            print(f"footprint: warning: {scenario.label}: {warning}", file=sys.stderr)
    else:
        record["nvml"] = {"available": False, "reason": no_source}


def _settle_status(record: dict, shape_fault: str | None, gave_up: str | None, oom: tuple[str, str | None] | None,
                   returncode: int, timed_out: bool, output_tail: str, timeout: float,
                   kills_before: dict[str, int]) -> None:
    """Where the worker's own record cannot stand (malformed, unfinished, timed out, killed), the orchestrator's
    status and failure replace it."""
    if shape_fault:
        record["status"], record["failure"] = "crashed", {"phase": None, "message": shape_fault,
                                                          "recorded_by": ORCHESTRATOR}
    elif gave_up == "allocator" and oom and record["status"] not in STATUSES:
        record["status"] = "oom"
        record["failure"] = {"phase": oom[1] or record.get("current_phase"), "message": (
            f"out of memory, and the worker had not ended {ALLOCATOR_GRACE_S:g} s later (XLA's allocator retries "
            f"each allocation for up to 10 s); the worker was killed after: {oom[0]}"),
            "recorded_by": ORCHESTRATOR}
    elif record["status"] not in STATUSES or timed_out:
        status, message, phase = _outcome(record, returncode, timed_out, output_tail, timeout,
                                          oom_kills.rose(kills_before, oom_kills.counts()))
        record["status"] = status
        record["failure"] = {"phase": phase, "message": message, "recorded_by": ORCHESTRATOR}


def _overlap(record: dict, started: Started, after: tuple[str, float] | None) -> dict | None:
    """Which of a held worker's phases ran while the worker before it still ran (their import; a phase it failed in
    before its gate too, which its record has no times for), and how long it was started ahead of its release;
    None for a worker started in its turn."""
    if not started.held:
        return None
    label, ended = after or ("", 0.0)
    overlapped = [phase["name"] for phase in record["phases"] if phase["started_at"] < ended]
    failed_in = (record.get("failure") or {}).get("phase")
    passed = isinstance(record.get("worker"), dict) and "released_at" in (record["worker"].get("gate") or {})
    if after and failed_in and failed_in not in overlapped and not passed:
        overlapped.append(failed_in)
    return {"with": label or None, "phases": overlapped,
            "started_ahead_s": round((started.released or started.start) - started.start, 3)}


def run_scenario(scenario: Scenario, timeout: float = DEFAULT_TIMEOUT_S, fault: str | None = None,
                 stop: threading.Event | None = None) -> dict:
    """Runs `scenario` in a new process of its framework's interpreter, in its turn (`start_worker`, then
    `finish`); never raises for the worker's faults (an executor's `stop`, set by `stop_running`, raises
    `Stopped`).

    `fault` ("PHASE:raise", "PHASE:hang", "PHASE:abort", "PHASE:garbage", the FAKE allocator lines
    "PHASE:allocator-oom" and "PHASE:allocator-warning"; "PHASE:exhaust" under a `ulimit -v`) injects a failure,
    for the suite's own tests; FOOTPRINT_FAULT gives it to every scenario of a command, or with "@KIND" to those of
    one kind (the fault matrix, tests/test_faults.py). Its folder (`footprint-<pid>-...` in TMPDIR) is gone when
    this returns, and so is every process of the worker's group; folders of orchestrators killed outright are
    removed first.
    """
    return finish(start_worker(scenario, fault, stop), timeout)
