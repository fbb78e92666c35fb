"""The fault matrix: the real orchestrator on the CPU against each fault, and the same honest ending on every path.

Each row runs the command line as a user would (`python -m suites ...`, its own TMPDIR) with the probe net, injects
one fault and checks what the suite records: the status and phase, the exit code, `complete` and `missing`, and that
no worker process and no `footprint-*` temporary folder is left. `FAULTS` is also the README's table of faults
(`table()`; a test keeps the two in step). Worker faults are injected by the worker itself on request
(FOOTPRINT_FAULT=PHASE:KIND, the hook the suite's own tests use) or sent from outside, as a user's kill would be.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from suites.run import runfile
from suites.run.registry import ROOT
from tests.conftest import gone

PROBE = ["--framework", "torch", "--model", "probe", "--device", "cpu"]
BENCH = ["bench", "--suite", "default", "--device", "cpu", "--frameworks", "torch", "--models", "probe"]


@dataclass
class Ending:
    """What a command left behind."""

    code: int
    output: str
    workers: list[psutil.Process]
    results: Path
    tmp: Path

    def run_file(self, name: str = "default-cpu.json") -> dict:
        return json.loads((self.results / name).read_text())

    def record(self, name: str = "record.json") -> dict:
        return json.loads((self.results / name).read_text())


def _environment(base: Path, extra: dict[str, str]) -> dict[str, str]:
    (base / "tmp").mkdir(exist_ok=True)
    return os.environ | {"TMPDIR": str(base / "tmp"), "FOOTPRINT_RESULTS": str(base / "results")} | extra


def _workers(command: subprocess.Popen) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(command.pid).children(recursive=True)
                if "frameworks.worker" in " ".join(p.cmdline())]
    except psutil.NoSuchProcess:
        return []


def _in_phase(tmp: Path, phase: str) -> bool:
    """Whether a worker's own record (rewritten at each phase) says it is in `phase`."""
    for record in tmp.glob("footprint-*/record.json"):
        try:
            if json.loads(record.read_text()).get("current_phase") == phase:
                return True
        except (OSError, ValueError):
            continue
    return False


def run(base: Path, args: list[str], extra: dict[str, str] | None = None,
        interrupt: Callable[[subprocess.Popen, Path], bool] | None = None, send: int = signal.SIGTERM,
        to_worker: bool = False, timeout: float = 300) -> Ending:
    """`python -m suites ARGS`; where `interrupt(command, tmp)` turns true, `send` goes to the worker
    (`to_worker`) or to the command itself."""
    env = _environment(base, extra or {})
    seen: list[psutil.Process] = []
    with subprocess.Popen([sys.executable, "-m", "suites", *args], cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as command:
        deadline = time.monotonic() + timeout
        while interrupt and command.poll() is None and time.monotonic() < deadline:
            seen = _workers(command) or seen
            if interrupt(command, base / "tmp"):
                for target in (seen if to_worker else [psutil.Process(command.pid)]):
                    target.send_signal(send)
                break
            time.sleep(0.05)
        output, _ = command.communicate(timeout=timeout)
    return Ending(command.returncode, output, seen, base / "results", base / "tmp")


def _clean(ending: Ending) -> None:
    """No worker outlived the command, and no temporary folder of the suite's is left in its TMPDIR."""
    assert gone(ending.workers), ending.workers
    assert not list(ending.tmp.glob("footprint-*")), list(ending.tmp.iterdir())


def _stored(count: int) -> Callable[[subprocess.Popen, Path], bool]:
    return lambda command, tmp: len(list(tmp.parent.glob("results/*.store/*.json"))) >= count


def _phase(name: str) -> Callable[[subprocess.Popen, Path], bool]:
    return lambda command, tmp: _in_phase(tmp, name)


# ---- the rows: each runs its fault and checks the ending ----

def worker_raises(base: Path) -> None:
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:raise"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "error" and record["failure"]["phase"] == "build"
    _clean(ending)


def autotuner_warning(base: Path) -> None:
    """XLA's autotuner asking for scratch it may be refused, word for word as the H100 run at c3d4247 logged it (a
    FAKE of its output, printed by the worker's `allocator-warning` fault), is no out-of-memory: the run goes on."""
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "context:allocator-warning"})
    record = ending.record()
    assert ending.code == 0 and record["status"] == "ok" and not record.get("failure"), record.get("failure")
    _clean(ending)


