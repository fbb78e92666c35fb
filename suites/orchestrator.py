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

from models.record import RUNNING, SCHEMA_VERSION, STATUSES, one_line
from models.scenario import Scenario
from suites import accounting, constants, device, environment, known, nvml
from suites.registry import ROOT, interpreter

# Inherited from the caller; everything else the worker sees is set on purpose.
ENV_ALLOWLIST = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                 "NVIDIA_VISIBLE_DEVICES", "CUDA_HOME")
OOM_MARKERS = ("out of memory", "resource_exhausted", "cannot allocate memory", "std::bad_alloc")
DEFAULT_TIMEOUT_S = 600.0


WORKER_SETTINGS = {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def set_variables(scenario: Scenario | None = None) -> dict[str, str]:
    """What the suite sets on purpose: our settings and the scenario's allocator variables."""
    return WORKER_SETTINGS | (scenario.allocator_settings["env"] if scenario else {})


def worker_environment(scenario: Scenario | None = None) -> dict[str, str]:
    """The allowlist plus `set_variables`: the worker's whole environment, fixed before any import."""
    inherited = {name: os.environ[name] for name in ENV_ALLOWLIST if name in os.environ}
    return inherited | set_variables(scenario)


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
    if scenario.unavailable:  # a technique the framework does not have: recorded, not imitated
        return {"schema_version": SCHEMA_VERSION, "status": "unavailable", "scenario": scenario.to_dict(),
                "failure": {"phase": None, "message": scenario.unavailable}, "phases": [],
                "framework": {"name": scenario.framework}, "allocator": scenario.allocator_settings,
                "nvml": {"available": False, "reason": "not run"},
                "run": {"git_commit": environment.git_commit(), "machine": environment.machine(), "wall_seconds": 0.0}}
    python = interpreter(scenario.framework, scenario.device)
    source, no_source = _nvml_source(scenario)
    sampler = nvml.Sampler(source.read) if source else None
    baseline = sampler.sample() if sampler else None  # before the worker exists: anyone here is someone else
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        out, log = Path(tmp) / "record.json", Path(tmp) / "output.txt"
        command = [python, "-m", "frameworks.worker", "scenario", json.dumps(scenario.to_dict()), str(out)]
        command += ["--fault", fault] if fault else []
        start = time.monotonic()
        with log.open("wb") as output:
            process = subprocess.Popen(command, cwd=ROOT, env=worker_environment(scenario), stdin=subprocess.DEVNULL,
                                       stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
            if sampler:
                sampler.start(process.pid)
            try:
                returncode, timed_out = process.wait(timeout), False
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)  # the whole group: helpers a framework started too
                returncode, timed_out = process.wait(), True
        wall = time.monotonic() - start
        record, output_tail = _read_record(out, scenario), _tail(log)
    if sampler and baseline and source:  # all three or none
        record["nvml"] = nvml.attribute(sampler.stop(), baseline, record["phases"], sampler.read_seconds)
        record["nvml"]["gpu"] = source.describe()
        source.close()
        for warning in record["nvml"]["warnings"]:
            print(f"footprint: warning: {scenario.label}: {warning}", file=sys.stderr)
    else:
        record["nvml"] = {"available": False, "reason": no_source}
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
        "env_set": set_variables(scenario),
        "env_inherited": sorted(name for name in ENV_ALLOWLIST if name in os.environ),
        "output_tail": output_tail if record["status"] != "ok" else "",
    }
    cause = known.classify(record) if record["status"] != "ok" else None
    if cause:
        record["failure"]["known_cause"] = cause
    try:
        record |= accounting.account(record, constants.load(scenario.device))
    except Exception as error:  # never lose a measurement to the arithmetic beside it
        record["accounting_error"] = one_line(error)
        print(f"footprint: warning: {scenario.label}: no estimate: {record['accounting_error']}", file=sys.stderr)
    return record
