"""Runs one scenario in a fresh worker process and always returns a complete record.

The parent owns the timeout and turns every way a worker can end (clean exit, exception,
out-of-memory, signal, hang) into a status with the phase and a message.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from models.record import RUNNING, SCHEMA_VERSION, STATUSES
from models.scenario import Scenario
from suites import device, environment
from suites.registry import ROOT, interpreter

# Inherited from the caller; everything else the worker sees is set on purpose.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                 "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME")
OOM_MARKERS = ("out of memory", "resource_exhausted", "cannot allocate memory", "std::bad_alloc")
DEFAULT_TIMEOUT_S = 600.0


WORKER_SETTINGS = {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def worker_environment() -> dict[str, str]:
    inherited = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    return inherited | WORKER_SETTINGS


def _tail(path: Path, lines: int = 15) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


def _read_record(path: Path, scenario: Scenario) -> dict:
    """The worker's record as far as it got; a bare one if it never wrote."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {"schema_version": SCHEMA_VERSION, "status": RUNNING, "failure": None,
                "scenario": scenario.to_dict(), "phases": [], "current_phase": None}


def _outcome(record: dict, returncode: int, timed_out: bool, output_tail: str, timeout: float) -> tuple[str, str]:
    """(status, message) for a worker that did not finish with a status of its own."""
    if timed_out:
        return "timeout", f"no result after {timeout:g} s; the worker was killed"
    if returncode < 0:
        name = signal.Signals(-returncode).name
        if -returncode == signal.SIGKILL:
            return "oom", f"killed by {name} (not by the suite): most likely the kernel's out-of-memory killer"
        return "crashed", f"killed by {name}"
    last = output_tail.splitlines()[-1] if output_tail else "no output"
    if any(marker in output_tail.lower() for marker in OOM_MARKERS):
        return "oom", f"exit status {returncode}: {last}"
    return "crashed", f"exit status {returncode} without a result: {last}"


def run_scenario(scenario: Scenario, timeout: float = DEFAULT_TIMEOUT_S, fault: str | None = None) -> dict:
    """Runs `scenario` in a new process of its framework's interpreter; never raises for the worker's faults.

    `fault` ("PHASE:raise", "PHASE:hang" or "PHASE:abort") injects a failure, for the suite's own tests.
    """
    scenario = replace(scenario, device=device.resolve(scenario.device))
    python = interpreter(scenario.framework)
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        out, log = Path(tmp) / "record.json", Path(tmp) / "output.txt"
        command = [python, "-m", "frameworks.worker", "scenario", json.dumps(scenario.to_dict()), str(out)]
        command += ["--fault", fault] if fault else []
        start = time.monotonic()
        with log.open("wb") as output:
            process = subprocess.Popen(command, cwd=ROOT, env=worker_environment(), stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
            try:
                returncode, timed_out = process.wait(timeout), False
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # the whole group: helpers a framework started too
                returncode, timed_out = process.wait(), True
        wall = time.monotonic() - start
        record, output_tail = _read_record(out, scenario), _tail(log)
    if record["status"] not in STATUSES or timed_out:
        status, message = _outcome(record, returncode, timed_out, output_tail, timeout)
        record["status"] = status
        record["failure"] = {"phase": record.get("current_phase"), "message": message}
    record["run"] = {
        "interpreter": python,
        "exit_code": returncode,
        "wall_seconds": round(wall, 3),
        "timeout_s": timeout,
        "git_commit": environment.git_commit(),
        "machine": environment.machine(),
        "orchestrator_python": sys.version.split()[0],
        "env_set": WORKER_SETTINGS,
        "env_inherited": sorted(name for name in ENV_ALLOWLIST if name in os.environ),
        "output_tail": output_tail if record["status"] != "ok" else "",
    }
    return record