def worker_hangs(base: Path) -> None:
    ending = run(base, ["run", *PROBE, "--timeout", "20", "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:hang"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "timeout" and record["failure"]["phase"] == "build"
    _clean(ending)


def _killed_from_outside(base: Path, sent: int, status: str) -> None:
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:hang"}, interrupt=_phase("build"), send=sent, to_worker=True)
    record = ending.record()
    assert ending.code == 1 and (record["status"], record["failure"]["phase"]) == (status, "build"), record
    _clean(ending)


def sigkill_from_outside(base: Path) -> None:
    _killed_from_outside(base, signal.SIGKILL, "killed")


def sigsegv_in_worker(base: Path) -> None:
    _killed_from_outside(base, signal.SIGSEGV, "crashed")


def garbage_output(base: Path) -> None:
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:garbage"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "crashed"
    assert record["failure"]["message"] == "the worker's record is a JSON list, not an object"
    _clean(ending)


LIMIT_KIB = 8 * 2**20  # `ulimit -v`: room for a framework's import; the exhaust fault takes the rest
# 16 GiB of fp32 weights: more than the limit leaves, less than the machine has (so `run` does not refuse it)
TOO_LARGE = {"name": "too-large", "input_shape": [16384], "loss": "mse", "layers": [{"type": "dense", "units": 262144}]}


def _out_of_memory(base: Path, framework: str, fault: str | None) -> None:
    """Under `ulimit -v` (the command and its worker): `exhaust` takes every byte the limit leaves and holds it, as a
    framework that ran out holds what it has; without it, the framework's own error at a 256 GiB layer. Either way
    the worker writes its own record (`recorded_by`), not the orchestrator reading its output."""
    (base / "results").mkdir()
    spec = base / "too-large.json"
    spec.write_text(json.dumps(TOO_LARGE))
    model = ["--model", "probe"] if fault else ["--model-file", str(spec)]
    out = base / "results" / "record.json"
    command = ["bash", "-c", f'ulimit -v {LIMIT_KIB} && exec "$0" "$@"', sys.executable, "-m", "suites", "run",
               "--framework", framework, *model, "--scenario", "infer", "--device", "cpu", "--out", str(out)]
    env = _environment(base, {"FOOTPRINT_FAULT": fault} if fault else {})
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    record = json.loads(out.read_text())
    assert done.returncode == 1 and (record["status"], record["failure"]["phase"]) == ("oom", "build"), record
    assert record["failure"]["recorded_by"] == "worker", record["run"]["output_tail"]
    assert not list((base / "tmp").glob("footprint-*"))


def torch_out_of_memory(base: Path) -> None:
    _out_of_memory(base, "torch", None)


def torch_exhausted(base: Path) -> None:
    _out_of_memory(base, "torch", "build:exhaust")


def jax_exhausted(base: Path) -> None:
    _out_of_memory(base, "jax", "build:exhaust")


def keras_tensorflow_exhausted(base: Path) -> None:
    _out_of_memory(base, "keras-tensorflow", "build:exhaust")


def orchestrator_killed(base: Path) -> None:
    """SIGKILL of the orchestrator itself: the kernel ends its worker with it (the worker watches its parent), and
    the folder it could not remove is removed by the next run; a live process's folder is never touched."""
    live = base / "tmp" / "footprint-1-of_a_live_process"  # pid 1 always runs: its folder is in use
    live.mkdir(parents=True)
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:hang"}, interrupt=_phase("build"), send=signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not gone(ending.workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ending.code == -signal.SIGKILL and ending.workers and gone(ending.workers)
    assert len(list(ending.tmp.glob("footprint-*"))) == 2  # its own, which it could not remove, and the live one
    after = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                {"FOOTPRINT_FAULT": "import:raise"})
    assert after.code == 1 and [path.name for path in ending.tmp.glob("footprint-*")] == [live.name]


def every_scenario_times_out(base: Path) -> None:
    ending = run(base, [*BENCH, "--timeout", "8"], {"FOOTPRINT_FAULT": "context:hang"})
    statuses = {record["status"] for record in ending.run_file()["records"]}
    assert statuses == {"timeout"} and ending.code == 1, ending.output[-2000:]
    assert "footprint: error: nothing was measured: all 4 scenarios of this run ended timeout" in ending.output
    _clean(ending)


def _stopped_bench(base: Path, sent: int) -> None:
    ending = run(base, BENCH, interrupt=_stored(1), send=sent)
    data = ending.run_file()
    assert ending.code == 130 and f"stopped by {signal.Signals(sent).name}" in ending.output, ending.output[-2000:]
    assert data["complete"] is False and data["missing"] and len(data["records"]) + len(data["missing"]) == 4
    assert not (ending.results / "default-cpu.json.store").exists()  # the run file holds all it had (docs/usage.md)
    _clean(ending)


def sigint_of_a_bench(base: Path) -> None:
    _stopped_bench(base, signal.SIGINT)


def sigterm_of_a_bench(base: Path) -> None:
    _stopped_bench(base, signal.SIGTERM)


def sigterm_of_a_fit(base: Path) -> None:
    fit = ["bench", "--suite", "fit", "--device", "cpu", "--frameworks", "torch", "--models", "heatmap68"]
    ending = run(base, fit, interrupt=lambda command, tmp: bool(_workers(command)))
    data = ending.run_file("fit-cpu.json")
    assert ending.code == 130 and data["complete"] is False and data.get("fits", []) == [], ending.output[-2000:]
    assert [(m["model"], m["fit_budget_bytes"]) for m in data["missing"]] == [("heatmap68", 900 * 10**6)]
    assert "footprint: wrote" in ending.output  # and it was: the file says what is missing
    _clean(ending)


def full_disk(base: Path) -> None:
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a small tmpfs needs root to mount here")
    disk = base / "results"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=160k", "tmpfs", str(disk)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs was refused here")
    try:
        ending = run(base, BENCH)
        lines = [line for line in ending.output.splitlines() if "No space left on device" in line]
        assert ending.code != 0 and lines and "Traceback" not in ending.output, ending.output[-3000:]
        assert not [path for path in disk.iterdir() if path.is_file() and path.stat().st_size == 0]
        _clean(ending)
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def read_only_output(base: Path) -> None:
    """A folder the user cannot write: mode 0500, or for root (who writes anyway) a read-only tmpfs."""
    folder = base / "results"
    folder.mkdir()
    root = os.geteuid() == 0
    if not root:
        folder.chmod(0o500)
    elif subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                        capture_output=True).returncode:
        pytest.skip("root writes into any folder, and mounting a read-only tmpfs was refused here")
    try:
        ending = run(base, BENCH)
    finally:
        if root:
            subprocess.run(["umount", str(folder)], check=True)
        else:
            folder.chmod(0o700)
    assert ending.code == 2 and ending.output.count("\n") == 1 and "cannot write" in ending.output
    _clean(ending)


def concurrent_runs(base: Path) -> None:
    path = base / "results" / "default-cpu.json"
    runfile.lock(path)  # this test process holds it, as a running bench would
    ending = run(base, BENCH)
    assert ending.code == 2 and "default-cpu.json is being written by another run (pid" in ending.output
    _clean(ending)


def run_out_on_a_locked_file(base: Path) -> None:
    path = base / "results" / "default-cpu.json"
    runfile.lock(path)
    path.write_text('{"kept": true}')
    ending = run(base, ["run", *PROBE, "--out", str(path)])
    assert ending.code == 2 and "default-cpu.json is being written by another run (pid" in ending.output
    assert path.read_text() == '{"kept": true}' and not ending.workers
    _clean(ending)


def report_of_bad_input(base: Path) -> None:
    (base / "results").mkdir()
    (base / "results" / "empty.json").write_text("")
    record = base / "results" / "record.json"
    record.write_text(json.dumps({"status": "ok", "scenario": {}}))
    for name in ("absent.json", "empty.json", "record.json"):
        ending = run(base, ["report", str(base / "results" / name)])
        assert ending.code == 2 and ending.output.count("\n") == 1 and "not a run file" in ending.output, ending.output


def batch_zero(base: Path) -> None:
    for command in (["run", *PROBE, "--batch", "0"], ["estimate", "--model", "probe", "--batch", "0"]):
        ending = run(base, command)
        assert ending.code == 2 and "omit --batch for the model's own" in ending.output and not ending.workers


@dataclass(frozen=True)
class Fault:
    name: str
    recorded: str
    check: Callable[[Path], None]


FAULTS = (
    Fault("the worker raises (in build)", "`error` in build; `run` exits 1", worker_raises),
    Fault("the worker hangs past its timeout (in build)", "`timeout` in build; the worker's process group killed",
          worker_hangs),
    Fault("SIGKILL of the worker from outside (in build)", "`killed` in build (`oom` only where the kernel counted "
          "an out-of-memory kill)", sigkill_from_outside),
    Fault("SIGSEGV of the worker (in build)", "`crashed` in build", sigsegv_in_worker),
    Fault("the worker writes garbage as its record", "`crashed`, with what was wrong with the record",
          garbage_output),
    Fault("out of memory under `ulimit -v`: torch's own error at a 16 GiB layer", "`oom` in build, in the "
          "worker's own record (`recorded_by: worker`), not read from its output", torch_out_of_memory),
    Fault("out of memory under `ulimit -v`, every byte taken: torch", "the same", torch_exhausted),
    Fault("out of memory under `ulimit -v`, every byte taken: jax", "the same", jax_exhausted),
    Fault("out of memory under `ulimit -v`, every byte taken: keras-tensorflow", "the same",
          keras_tensorflow_exhausted),
    Fault("SIGKILL of the orchestrator itself", "its worker ends with it; the next run removes the temporary folder "
          "it could not", orchestrator_killed),
    Fault("every scenario of a bench times out", "each `timeout` in the run file; the bench exits 1: nothing was "
          "measured", every_scenario_times_out),
    Fault("SIGINT (Ctrl-C) of a bench", "exit 130; `complete: false`, the rest under `missing`; --resume runs them",
          sigint_of_a_bench),
    Fault("SIGTERM of a bench", "the same as SIGINT", sigterm_of_a_bench),
    Fault("SIGTERM of a fit run (its first question)", "exit 130; the run file written, `complete: false`, the "
          "question under `missing`", sigterm_of_a_fit),
    Fault("a full disk (a 160 KiB tmpfs)", "one line naming the file; no traceback, no empty file; the records "
          "written before stay", full_disk),
    Fault("a read-only output folder", "refused before measuring, one line, exit 2", read_only_output),
    Fault("a second bench on the same run file", "refused, one line, exit 2", concurrent_runs),
    Fault("`run --out` on a run file a bench is writing", "refused, one line, exit 2; the file untouched",
          run_out_on_a_locked_file),
    Fault("`report` of a missing, empty or non-run file", "one line, exit 2", report_of_bad_input),
    Fault("`run --batch 0` (and `estimate --batch 0`)", "one line, exit 2: omit --batch for the model's own",
          batch_zero),
    Fault("XLA's autotuner warning (\"ran out of memory ... not a failure\", the c3d4247 line replayed)",
          "nothing: the run goes on, `ok` (only an allocation that failed for good is `oom`; a compile helper's "
          "line names `compile`)", autotuner_warning),
)


def table() -> str:
    """The README's table of faults, from the rows above."""
    return "\n".join(["| fault | what the suite records |", "|---|---|",
                      *(f"| {fault.name} | {fault.recorded} |" for fault in FAULTS)])


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.check.__name__ for fault in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    fault.check(tmp_path)


def test_the_readme_lists_every_fault_as_the_matrix_runs_it() -> None:
    assert table() in (ROOT / "README.md").read_text()
