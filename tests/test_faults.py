"""The fault matrix: the real orchestrator on the CPU against each fault, and the same honest ending on every path.

Each row runs the command line as a user would (`python -m suites ...`, its own TMPDIR) with the probe net (or, where
that tells the same faster, the command line's own `main` or the run file's own writer in this process), injects
one fault and checks what the suite records: the status and phase, the exit code, `complete` and `missing`, and that
no worker process and no `footprint-*` temporary folder is left. `FAULTS` is also docs/faults.md's table of faults
(`table()`; a test keeps the two in step). Worker faults are injected by the worker itself on request
(FOOTPRINT_FAULT=PHASE:KIND, the hook the suite's own tests use) or sent from outside, as a user's kill would be.

The device rows (`DEVICE_ROWS`, run by `test_device_row` for torch and for JAX) are the rows a GPU must see: out of
memory under the framework's own cap, SIGKILL of the worker from outside, SIGTERM of a bench, and the budget probe
that once hung (`fit`). They run on the device FOOTPRINT_FAULT_DEVICE names (default `cpu`; `make gpu-check` gives
`cuda`), for the frameworks FOOTPRINT_FAULT_FRAMEWORKS lists (comma-separated; default both), with the same row
functions as the CPU rows: `pytest tests/test_faults.py -k device_row` (`DEVICE_ROWS_SELECTION`) runs them alone.
Without FOOTPRINT_FAULT_DEVICE they skip: the check's faults piece runs them (in `make test`, its small form).
On the CPU a device row that is exactly a row of `FAULTS` is skipped (it runs there); on a GPU every one runs.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import psutil
import pytest
from onnx import TensorProto, helper, numpy_helper

from frameworks.worker import AUTOTUNER_GOES_ON_S
from models.importers.files import load_spec_file
from models.record import FRAME_FIELD_CHARS, FRAMES_KEPT, TEMPORARY, last_frames
from models.scenario import PHASES, Scenario
from models.spec import MAX_SIZE, SpecError
from suites.__main__ import main
from suites.analysis.compare import SPREAD_FIELD
from suites.analysis.fit import EXIT_CODES, parse_budget
from suites.bench import check
from suites.run import runfile
from suites.run.orchestrator import ALLOCATOR_GRACE_S, POLL_S
from suites.run.pieces import STATE
from suites.run.registry import ROOT
from tests.conftest import gone
from tests.test_fuzz_importers import keras_convnet, keras_tensor
from tests.test_onnx_import import residual_net


def probe(framework: str = "torch", device: str = "cpu") -> list[str]:
    """`run` and `fit`'s arguments for the probe net."""
    return ["--framework", framework, "--model", "probe", "--device", device]


def bench(framework: str = "torch", device: str = "cpu") -> list[str]:
    """The default suite on the probe net alone (its scenarios: each kind, and on a GPU each pool off too)."""
    return ["bench", "--suite", "default", "--device", device, "--frameworks", framework, "--models", "probe"]


PROBE = probe()
BENCH = bench()
PUBLISHED_CPU = ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json"
PUBLISHED_CUDA = ROOT / "results" / "h100-c3d4247" / "default-cuda.json"
FIT_RUN = ROOT / "results" / "cpu-248a74c" / "fit-cpu.json"  # answers only: no scenario records


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


def _in_phase(tmp: Path, phase: str, kind: str | None = None) -> int:
    """How many workers' own records (rewritten at each phase) say they are in `phase` (those of scenarios of `kind`
    alone, where given)."""
    count = 0
    for record in tmp.glob("footprint-*/record.json"):
        try:
            written = json.loads(record.read_text())
            count += written.get("current_phase") == phase and kind in (None, written["scenario"]["kind"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return count


def run(base: Path, args: list[str], extra: dict[str, str] | None = None,
        interrupt: Callable[[subprocess.Popen, Path], bool] | None = None, send: int = signal.SIGTERM,
        to_worker: bool = False, timeout: float = 300, limit_kib: int | None = None) -> Ending:
    """`python -m suites ARGS`, watched for the workers it starts; where `interrupt(command, tmp)` turns true, `send`
    goes to the worker (`to_worker`) or to the command itself. A command still running at `timeout` is killed and
    fails the row (a quadratic estimate, a hang). `limit_kib`: under `ulimit -v` (the command and its workers)."""
    env = _environment(base, extra or {})
    seen: list[psutil.Process] = []
    command_line = [sys.executable, "-m", "suites", *args]
    if limit_kib is not None:  # the shell execs the command: its pid is the command's
        command_line = ["bash", "-c", f'ulimit -v {limit_kib} && exec "$0" "$@"', *command_line]
    with subprocess.Popen(command_line, cwd=ROOT, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as command:
        deadline = time.monotonic() + timeout
        while command.poll() is None and time.monotonic() < deadline:
            seen = _workers(command) or seen
            if interrupt and interrupt(command, base / "tmp"):
                for target in (seen if to_worker else [psutil.Process(command.pid)]):
                    target.send_signal(send)
                interrupt = None
            time.sleep(0.05)
        try:
            output, _ = command.communicate(timeout=max(deadline - time.monotonic(), 0) + 60)
        except subprocess.TimeoutExpired:
            command.kill()
            pytest.fail(f"python -m suites {' '.join(args)}: still running after {timeout:g} s; killed")
    return Ending(command.returncode, output, seen, base / "results", base / "tmp")


def _clean(ending: Ending, held: Path | None = None) -> None:
    """No worker outlived the command, no temporary folder of the suite's is left in its TMPDIR, and no lock file
    or write temporary in the results folder (but the lock of `held`, which this test process holds)."""
    assert gone(ending.workers), ending.workers
    assert not list(ending.tmp.glob("footprint-*")), list(ending.tmp.iterdir())
    allowed = {held.with_name(f".{held.name}.lock")} if held else set()
    assert set(ending.results.glob(".*")) <= allowed, list(ending.results.glob(".*"))


def _stored(count: int) -> Callable[[subprocess.Popen, Path], bool]:
    return lambda command, tmp: len(list(tmp.parent.glob("results/*.store/*.json"))) >= count


# A bench stopped once it has stored a record: its first scenario (probe, train) ends and its infer scenarios hang
# until the stop, so the stop finds the bench running however fast the machine (or it could have ended first).
HELD_AFTER_ONE = {"FOOTPRINT_FAULT": "context:hang@infer"}


def _phase(name: str, workers: int = 1, kind: str | None = None) -> Callable[[subprocess.Popen, Path], bool]:
    return lambda command, tmp: _in_phase(tmp, name, kind) >= workers


# ---- the rows: each runs its fault and checks the ending ----

def _says_where(failure: dict, *shown: str) -> None:
    """The worker's failure keeps where the fault was raised, worker.py's `_inject` at its line, innermost of its
    frames; each of `shown` (an output, a report) shows that frame under the message, past the frames before it
    (a terminal's lines may wrap the message: spaces are compared as one)."""
    innermost = failure["frames"][-1]
    assert (innermost["file"], innermost["function"]) == ("frameworks/worker.py", "_inject"), failure
    assert innermost["line"] > 0 and innermost["code"].startswith("raise RuntimeError"), failure
    for text in shown:
        flat = " ".join(text.split())
        said = flat.find(failure["message"])
        at = flat.find(f"at frameworks/worker.py:{innermost['line']} in _inject", said)
        assert 0 <= said < at < said + len(failure["message"]) + 600 * len(failure["frames"]), text[-3000:]


def worker_raises(base: Path) -> None:
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "import:raise"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "error" and record["failure"]["phase"] == "import"
    _says_where(record["failure"], ending.output)
    _clean(ending)


def autotuner_warning(base: Path) -> None:
    """XLA's autotuner asking for scratch it may be refused, word for word as the H100 run at c3d4247 logged it (a
    FAKE of its output, printed by the worker's `allocator-warning` fault), is no out-of-memory: the run goes on.
    There the autotuner went on compiling, and 5 s later the worker, by then in its import or context phase, was
    killed and recorded as out of memory there; the fault goes on past the grace the orchestrator gives an
    out-of-memory line (the CPU has no XLA autotuner), so it would be ended were the line read as one."""
    assert AUTOTUNER_GOES_ON_S > ALLOCATOR_GRACE_S + 2 * POLL_S  # long enough to be ended, were it read as one
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "context:allocator-warning"})
    record = ending.record()
    assert ending.code == 0 and record["status"] == "ok" and not record.get("failure"), record.get("failure")
    assert record["run"]["wall_seconds"] > AUTOTUNER_GOES_ON_S
    assert [p["name"] for p in record["phases"]] == list(PHASES["train"])
    _clean(ending)


def worker_hangs(base: Path) -> None:
    """In its first phase, which a worker reaches in 0.24 s here with two other test processes beside it: on a
    machine 16 times slower the timeout would still find it there (in build it took 2.7 s against 20)."""
    ending = run(base, ["run", *PROBE, "--timeout", "4", "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "import:hang"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "timeout" and record["failure"]["phase"] == "import"
    _clean(ending)


def _killed_from_outside(base: Path, sent: int, status: str, framework: str = "torch", device: str = "cpu") -> None:
    ending = run(base, ["run", *probe(framework, device), "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "build:hang"}, interrupt=_phase("build"), send=sent, to_worker=True)
    record = ending.record()
    assert ending.code == 1 and (record["status"], record["failure"]["phase"]) == (status, "build"), record
    _clean(ending)


def sigkill_from_outside(base: Path) -> None:
    _killed_from_outside(base, signal.SIGKILL, "killed")


def sigsegv_in_worker(base: Path) -> None:
    _killed_from_outside(base, signal.SIGSEGV, "crashed")


def garbage_output(base: Path) -> None:
    """In its first phase, before its framework's import: what the orchestrator makes of the record is the same in
    any phase."""
    ending = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                 {"FOOTPRINT_FAULT": "import:garbage"})
    record = ending.record()
    assert ending.code == 1 and record["status"] == "crashed"
    assert record["failure"]["message"] == "the worker's record is a JSON list, not an object"
    _clean(ending)


LIMIT_KIB = 8 * 2**20  # `ulimit -v`: room for a framework's import; the exhaust fault takes the rest
# 16 GiB of fp32 weights: more than the limit leaves, less than the machine has (so `run` does not refuse it)
TOO_LARGE = {"name": "too-large", "input_shape": [16384], "loss": "mse", "layers": [{"type": "dense", "units": 262144}]}
# On a GPU the framework's own cap, the allocator mode fit's `capped` sets (torch's per-process memory fraction, JAX's
# preallocated fraction): 5% is 4 GB of an 80 GB card, 7 GB of a 141 GB one, under the 16 GiB layer either way
GPU_CAP = "fraction=0.05"


def _out_of_memory(base: Path, framework: str, fault: str | None, device: str = "cpu") -> None:
    """Under a cap: on the CPU `ulimit -v` (the command and its worker), on a GPU the framework's own (`GPU_CAP`).
    `exhaust` (the CPU only) takes every byte the limit leaves and holds it, as a framework that ran out holds what
    it has; without it, the framework's own error at a 16 GiB layer. Either way the worker writes its own record
    (`recorded_by`), not the orchestrator reading its output."""
    (base / "results").mkdir()
    spec = base / "too-large.json"
    spec.write_text(json.dumps(TOO_LARGE))
    model = ["--model", "probe"] if fault else ["--model-file", str(spec)]
    cap = [] if device == "cpu" else ["--allocator", GPU_CAP]
    out = base / "results" / "record.json"
    ending = run(base, ["run", "--framework", framework, *model, "--scenario", "infer", "--device", device, *cap,
                        "--out", str(out)], {"FOOTPRINT_FAULT": fault} if fault else {},
                 limit_kib=LIMIT_KIB if device == "cpu" else None)
    record = ending.record()
    assert ending.code == 1 and (record["status"], record["failure"]["phase"]) == ("oom", "build"), record
    assert record["failure"]["recorded_by"] == "worker", record["run"]["output_tail"]
    _clean(ending)


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
    deadline = time.monotonic() + 60  # the kernel's SIGKILL at its parent's death (PR_SET_PDEATHSIG): a bound on a hang
    while not gone(ending.workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ending.code == -signal.SIGKILL and ending.workers and gone(ending.workers)
    assert len(list(ending.tmp.glob("footprint-*"))) == 2  # its own, which it could not remove, and the live one
    after = run(base, ["run", *PROBE, "--out", str(base / "results" / "record.json")],
                {"FOOTPRINT_FAULT": "import:raise"})
    assert after.code == 1 and [path.name for path in ending.tmp.glob("footprint-*")] == [live.name]


def every_scenario_times_out(base: Path) -> None:
    """Each worker hangs in its first phase, before its framework's import: no scenario can finish, so a timeout of
    2 s ends each (what the row needs is that every one times out, not in which phase), all four at once."""
    ending = run(base, [*BENCH, "--timeout", "2", "--jobs", "4"], {"FOOTPRINT_FAULT": "import:hang"})
    statuses = {record["status"] for record in ending.run_file()["records"]}
    assert statuses == {"timeout"} and ending.code == 1, ending.output[-2000:]
    assert "footprint: error: nothing was measured: all 4 scenarios of this run ended timeout" in ending.output
    _clean(ending)


def _stopped_bench(base: Path, sent: int, framework: str = "torch", device: str = "cpu") -> None:
    ending = run(base, bench(framework, device), HELD_AFTER_ONE, interrupt=_stored(1), send=sent)
    data = ending.run_file(f"default-{device}.json")
    assert ending.code == 130 and f"stopped by {signal.Signals(sent).name}" in ending.output, ending.output[-2000:]
    # as many as the bench said it would run: 4 on the CPU, more on a GPU (each pooling framework with its pool off)
    planned = re.search(r"^footprint: suite default, (\d+) scenarios on ", ending.output, re.MULTILINE)
    assert planned and (device != "cpu" or planned[1] == "4"), ending.output[-2000:]
    assert data["complete"] is False and data["missing"]
    assert len(data["records"]) + len(data["missing"]) == int(planned[1]), data["missing"]
    # the run file holds all it had (docs/usage.md)
    assert not (ending.results / f"default-{device}.json.store").exists()
    _clean(ending)


def sigint_of_a_bench(base: Path) -> None:
    _stopped_bench(base, signal.SIGINT)


def sigterm_of_a_bench(base: Path) -> None:
    _stopped_bench(base, signal.SIGTERM)


def sighup_of_a_bench(base: Path) -> None:
    _stopped_bench(base, signal.SIGHUP)


def stopped_jobs_keep_what_finished(base: Path) -> None:
    """`--jobs 2`, Ctrl-C while the train scenarios hang: the infer scenario that finished meanwhile, which the
    suite had not asked for yet, is kept; the rest are `missing`. The suite's order is probe train, probe infer,
    probe-deep train, probe-deep infer: the second train worker starts only once the infer scenario's thread has its
    record, so both train workers in their first phase (where they hang, before their framework's import) is the
    state the row needs, whatever the machine's speed (counting any two workers there, the infer one among them,
    stopped it before it had finished)."""
    ending = run(base, [*BENCH, "--jobs", "2"], {"FOOTPRINT_FAULT": "import:hang@train"},
                 interrupt=_phase("import", workers=2, kind="train"), send=signal.SIGINT)
    data = ending.run_file()
    assert ending.code == 130 and not data["complete"], ending.output[-2000:]
    assert [(r["scenario"]["kind"], r["status"]) for r in data["records"]] == [("infer", "ok")], data["records"]
    assert len(data["missing"]) == 3
    _clean(ending)


# A bench whose train scenarios hang in build: the first measures (hanging) while the next, its infer scenario,
# started ahead, waits at its gate after its import.
HELD_BEHIND_A_HANG = {"FOOTPRINT_FAULT": "build:hang@train"}


def _waiting_at_gate(tmp: Path) -> int:
    """How many workers' own records say they wait at their gate (started ahead, imported, not yet released)."""
    count = 0
    for record in tmp.glob("footprint-*/record.json"):
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            count += json.loads(record.read_text())["worker"].get("gate") == {"waiting": True}
    return count


def _one_measuring_one_waiting(command: subprocess.Popen, tmp: Path) -> bool:
    return _in_phase(tmp, "build") >= 1 and _waiting_at_gate(tmp) >= 1


def orchestrator_killed_while_a_worker_waits(base: Path) -> None:
    """SIGKILL of a bench while one worker measures and the next waits at its gate: both end with it (each watches
    its parent), and the next run removes the folders it could not: theirs and the bench's compile cache."""
    ending = run(base, BENCH, HELD_BEHIND_A_HANG, interrupt=_one_measuring_one_waiting, send=signal.SIGKILL)
    deadline = time.monotonic() + 60  # the kernel's SIGKILL at its parent's death (PR_SET_PDEATHSIG)
    while not gone(ending.workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ending.code == -signal.SIGKILL and len(ending.workers) >= 2 and gone(ending.workers), ending.workers
    assert len(list(ending.tmp.glob("footprint-*"))) == 3  # two workers' folders and the compile cache
    after = run(base, ["run", *PROBE], {"FOOTPRINT_FAULT": "import:raise"})
    assert after.code == 1 and not list(ending.tmp.glob("footprint-*")), list(ending.tmp.iterdir())


def held_worker_fails_in_its_import(base: Path) -> None:
    """The infer scenarios' workers, started ahead, raise in their import, before their gate: each is recorded
    against its own scenario (`error` in import, in its own record), its import named as overlapping the scenario
    before it; the train scenarios are measured as ever."""
    ending = run(base, BENCH, {"FOOTPRINT_FAULT": "import:raise@infer"})
    records = ending.run_file()["records"]
    assert [(r["scenario"]["kind"], r["status"]) for r in records] == [("train", "ok"), ("infer", "error")] * 2
    for train, infer in zip(records[::2], records[1::2], strict=True):
        assert infer["failure"]["phase"] == "import" and infer["failure"]["recorded_by"] == "worker", infer["failure"]
        assert infer["run"]["overlap"]["phases"] == ["import"]
        assert infer["run"]["overlap"]["with"] == Scenario.from_dict(train["scenario"]).label
        _says_where(infer["failure"], ending.output, (ending.results / "default-cpu.md").read_text())
    assert ending.code == 1, ending.output[-2000:]
    _clean(ending)


def ctrl_c_with_one_measuring_one_waiting(base: Path) -> None:
    """SIGINT of a bench while one worker measures and the next waits at its gate: exit 130, both workers and their
    folders gone, nothing measured, every scenario under `missing` for --resume."""
    ending = run(base, BENCH, HELD_BEHIND_A_HANG, interrupt=_one_measuring_one_waiting, send=signal.SIGINT)
    data = ending.run_file()
    assert ending.code == 130 and not data["complete"], ending.output[-2000:]
    assert not data["records"] and len(data["missing"]) == 4, data
    _clean(ending)


def unreadable_run_file(base: Path) -> None:
    """A run file cut in half, one of another schema, and a cuda run copied over the cpu one: the bench refuses each
    in one line and writes nothing; --fresh keeps it aside, named, and starts over."""
    text = PUBLISHED_CPU.read_text()
    contents = (text[:len(text) // 2], text.replace('"schema_version": 1,', '"schema_version": 999,', 1),
                PUBLISHED_CUDA.read_text())
    paths = [base / folder / "default-cpu.json" for folder in ("results-cut", "results-schema", "results")]
    for path, content in zip(paths, contents, strict=True):
        path.parent.mkdir()
        path.write_text(content)
    with ThreadPoolExecutor(len(paths)) as pool:
        endings = list(pool.map(lambda path: run(base, [*BENCH, "--resume"], {"FOOTPRINT_RESULTS": str(path.parent)}),
                                paths))
    for path, content, ending in zip(paths, contents, endings, strict=True):
        assert ending.code == 2 and ending.output.count("\n") == 1 and str(path) in ending.output, ending.output
        assert path.read_text() == content and not ending.workers
    path = paths[-1]  # --fresh, stopped once it has a record of its own: what it set aside is kept whole
    ending = run(base, [*BENCH, "--fresh"], HELD_AFTER_ONE, interrupt=_stored(1))
    kept = list(path.parent.glob("default-cpu.before-*.json"))
    assert ending.code == 130 and len(kept) == 1 and str(kept[0]) in ending.output, ending.output[-2000:]
    assert kept[0].read_text() == contents[-1] and ending.run_file()["device"] == "cpu"


def bad_records_in_the_store(base: Path) -> None:
    """What an interrupted run's store holds that is no record (`{}`, a bare status, invalid JSON, a list) is
    quarantined beside it with a line each; the run file takes only records, and `report` reads it. Beside them the
    store holds the records such a run measured (the published run's, of three of the bench's four scenarios):
    `--resume` keeps those and measures the fourth."""
    store = base / "results" / "default-cpu.json.store"
    store.mkdir(parents=True)
    bad = {"empty.json": "{}", "status.json": '{"status": "ok"}', "invalid.json": "{not json", "list.json": "[]"}
    for name, text in bad.items():
        (store / name).write_text(text)
    published = {(record["scenario"]["framework"], record["scenario"]["model"], record["scenario"]["kind"]): record
                 for record in json.loads(PUBLISHED_CPU.read_text())["records"]}
    kept = [published["torch", model, kind] for model, kind in (("probe", "train"), ("probe-deep", "train"),
                                                                ("probe-deep", "infer"))]
    runfile.carry(store.parent / "default-cpu.json", kept)
    ending = run(base, [*BENCH, "--resume"])
    warned = [line for line in ending.output.splitlines() if line.startswith("footprint: warning:")
              and "is not a record" in line]
    data = ending.run_file()
    assert ending.code == 0 and len(warned) == 4 and "Traceback" not in ending.output, ending.output[-2000:]
    assert data["complete"] and len(data["records"]) == 4 and ending.output.count("SKIPPED") == 3
    assert sorted(path.name for path in (ending.results / "default-cpu.json.quarantine").iterdir()) == sorted(bad)
    assert run(base, ["report", str(ending.results / "default-cpu.json")]).code == 0
    _clean(ending)


def not_a_run_file(base: Path) -> None:
    """JSON that is not a run file's object, and a run file with a record that is a number, given to every command
    that reads run files: one line and exit 2 each (estimate --constants: neither constants nor probes)."""
    results = base / "results"
    results.mkdir()
    header = {key: value for key, value in json.loads(PUBLISHED_CPU.read_text()).items() if key != "records"}
    files = {"list.json": "[]", "null.json": "null", "string.json": '"x"',
             "default-cpu.json": json.dumps(header | {"records": [1]})}
    for name, text in files.items():
        (results / name).write_text(text)
    commands = [["report", str(results / name)] for name in files]
    for path in (str(results / "list.json"), str(results / "default-cpu.json")):
        commands += [["compare", path, path], ["errors", path], ["constants", path],
                     ["estimate", "--model", "probe", "--device", "cpu", "--constants", path]]
    commands.append(BENCH)
    with ThreadPoolExecutor(4) as pool:
        endings = list(pool.map(lambda command: run(base, command), commands))
    for command, ending in zip(commands, endings, strict=True):
        assert ending.code == 2 and ending.output.count("\n") == 1, (command, ending.output)
    assert [path.read_text() for path in map(results.joinpath, files)] == list(files.values())


def run_out_on_a_run_file(base: Path) -> None:
    """`run --out` and `fit --out` onto a run file (no bench holding it): refused before measuring; the file kept."""
    path = base / "results" / "default-cpu.json"
    path.parent.mkdir()
    shutil.copy(PUBLISHED_CPU, path)
    for command in (["run", *PROBE, "--out", str(path)],
                    ["fit", *PROBE, "--budget", "1GiB", "--out", str(path)]):
        ending = run(base, command)
        assert ending.code == 2 and ending.output.count("\n") == 1 and "is a run file" in ending.output, ending.output
        assert path.read_bytes() == PUBLISHED_CPU.read_bytes() and not ending.workers
    _clean(ending)


def _dead_pid() -> int:
    with subprocess.Popen(["true"]) as ended:
        pass
    return ended.pid


def leftovers_of_killed_writers(base: Path) -> None:
    """The 0-byte temporaries a writer killed in its final writes leaves (named by its pid) are swept by the next
    run's writes; a refused command leaves no lock."""
    results = base / "results"
    results.mkdir()
    left = [results / f".default-cpu.{kind}.{_dead_pid()}.k1ll3d{TEMPORARY}" for kind in ("json", "png")]
    for path in left:
        path.write_bytes(b"")
    refused = run(base, ["bench", "--suite", "techniques", "--device", "cpu", "--models", "heatmap68"])
    assert refused.code == 2 and not list(results.glob(".*.lock")), refused.output
    ending = run(base, BENCH, HELD_AFTER_ONE, interrupt=_stored(1))  # stopped with a record: it writes both files
    assert ending.code == 130 and not any(path.exists() for path in left), ending.output[-2000:]
    _clean(ending)


def sigterm_of_a_fit(base: Path) -> None:
    fit = ["bench", "--suite", "fit", "--device", "cpu", "--frameworks", "torch", "--models", "heatmap68"]
    ending = run(base, fit, interrupt=lambda command, tmp: bool(_workers(command)))
    data = ending.run_file("fit-cpu.json")
    assert ending.code == 130 and data["complete"] is False and data.get("fits", []) == [], ending.output[-2000:]
    assert [(m["model"], m["fit_budget_bytes"]) for m in data["missing"]] == [("heatmap68", 900 * 10**6)]
    assert "footprint: wrote" in ending.output  # and it was: the file says what is missing
    _clean(ending)


@contextlib.contextmanager
def _tmpfs(folder: Path, options: str) -> Iterator[Path]:
    """A small tmpfs mounted at `folder` (made) while inside; the row skips where it cannot be mounted (not root)."""
    folder.mkdir()
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a small tmpfs needs root to mount here")
    if subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs was refused here")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def full_disk(base: Path) -> None:
    with _tmpfs(base / "results", "size=160k") as disk:
        # 96 KiB of it already taken: the probe's records fill the rest in the bench's second scenario here, the
        # first one's kept (with all 160 KiB free, in its fourth); any number of scenarios earlier is the same ending
        (disk / "taken.bin").write_bytes(b"x" * 96 * 2**10)
        ending = run(base, BENCH)
        lines = [line for line in ending.output.splitlines() if "No space left on device" in line]
        assert ending.code != 0 and lines and "Traceback" not in ending.output, ending.output[-3000:]
        assert not [path for path in disk.iterdir() if path.is_file() and path.stat().st_size == 0]
        _clean(ending)


@contextlib.contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """A folder (made here) the user cannot write: mode 0500, or for root (who writes anyway) a read-only tmpfs."""
    if os.geteuid() == 0:
        with _tmpfs(folder, "ro,size=64k"):
            yield
        return
    folder.mkdir(mode=0o500)
    try:
        yield
    finally:
        folder.chmod(0o700)


def read_only_output(base: Path) -> None:
    with _read_only(base / "results"):
        ending = run(base, BENCH)
    assert ending.code == 2 and ending.output.count("\n") == 1 and "cannot write" in ending.output
    _clean(ending)


def concurrent_runs(base: Path) -> None:
    path = base / "results" / "default-cpu.json"
    runfile.lock(path)  # this test process holds it, as a running bench would
    ending = run(base, BENCH)
    assert ending.code == 2 and "default-cpu.json is being written by another run (pid" in ending.output
    _clean(ending, held=path)


def run_out_on_a_locked_file(base: Path) -> None:
    path = base / "results" / "default-cpu.json"
    runfile.lock(path)
    path.write_text('{"kept": true}')
    ending = run(base, ["run", *PROBE, "--out", str(path)])
    assert ending.code == 2 and "default-cpu.json is being written by another run (pid" in ending.output
    assert path.read_text() == '{"kept": true}' and not ending.workers
    _clean(ending, held=path)


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


def sigint_from_outside(base: Path) -> None:
    """`kill -INT` of the worker ends it as SIGTERM does, not as a KeyboardInterrupt it records as its own error. (A
    terminal's Ctrl-C reaches only the orchestrator: the worker runs in its own session.)"""
    _killed_from_outside(base, signal.SIGINT, "killed")


ARGUMENT_LIMIT = 128 * 2**10  # what Linux allows one argument of a command line (MAX_ARG_STRLEN)
# Past it in few layers, each named at length: an 8,000-layer chain is too (its scenario ~250 KB, refused the same
# way before the worker read it from a file), but runs for ~10 minutes on the CPU (costs that grow with the square of
# the layers: ModelSpec.consumers per layer, torch's MemTracker)
LONG_SPEC = {"name": "long-spec", "input_shape": [4], "loss": "mse",
             "layers": [{"type": "dense", "units": 4, "name": f"{index}{'_long_name' * 40}"} for index in range(400)]}


def long_spec(base: Path) -> None:
    """The worker reads its scenario from a file: a spec's size is no limit on `run` or `fit`."""
    assert len(json.dumps(LONG_SPEC)) > ARGUMENT_LIMIT
    spec = base / "long-spec.json"
    spec.write_text(json.dumps(LONG_SPEC))
    model = ["--framework", "torch", "--model-file", str(spec), "--device", "cpu", "--scenario", "infer"]
    ending = run(base, ["run", *model, "--out", str(base / "results" / "record.json")])
    assert ending.code == 0 and ending.record()["status"] == "ok", ending.output[-2000:]
    _clean(ending)
    ending = run(base, ["fit", *model, "--budget", "1GiB", "--max-batch", "1"])  # one probe: an answer
    assert ending.code == 0 and "Traceback" not in ending.output, ending.output[-2000:]
    _clean(ending)



def compare_sharing_nothing(base: Path) -> None:
    """A fit run (answers, no scenario records) against a default run: nothing to gate, so the gate fails and says
    why, where it passed with "0 figures gated" (a gate that could not fail)."""
    ending = run(base, ["compare", str(FIT_RUN), str(PUBLISHED_CPU)])
    verdict = ending.output.strip().splitlines()[-1]
    assert ending.code == 1 and verdict.startswith("verdict: FAIL (exit 1): nothing gated"), ending.output[-2000:]
    assert "share no scenario: the base run has 0 scenario records (and 12 fit answers" in verdict, verdict


def compare_a_file_with_itself(base: Path) -> None:
    """`--store-spread` of one file twice (the same path, a symlink, a relative path) or `--repeat` naming the base:
    a spread of zero, refused before anything is written."""
    (base / "results").mkdir()
    path, link = base / "results" / "default-cpu.json", base / "results" / "link.json"
    shutil.copy(PUBLISHED_CPU, path)
    link.symlink_to(path)
    for again in (str(path), str(link), os.path.relpath(path, ROOT)):
        ending = run(base, ["compare", str(path), again, "--store-spread"])
        assert ending.code == 2 and ending.output.count("\n") == 1 and "the same file" in ending.output, ending.output
    ending = run(base, ["compare", str(path), str(PUBLISHED_CPU), "--repeat", str(link)])
    assert ending.code == 2 and ending.output.count("\n") == 1 and "the base's own file" in ending.output, ending.output
    assert path.read_bytes() == PUBLISHED_CPU.read_bytes()


def budgets_as_written(base: Path) -> None:
    """A budget prints exactly (1B was "within 0 MiB", 5MB "within 5 MiB"); units are case-sensitive as documented,
    so `5 mb` (which read as 5 MB) is refused before a worker starts."""
    for budget, printed in (("1B", "1 B"), ("5MB", "5 MB")):
        ending = run(base, ["fit", *PROBE, "--budget", budget, "--max-batch", "1"])
        assert ending.code == 1 and f"within {printed} on cpu" in ending.output, ending.output[-2000:]
        _clean(ending)
    ending = run(base, ["fit", *PROBE, "--budget", "5 mb"])
    assert ending.code == 2 and ending.output.count("\n") == 1 and "case-sensitive unit (B, kB, MB" in ending.output
    assert not list(ending.tmp.glob("footprint-*")), ending.output


def estimate_of_a_deep_chain(base: Path) -> None:
    """plain-100000 (200,003 layers) ends: the estimate is linear in depth. A quadratic one (2,000 layers took 8 s,
    100,000 did not end in 600) fails at the bound, where `run` kills the command; the linear one took 21 s here with
    two other test processes beside it, so only a hang reaches the bound (its speed is a benchmark's to judge)."""
    done = run(base, ["estimate", "--model", "plain-100000", "--device", "cpu"], timeout=600)
    # 3x3x64 convs of 36,928 parameters but the first (1,792), and a dense layer of 40,970
    assert done.code == 0 and done.output.startswith("plain-100000: 3,692,805,834 parameters"), done.output[-2000:]
    assert "total at the peak (train_step_2)" in done.output, done.output[-2000:]


ABSURD_SPECS = (
    {"name": "many-units", "input_shape": [4], "loss": "mse", "layers": [{"type": "dense", "units": 10**400}]},
    {"name": "wide-input", "input_shape": [10**30], "loss": "mse", "layers": [{"type": "dense", "units": 1}]})


def absurd_sizes(base: Path) -> None:
    """`--batch 10**400` and specs of a 10**400-unit layer or a 10**30-value input, to `estimate` and `run`: refused in
    one line naming the bound (2**31 - 1), where they were an OverflowError's traceback; no worker starts."""
    batch = str(10**400)
    commands = [["estimate", "--model", "probe", "--batch", batch], ["run", *PROBE, "--batch", batch]]
    for spec in ABSURD_SPECS:
        path = base / f"{spec['name']}.json"
        path.write_text(json.dumps(spec))
        commands += [["estimate", "--model-file", str(path), "--device", "cpu"],
                     ["run", "--framework", "torch", "--model-file", str(path), "--device", "cpu"]]
    for command in commands:
        ending = run(base, command)
        assert ending.code == 2 and ending.output.count("\n") == 1, (command, ending.output[-2000:])
        assert "at most 2,147,483,647" in ending.output and not ending.workers, (command, ending.output)
        assert not list(ending.tmp.glob("footprint-*")), command


def _published_record(framework: str, model: str, kind: str) -> dict:
    return next(record for record in json.loads(PUBLISHED_CPU.read_text())["records"] if (
        record["scenario"]["framework"], record["scenario"]["model"], record["scenario"]["kind"]) == (
        framework, model, kind))


# what a reader of a record's phases trips on: phases that are no list, a phase that is no object, one without its
# host view, a counter whose bytes are text; and JSON nested deeper than Python's parser recurses
NESTED_TOO_DEEPLY = "[" * 100_000 + "]" * 100_000


def _malformed(record: dict) -> dict[str, str]:
    first = record["phases"][0]
    return {"phases-text.json": json.dumps(record | {"phases": "all"}),
            "phase-number.json": json.dumps(record | {"phases": [1]}),
            "no-host.json": json.dumps(record | {"phases": [{key: value for key, value in first.items()
                                                             if key != "host"}]}),
            "bytes-text.json": json.dumps(record | {"phases": [first | {"allocator": {"allocated_peak": {
                "bytes": "12", "semantics": "reset"}}}]}),
            "nested.json": NESTED_TOO_DEEPLY}


def malformed_records_in_the_store(base: Path) -> None:
    """Beside a record the store holds its malformed twins (the same scenario: merged, one would replace it) and a
    file nested deeper than Python's parser recurses. The bench's start (RunFile, as `bench --resume` begins) moves
    each to the quarantine with a line, where the twins were merged (the bench crashed after measuring, and every
    later report) and the nested file crashed every bench before it began; the run file holds the good record."""
    path = base / "results" / "default-cpu.json"
    good = _published_record("torch", "probe", "train")
    runfile.carry(path, [good])
    bad = _malformed(good)
    for name, text in bad.items():
        (runfile.store_of(path) / name).write_text(text)
    with contextlib.redirect_stderr(io.StringIO()) as said:
        runfile.RunFile("default", "cpu", path).finish()
    warned = said.getvalue().splitlines()
    assert len(warned) == len(bad) and all("is not a record" in line for line in warned), warned
    assert sorted(path.name for path in (path.parent / "default-cpu.json.quarantine").iterdir()) == sorted(bad)
    assert runfile.load(path)["records"] == [runfile.read_record(good)]


def _in_process(args: list[str]) -> tuple[int, str]:
    """`python -m suites ARGS` in this process (the command line's own `main`): its exit code and all it printed."""
    with contextlib.redirect_stdout(io.StringIO()) as printed, contextlib.redirect_stderr(printed):
        code = main(args)
    return code, printed.getvalue()


def every_reader_of_a_malformed_run_file(base: Path) -> None:
    """A run file nested deeper than Python's parser recurses, and one whose record has no host view in its phase
    (the check of a record's shape is one, shared: `malformed_records_in_the_store` tries its other ways), to every
    reader of run files: one line, exit 2, where each was a traceback and exit 1, which for `compare` reads as its
    FAIL. The readers in this process (the command line's `main`), `bench --resume` as a command (refused before its
    suite: it starts nothing)."""
    header = {key: value for key, value in json.loads(PUBLISHED_CPU.read_text()).items() if key != "records"}
    malformed = _malformed(_published_record("torch", "probe", "train"))
    files = {"nested": malformed["nested.json"],
             "phases": json.dumps(header | {"records": [json.loads(malformed["no-host.json"])]})}
    for name, text in files.items():  # each in a folder of its own, as its bench's run file
        (base / name).mkdir()
        (base / name / "default-cpu.json").write_text(text)
    for name in files:
        path = str(base / name / "default-cpu.json")
        for args in (["report", path], ["compare", path, str(PUBLISHED_CPU)], ["compare", str(PUBLISHED_CPU), path],
                     ["errors", path], ["constants", path],
                     ["estimate", "--model", "probe", "--device", "cpu", "--constants", path]):
            code, printed = _in_process(args)
            assert code == 2 and printed.count("\n") == 1 and path in printed, (args, printed)
    with ThreadPoolExecutor(len(files)) as pool:
        endings = list(pool.map(lambda name: run(base, [*BENCH, "--resume"], {"FOOTPRINT_RESULTS": str(base / name)}),
                                files))
    for ending in endings:
        assert ending.code == 2 and ending.output.count("\n") == 1 and "cannot be read" in ending.output, ending.output
        assert not ending.workers
    assert [(base / name / "default-cpu.json").read_text() for name in files] == list(files.values())


def stored_spread_kept(base: Path) -> None:
    """The spread `compare --store-spread` stored (the published CPU run's) is the run's, not the bench's: the bench's
    own run file (RunFile, begun and finished, as `bench --resume` with nothing left to run does) keeps it, where its
    every write dropped it and compare then gated without it. And `--store-spread` takes the run file's lock: while a
    bench holds it (RunFile here, in this process) it is refused in one line, the file untouched, where the two wrote
    over each other."""
    path = base / "results" / "default-cpu.json"
    path.parent.mkdir()
    shutil.copy(PUBLISHED_CPU, path)
    stored = runfile.load(PUBLISHED_CPU)[SPREAD_FIELD]
    runfile.RunFile("default", "cpu", path).finish()
    assert runfile.load(path)[SPREAD_FIELD] == stored
    written = path.read_bytes()
    ending = run(base, ["compare", str(path), str(PUBLISHED_CPU), "--store-spread"])
    assert ending.code == 2 and ending.output.count("\n") == 1, ending.output
    assert "default-cpu.json is being written by another run (pid" in ending.output and path.read_bytes() == written


def _check(base: Path, out: Path, *args: str, extra: dict[str, str] | None = None,
           interrupt: Callable[[subprocess.Popen, Path], bool] | None = None, send: int = signal.SIGTERM) -> Ending:
    """`check`'s small form on the CPU into `out` (its default piece only: the others are skipped alike)."""
    return run(base, ["check", "--device", "cpu", "--quick", "--pieces", "default", "--out", str(out), *args], extra,
               interrupt, send)


def check_killed_and_refused(base: Path) -> None:
    """SIGKILL of `check` inside its default piece, whose workers hang in their first phase: its bench ends with it
    (it stops as at the limit, keeping what it has), where it lived on holding its run file's lock until its next
    write, and check.json lists the call, with the piece it was in, where it lost it. A piece whose run file another
    run holds (this process, as that bench did) is still to run, stopped, where its bench was refused and the piece
    recorded as ended for good; and a second check on the folder is refused in one line, where the two wrote over
    each other's check.json."""
    out = base / "check"
    descendants: list[psutil.Process] = []

    def in_the_piece(command: subprocess.Popen, tmp: Path) -> bool:
        descendants[:] = psutil.Process(command.pid).children(recursive=True)
        return _in_phase(tmp, "import") > 0

    killed = _check(base, out, extra={"FOOTPRINT_FAULT": "import:hang"}, interrupt=in_the_piece, send=signal.SIGKILL)
    assert killed.code == -signal.SIGKILL and any("suites" in " ".join(p.cmdline()) for p in descendants), killed.output
    deadline = time.monotonic() + 60  # the bench's SIGTERM at its check's death: what it then does, a bound on a hang
    while not gone(descendants) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(descendants), descendants
    state = json.loads((out / STATE).read_text())
    assert [call["ran"] for call in state["calls"]] == [["default"]], state["calls"]

    runfile.lock(out / "default-cpu.json")
    held = _check(base, out, "--limit", "2")
    state = json.loads((out / STATE).read_text())
    assert held.code == 3 and "default: not started while its run file was being written by another run (pid" in \
        held.output, held.output[-2000:]
    assert state["pieces"]["default"]["status"] == "stopped" and len(state["calls"]) == 2, state
    runfile.lock(out / STATE)
    refused = _check(base, out)
    assert refused.code == 2 and refused.output.count("\n") == 1, refused.output
    assert "check.json is being written by another run (pid" in refused.output
    assert json.loads((out / STATE).read_text()) == state


def check_on_a_bad_folder(base: Path) -> None:
    """`check --out` a read-only folder, a file, or a folder whose check.json is invalid, cut in half or of the wrong
    kinds; and a full disk, a FAKE: ENOSPC from the write that makes each of the check's files (models.record's
    atomic_write), in the command line's own `main`. One line and exit 2 each, where each was a traceback; a
    check.json it cannot read is set aside, kept whole, never written over."""
    state = check.load_state(base / "unused", "cpu", True, 60) | {"calls": [{"started_at": "then", "ran": []}]}
    contents = {"invalid": "{not json", "cut": json.dumps(state)[:200], "list": "[]",
                "status": json.dumps(state | {"pieces": {"default": {"status": 5, "seconds": 0, "calls": 0}}})}
    for name, text in contents.items():
        (base / name).mkdir()
        (base / name / STATE).write_text(text)
    (base / "file").write_text("kept")
    with _read_only(base / "read-only"), ThreadPoolExecutor(4) as pool:
        endings = dict(zip(["read-only", "file", *contents], pool.map(
            lambda name: _check(base, base / name), ["read-only", "file", *contents]), strict=True))
    for name, ending in endings.items():
        assert ending.code == 2 and ending.output.count("\n") == 1 and not ending.workers, (name, ending.output)
    assert "cannot write" in endings["read-only"].output and "a file, not a folder" in endings["file"].output
    assert (base / "file").read_text() == "kept"
    for name, text in contents.items():
        kept = list((base / name).glob("check.before-*.json"))
        assert f"set aside as {kept[0].name}" in endings[name].output and kept[0].read_text() == text, name
        assert sorted(path.name for path in (base / name).iterdir()) == [kept[0].name], name
    full = base / "full"
    fake = ("import errno, os, sys; from models import record; from suites.__main__ import main\n"
            "def full(path, write): raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))\n"
            "record.atomic_write = full; sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", fake, "check", "--device", "cpu", "--quick", "--out", str(full)],
                          cwd=ROOT, capture_output=True, text=True, env=_environment(base, {}))
    assert done.returncode == 2 and not done.stdout and done.stderr.count("\n") == 1, done.stdout + done.stderr
    assert f"cannot write {full / STATE}: No space left on device" in done.stderr
    assert list(full.iterdir()) == []  # nothing written, no lock left
def _one_line_refusal(ending: Ending, *said: str) -> None:
    """Exit 2, one line on the output saying each of `said`, no worker started."""
    assert ending.code == 2 and ending.output.count("\n") == 1, ending.output[-2000:]
    assert all(words in ending.output for words in said) and not ending.workers, (said, ending.output)


def _keras_file(path: Path, config: dict | str) -> Path:
    """A .keras file as Keras saves one, but for the weights the importer never reads: a zip holding config.json."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("config.json", config if isinstance(config, str) else json.dumps(config))
    return path


def _keras_conv(input_shape: list[int]) -> dict:
    """A Sequential Keras config of a conv, a global pool and a dense layer."""
    layers = [{"class_name": "InputLayer", "config": {"name": "image", "batch_shape": [None, *input_shape]}},
              {"class_name": "Conv2D", "config": {"name": "conv", "filters": 8, "kernel_size": [3, 3],
                                                  "padding": "same", "activation": "relu"}},
              {"class_name": "GlobalAveragePooling2D", "config": {"name": "pool"}},
              {"class_name": "Dense", "config": {"name": "scores", "units": 2}}]
    return {"class_name": "Sequential", "config": {"name": "net", "layers": layers}}


def _onnx_conv(path: Path, input_shape: list[int], filters: int) -> Path:
    """An ONNX file of a 3x3 conv (its weights in the file) and a flatten, for an input of (N, *input_shape)."""
    weights = numpy_helper.from_array(np.zeros((filters, input_shape[0], 3, 3), np.float32), "weight")
    graph = helper.make_graph([helper.make_node("Conv", ["image", "weight"], ["conv"], kernel_shape=[3, 3]),
                               helper.make_node("Flatten", ["conv"], ["scores"])], "net",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", *input_shape])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)], [weights])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def imported_images_as_their_files_say(base: Path) -> None:
    """A Keras input of (4, 4, 512) and an ONNX one of (N, 16, 3, 3) (the spec's (3, 3, 16)): the importers converted
    each file's own layout, so neither is refused as "looks channels-first", as both were; the guard stays where a
    person wrote the shape (a JSON spec of (3, 32, 32))."""
    keras_file = _keras_file(base / "wide.keras", _keras_conv([4, 4, 512]))
    onnx_file = _onnx_conv(base / "small.onnx", [16, 3, 3], 8)
    ending = run(base, ["models", "--model-file", str(keras_file), "--model-file", str(onnx_file)])
    assert ending.code == 0 and re.findall(r"(\d+x\d+x\d+) -> ", ending.output) == ["4x4x512", "3x3x16"], ending.output
    written = base / "written.json"
    written.write_text(json.dumps({"name": "x", "input_shape": [3, 32, 32], "loss": "mse",
                                   "layers": [{"type": "conv2d", "filters": 2}, {"type": "flatten"}]}))
    with pytest.raises(SpecError, match=r"\[3, 32, 32\] looks channels-first: give \[32, 32, 3\]"):
        load_spec_file(written)


def two_models_of_one_name(base: Path) -> None:
    """`bench --models d1/model.onnx,d2/model.onnx`, nets of 8 and of 64 filters: two models, each known by its path in
    the run file's records, the bench's tables and the report's sections (each with its own parameter count), where
    both were "model", one row each under the first net's count. Each worker fails at once (import:raise): the rows,
    not the measurements, are what is checked."""
    paths = [str(_onnx_conv(base / folder / "model.onnx", [3, 8, 8], filters)) for folder, filters in
             (("d1", 8), ("d2", 64))]
    ending = run(base, [*BENCH[:-1], ",".join(paths)], {"FOOTPRINT_FAULT": "import:raise"})
    records = [record for record in ending.run_file()["records"] if record["scenario"].get("model_file")]
    assert sorted((r["scenario"]["model"], r["scenario"]["kind"]) for r in records) == [
        (path, kind) for path in paths for kind in ("infer", "train")], ending.output[-2000:]
    assert all(f"\n{path} {kind} (batch 1)\n" in ending.output for path in paths for kind in ("train", "infer"))
    report = (ending.results / "default-cpu.md").read_text()
    assert all(f"## {path}, train (batch 1, adam; {count} parameters" in report
               for path, count in zip(paths, ("216", "1,728"), strict=True)), report[:3000]
    _clean(ending)


ONNX_WEIGHTS_DECLARED = 2**31  # bytes: one dense kernel's, in a sparse file beside the model (no disk taken)


def oversized_model_files(base: Path) -> None:
    """A .keras file whose config.json is 65 MiB (of a zip of 64 KiB), past the 64 MiB a config is read up to:
    refused by its declared size, in one line. An ONNX file whose 2 GiB of weights lie beside it (external data):
    counted from the shape it declares, under `ulimit -v` of 1 GiB, where reading it took twice its size."""
    padded = json.dumps(_keras_conv([8, 8, 3]))[:-1] + ', "padding": "' + " " * 65 * 2**20 + '"}'
    ending = run(base, ["models", "--model-file", str(_keras_file(base / "padded.keras", padded))])
    _one_line_refusal(ending, "its config.json is 68,157,", "more than the 67,108,864 a Keras config is read up to")
    kernel = TensorProto(name="kernel", data_type=TensorProto.FLOAT, dims=[64, ONNX_WEIGHTS_DECLARED // 256],
                         data_location=TensorProto.EXTERNAL)
    for key, value in (("location", "weights.bin"), ("offset", "0"), ("length", str(ONNX_WEIGHTS_DECLARED))):
        kernel.external_data.add(key=key, value=value)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "kernel"], ["scores"])], "wide",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                              [helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)], [kernel])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), base / "wide.onnx")
    with open(base / "weights.bin", "wb") as weights:
        weights.truncate(ONNX_WEIGHTS_DECLARED)
    ending = run(base, ["models", "--model-file", str(base / "wide.onnx")], limit_kib=2**20)
    assert ending.code == 0 and f" {ONNX_WEIGHTS_DECLARED // 4:,} " in ending.output, ending.output[-2000:]


def full_disk_before_the_run(base: Path) -> None:
    """`bench` and `run --out` onto a filesystem already full (a 64 KiB tmpfs, every byte taken): refused in one line
    naming the file, before any worker, and no lock file left, where a traceback left a 0-byte one."""
    with _tmpfs(base / "results", "size=64k") as disk:
        with contextlib.suppress(OSError):  # written until the disk is full
            (disk / "taken.bin").write_bytes(b"x" * 2**20)
        refused = [run(base, BENCH), run(base, ["run", *PROBE, "--out", str(disk / "record.json")])]
        for ending, name in zip(refused, ("default-cpu.json", "record.json"), strict=True):
            _one_line_refusal(ending, f"cannot write {disk / name}: No space left on device")
        assert [path.name for path in disk.iterdir()] == ["taken.bin"]


def missing_interpreter_override(base: Path) -> None:
    """FOOTPRINT_PYTHON naming a file that is not there (to `run`), FOOTPRINT_PYTHON_TORCH naming a folder (to `check`)
    or a file that is not there (to `bench`): refused up front in one line naming the variable, where `run` and
    `check` ended in a traceback and `bench` in 878 lines of them and a run file of no record."""
    absent, folder = str(base / "absent" / "python"), str(base)
    cases = [(["run", *PROBE], "FOOTPRINT_PYTHON", absent), (BENCH, "FOOTPRINT_PYTHON_TORCH", absent),
             (["check", "--device", "cpu", "--quick", "--out", str(base / "check")], "FOOTPRINT_PYTHON_TORCH", folder)]
    with ThreadPoolExecutor(3) as pool:
        endings = list(pool.map(lambda case: run(base, case[0], {case[1]: case[2]}), cases))
    for (_, variable, value), ending in zip(cases, endings, strict=True):
        _one_line_refusal(ending, f"{variable}={value}: no executable file there")
    assert not (base / "check").exists() and not (base / "results").exists()


def budgets_exact(base: Path) -> None:
    """8.2GB is 8,200,000,000 bytes (decimal arithmetic; a float made it 8,199,999,999); a 32-digit budget in GiB and
    1e30GiB are refused by one bound, 2**63 - 1 bytes (the first was taken, the second refused as no size); at the
    largest batch each column of the estimate's table stays apart (resnet50's estimate of 177 billion MiB ran into
    the batch beside it)."""
    assert parse_budget("8.2GB") == 8_200_000_000 and parse_budget("1e3 MB") == 10**9
    for budget in ("12345678901234567890123456789012GiB", "1e30GiB"):
        with pytest.raises(SpecError, match=r"^budget must be at most 9,223,372,036,854,775,807 bytes"):
            parse_budget(budget)
    ending = run(base, ["estimate", "--model", "resnet50", "--device", "cpu", "--budget", "8000000000GiB"])
    table = ending.output.split("\n\n")[1].splitlines()
    columns = [line.split(None, 4) for line in table]
    assert ending.code == 0 and columns[0][:3] == ["framework", "largest", "batch"], ending.output
    assert all(largest == f"{MAX_SIZE:,}" and float(estimate.replace(",", "")) > 10**11 and over == "-"
               for _, largest, estimate, over, _ in columns[1:]), table


def special_files(base: Path) -> None:
    """/dev/zero (without end) and a FIFO (no writer: a read hangs) given as a model file, as a run file to compare
    and `estimate --constants`, as a bench's own run file and as `run --out` (which would have replaced it): each
    refused in one line (as not a regular file, where the command says why), before any read; a hang fails the row
    at its timeout."""
    fifo, results = base / "fifo.onnx", base / "results"
    os.mkfifo(fifo)
    results.mkdir()
    os.mkfifo(results / "default-cpu.json")
    device, pipe = "not a regular file (a device)", "not a regular file (a FIFO)"
    # report, errors and constants read a run file as compare does (one reader); estimate --constants has its own
    said = {("models", "--model-file", "/dev/zero"): device, ("compare", str(fifo), "/dev/zero"): pipe,
            ("run", *PROBE, "--out", str(fifo)): pipe,
            ("estimate", "--model-file", str(fifo), "--device", "cpu"): pipe, tuple(BENCH): pipe,
            ("estimate", "--model", "probe", "--device", "cpu", "--constants", str(fifo)): "neither a constants file"}
    with ThreadPoolExecutor(4) as pool:
        endings = list(pool.map(lambda command: run(base, list(command), timeout=60), said))
    for words, ending in zip(said.values(), endings, strict=True):
        _one_line_refusal(ending, words)
        _clean(ending)  # the bench's lock gone with it
def _refused_in_one_line(base: Path, cases: dict[str, tuple[Path, str]]) -> None:
    """Each file refused by the importer the command line calls, in one line naming the file and saying what is
    wrong (here in this process: many files, no start-up each); then the first through the command line, which prints
    that line alone and exits 2, no worker started."""
    for name, (path, said) in cases.items():
        with pytest.raises(SpecError) as refused:
            load_spec_file(path)
        message = str(refused.value)
        assert "\n" not in message and str(path) in message and said in message, (name, message)
    path, said = next(iter(cases.values()))
    ending = run(base, ["estimate", "--model-file", str(path), "--device", "cpu"])
    assert ending.code == 2 and ending.output.count("\n") == 1 and said in ending.output, ending.output
    assert not ending.workers


def _keras_layer(net: dict, name: str) -> dict:
    return next(layer for layer in net["config"]["layers"] if layer["name"] == name)


def _changed_files(base: Path, build: Callable[[], object], save: Callable[[object, Path], object], suffix: str,
                   changes: dict[str, tuple[Callable, str]]) -> dict[str, tuple[Path, str]]:
    """A valid net (`build`'s) saved once per change as NAME`suffix`, with what its refusal says."""
    cases = {}
    for name, (change, said) in changes.items():
        net = build()
        change(net)
        cases[name] = (base / f"{name}{suffix}", said)
        save(net, cases[name][0])
    return cases


def _keras_files(base: Path, changes: dict[str, tuple[Callable[[dict], object], str]]) -> dict[str, tuple[Path, str]]:
    """The fuzz test's Keras net (`keras_convnet`) as to_json() writes it, once per change."""
    return _changed_files(base, keras_convnet, lambda net, path: path.write_text(json.dumps(net)), ".json", changes)


def _options(layer: str, **options: object) -> Callable[[dict], None]:
    return lambda net: _keras_layer(net, layer)["config"].update(options)


def _reading(layer: str, source: str) -> Callable[[dict], None]:
    return lambda net: _keras_layer(net, layer).update(inbound_nodes=[{"args": [keras_tensor(source)], "kwargs": {}}])


def _a_layer_that_is_a_number(net: dict) -> None:
    net["config"]["layers"][3] = 7


def keras_config_of_wrong_types(base: Path) -> None:
    """A value of another type where a Keras layer's option goes, each refused where the spec's layer checks that
    option: none converted (`int(2.5)` was 2, `bool("no")` true, `int("10")` 10), none a traceback (`int("abc")`)."""
    _refused_in_one_line(base, _keras_files(base, {
        "filters_abc": (_options("stem", filters="abc"), "layer 'stem' (Conv2D): conv2d.filters must be a positive "
                                                         "integer, got 'abc'"),
        "filters_null": (_options("stem", filters=None), "conv2d.filters must be a positive integer, got None"),
        "filters_list": (_options("stem", filters=[8]), "conv2d.filters must be a positive integer, got [8]"),
        "filters_infinity": (_options("stem", filters=math.inf), "conv2d.filters must be a positive integer, got inf"),
        "filters_nan": (_options("stem", filters=math.nan), "conv2d.filters must be a positive integer, got nan"),
        "filters_fraction": (_options("stem", filters=2.5), "conv2d.filters must be a positive integer, got 2.5"),
        "units_text": (_options("fc", units="10"), "layer 'fc' (Dense): dense.units must be a positive integer"),
        "rate_text": (_options("drop", rate="0.2"), "dropout.rate must be a number in [0, 1), got '0.2'"),
        "epsilon_text": (_options("stem_bn", epsilon="0.001"), "batchnorm.epsilon must be a positive number"),
        "use_bias_no": (_options("fc", use_bias="no"), "dense.bias must be true or false, got 'no'"),
        "layer_number": (_a_layer_that_is_a_number, "layer #3 is not a Keras layer"),
        "config_list": (lambda net: net.update(config=[1]), "the model's config [1] is not an object")}))


def keras_graph_that_is_wrong(base: Path) -> None:
    """A Keras functional graph no Keras wrote: each refused naming the layer, where a missing option or input was a
    KeyError's traceback and an output naming no layer was ignored (the last layer taken for it)."""
    _refused_in_one_line(base, _keras_files(base, {
        "no_kernel_size": (lambda net: _keras_layer(net, "stem")["config"].pop("kernel_size"),
                           "layer 'stem' (Conv2D) has no 'kernel_size' in its config"),
        "cycle": (_reading("stem", "stem_relu"), "layer 'stem' (Conv2D) reads 'stem_relu', which no layer before it "
                                                 "computes"),
        "missing_input": (_reading("stem_bn", "nowhere"), "layer 'stem_bn' (BatchNormalization) reads 'nowhere'"),
        "missing_output": (lambda net: net["config"].update(output_layers=[["nowhere", 0, 0]]),
                           "the model's output names 'nowhere', none of its layers")}))


def _zip_field(archive: bytes, local: int, central: int, change: Callable[[int], int]) -> bytes:
    """A zip whose first member has a 2-byte field changed alike in its local header (at `local`) and its central
    directory entry (at `central`): its flags at 6 and 8, its compression method at 8 and 10."""
    data = bytearray(archive)
    for at in (local, data.index(b"PK\x01\x02") + central):
        struct.pack_into("<H", data, at, change(struct.unpack_from("<H", data, at)[0]))
    return bytes(data)


def keras_file_unreadable(base: Path) -> None:
    """A saved Keras model whose config.json is corrupted (bytes of its deflated data changed), encrypted or
    compressed by deflate64: zlib's error, zipfile's RuntimeError and NotImplementedError were tracebacks."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("config.json", json.dumps(keras_convnet()))
    saved = buffer.getvalue()
    corrupted = bytearray(saved)
    corrupted[100:110] = bytes(byte ^ 0xFF for byte in corrupted[100:110])  # inside the deflated config.json
    files = {"corrupted": (bytes(corrupted), "its config.json is corrupted"),
             "encrypted": (_zip_field(saved, 6, 8, lambda flags: flags | 1), "its config.json is encrypted"),
             "deflate64": (_zip_field(saved, 8, 10, lambda method: 9), "its config.json is compressed by method 9")}
    for name, (content, _) in files.items():
        (base / f"{name}.keras").write_bytes(content)
    _refused_in_one_line(base, {name: (base / f"{name}.keras", said) for name, (_, said) in files.items()})


def _onnx_node(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(node for node in model.graph.node if node.name == name)


def _without_kernel_shape(model: onnx.ModelProto) -> None:
    pool = _onnx_node(model, "pool")
    kept = [attribute for attribute in pool.attribute if attribute.name != "kernel_shape"]
    del pool.attribute[:]
    pool.attribute.extend(kept)


def _no_data(model: onnx.ModelProto) -> None:
    next(tensor for tensor in model.graph.initializer if tensor.name == "fc.W").ClearField("raw_data")


def onnx_graph_that_is_malformed(base: Path) -> None:
    """The import tests' residual net with a node missing a required attribute or input, an initializer declared
    with no data, and two nodes writing one output: tracebacks (a KeyError, an IndexError, numpy's reshape), or the
    last writer kept, now each refused naming the node or initializer, before anything computes from the graph."""
    changes = {
        "no_kernel_shape": (_without_kernel_shape, "node 'pool' (MaxPool) is malformed: Required attribute "
                                                   "'kernel_shape' is missing"),
        "no_weight": (lambda model: _onnx_node(model, "conv").input.pop(), "node 'conv' (Conv) is malformed: "),
        "no_data": (_no_data, "initializer 'fc.W' is malformed: "),
        "two_writers": (lambda model: _onnx_node(model, "residual_relu").output.__setitem__(0, "residual"),
                        "node 'residual_relu' (Relu) writes 'residual', which node 'residual' (Add) writes too")}
    _refused_in_one_line(base, _changed_files(base, lambda: residual_net()[0], onnx.save, ".onnx", changes))


def json_nested_too_deep(base: Path) -> None:
    """A spec, a to_json() and a `.keras` file's config.json nested past the 100 levels an importer walks: 5,000
    deep was a RecursionError in json's parser, 150 one in the importer's walk of a layer's inputs."""
    deep = "[" * 5000 + "]" * 5000
    (base / "spec.json").write_text(f'{{"name": "deep", "input_shape": [4], "loss": "mse", "layers": {deep}}}')
    net = keras_convnet()
    _keras_layer(net, "stem_bn")["inbound_nodes"][0]["args"] = json.loads("[" * 150 + "]" * 150)
    (base / "to_json.json").write_text(json.dumps(net))
    with zipfile.ZipFile(base / "saved.keras", "w") as archive:
        archive.writestr("config.json", json.dumps(keras_convnet()).replace('"filters": 8', f'"filters": {deep}', 1))
    _refused_in_one_line(base, {
        "spec": (base / "spec.json", "nests its JSON deeper than Python's parser goes"),
        "to_json": (base / "to_json.json", "nests its JSON more than 100 levels deep"),
        "saved": (base / "saved.keras", "config.json nests its JSON deeper than Python's parser goes")})


@dataclass(frozen=True)
class Fault:
    name: str
    recorded: str
    check: Callable[[Path], None]


FAULTS = (
    Fault("the worker raises (in import)", "`error` in import, with where it was raised (its traceback's last "
          "frames) in the record and in `run`'s output; `run` exits 1", worker_raises),
    Fault("the worker hangs past its timeout (in import)", "`timeout` in import; the worker's process group killed",
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
    Fault("SIGHUP of a bench (its terminal closed)", "the same as SIGINT", sighup_of_a_bench),
    Fault("Ctrl-C of `bench --jobs 2` while a scenario that finished waits its turn", "its record kept; exit 130, "
          "the rest under `missing`", stopped_jobs_keep_what_finished),
    Fault("SIGKILL of a bench while one worker measures and the next, started ahead, waits at its gate", "both end "
          "with it; the next run removes their folders and the bench's cache",
          orchestrator_killed_while_a_worker_waits),
    Fault("a worker started ahead that fails in its import, before its gate", "`error` in import against its own "
          "scenario, its import named as overlapping the one before, with where it was raised in the bench's "
          "failure list and the report; the others measured", held_worker_fails_in_its_import),
    Fault("Ctrl-C of a bench while one worker measures and the next waits at its gate", "exit 130; no worker, no "
          "folder left; every scenario under `missing`", ctrl_c_with_one_measuring_one_waiting),
    Fault("a run file cut in half, of another schema, or another device's (a cuda run copied over a cpu one)",
          "refused, one line naming it, exit 2, nothing written; `--fresh` keeps it (`*.before-<time>.json`)",
          unreadable_run_file),
    Fault("what is no record in the resume store (`{}`, `{\"status\": \"ok\"}`, invalid JSON, `[]`)", "each moved "
          "to `<run file>.quarantine/` with a one-line warning; never in the run file, which stays readable",
          bad_records_in_the_store),
    Fault("JSON that is not a run file (`[]`, `null`, a string, a record that is a number) to report, compare, "
          "errors, constants, estimate --constants and bench", "one line each, exit 2", not_a_run_file),
    Fault("`run --out` (and `fit --out`) onto a run file no bench holds", "refused, one line, exit 2; the file "
          "untouched", run_out_on_a_run_file),
    Fault("0-byte write temporaries left by a writer killed in its final writes; a refused command's lock",
          "the next run's writes sweep the dead writer's temporaries; no lock file outlives a command",
          leftovers_of_killed_writers),
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
          "the run goes on, `ok` (only an allocation that failed for good is `oom`; a helper's line names "
          "`compile`)", autotuner_warning),
    Fault("SIGINT of the worker from outside (in build)", "`killed` in build, like SIGTERM", sigint_from_outside),
    Fault("a spec past the 128 KiB a command-line argument may hold (an 8,000-layer chain's; here 400 layers with "
          "long names)", "`ok`: the worker reads its scenario from a file; `fit` answers too", long_spec),
    Fault("`compare` of two runs that share nothing (a fit run against a default run)", "exit 1: `verdict: FAIL`, "
          "nothing gated, and why (each run's scenarios): a gate that cannot fail fails", compare_sharing_nothing),
    Fault("`compare X X --store-spread` (one file by any path; `--repeat` naming the base)", "refused, one line, "
          "exit 2: a spread of zero; X unchanged", compare_a_file_with_itself),
    Fault("a budget of `1B`, `5MB`, `5 mb`", "printed exactly (`1 B`, `5 MB`, never a rounded MiB); `5 mb` refused, "
          "one line, exit 2: units are case-sensitive", budgets_as_written),
    Fault("`estimate` of a 100,000-layer chain (plain-100000)", "its phases, exit 0: the estimate is linear in depth "
          "(it was quadratic: 8 s at 2,000 layers, 100,000 did not end in 600 s)", estimate_of_a_deep_chain),
    Fault("`--batch 10**400` (estimate and run) and a spec with absurd sizes (10**400 units, a 10**30-value input)",
          "refused, one line naming the bound (2**31 - 1), exit 2; no worker started", absurd_sizes),
    Fault("records with malformed phases (not a list, a phase not an object, no host view, bytes as text) and a "
          "file nested too deeply for Python's parser, in the resume store", "each moved to `<run file>.quarantine/` "
          "with a one-line warning, never merged; the run file holds the good record", malformed_records_in_the_store),
    Fault("a run file nested too deeply for Python's parser, or with a record's phases malformed, to report, compare "
          "(either side), errors, constants, estimate --constants and bench --resume", "one line each, exit 2 (never "
          "1, compare's FAIL); nothing written", every_reader_of_a_malformed_run_file),
    Fault("a bench writing a run file that stores a spread (`compare --store-spread`); `--store-spread` on a run "
          "file a bench is writing", "the spread kept (the bench keeps what it does not own); `--store-spread` "
          "refused, one line, exit 2, the file untouched (it takes the run file's lock)", stored_spread_kept),
    Fault("SIGKILL of `check` inside a piece; the piece's run file held by another run; a second check on the "
          "folder", "its bench ends with it and check.json lists the killed call; the piece `stopped`, still to run "
          "(exit 3), never `ended`; the second check refused, one line, exit 2, check.json untouched",
          check_killed_and_refused),
    Fault("`check --out` a read-only folder, a file, a folder whose check.json is invalid, cut in half or of the "
          "wrong kinds; a full disk (a FAKE: ENOSPC from the write of each of its files)", "one line, exit 2, nothing "
          "written; a check.json it cannot read set aside whole (`check.before-<time>.json`), never written over",
          check_on_a_bad_folder),
    Fault("a Keras input of (4, 4, 512) and an ONNX one of (N, 16, 3, 3), imported", "their counts, exit 0: the "
          "channels-first guard is for a shape a person wrote (a JSON spec's [3, 32, 32] is still refused)",
          imported_images_as_their_files_say),
    Fault("`bench --models d1/model.onnx,d2/model.onnx` (8 and 64 filters)", "two models, each known by its path in "
          "the records, the bench's tables and the report's sections, each with its own parameter count",
          two_models_of_one_name),
    Fault("a .keras whose config.json is 65 MiB (a 64 KiB zip); an ONNX file's 2 GiB of external weights",
          "the first refused by its declared size, one line, exit 2; the second counted from its declared shape "
          "under `ulimit -v` 1 GiB, never read", oversized_model_files),
    Fault("`bench` and `run --out` onto a disk already full (a full 64 KiB tmpfs)", "refused before any worker, one "
          "line naming the file, exit 2; no lock file left", full_disk_before_the_run),
    Fault("`FOOTPRINT_PYTHON` naming a missing file (to run); `FOOTPRINT_PYTHON_TORCH` one (to bench) or a folder (to "
          "check)", "refused up front, one line naming the variable, exit 2; nothing written",
          missing_interpreter_override),
    Fault("a budget of `8.2GB`, of 32 digits of GiB, of `1e30GiB`; `estimate --budget` at the largest batch",
          "8,200,000,000 B exactly; the other two refused by one bound (2**63 - 1 bytes); the table's columns apart",
          budgets_exact),
    Fault("/dev/zero or a FIFO as a model file, as a run file (to compare, whose reader report, errors and constants "
          "share, and to estimate --constants), as a bench's run file or as `run --out`", "refused before any read, "
          "one line, exit 2 (as not a regular file, where the command says why)", special_files),
    Fault("a Keras config with a wrong type: `filters` \"abc\", null, a list, Infinity, NaN or 2.5; `units`, `rate`, "
          "`epsilon` as strings; `use_bias: \"no\"`; a layer that is a number; a config that is a list", "refused, "
          "one line naming the file, the layer and the option, exit 2: none read as another value (2.5 is not 2, "
          "\"no\" is not true)", keras_config_of_wrong_types),
    Fault("a Keras functional graph that is wrong: a missing `kernel_size`, a cycle, an input or the output naming a "
          "missing layer", "refused, one line naming the layer, exit 2 (an output naming no layer is no longer "
          "ignored)", keras_graph_that_is_wrong),
    Fault("a `.keras` file whose config.json is corrupted, encrypted or deflate64-compressed", "refused, one line "
          "naming the file and what is wrong, exit 2", keras_file_unreadable),
    Fault("an ONNX graph that is malformed: a node missing a required attribute or input, an initializer declared "
          "with no data, two nodes writing one output", "refused, one line naming the node or initializer, exit 2 "
          "(two writers are no longer read as the last one)", onnx_graph_that_is_malformed),
    Fault("a model file's JSON nested deeper than Python recurses (a spec, to_json()'s, a `.keras` file's "
          "config.json)", "refused, one line, exit 2: no importer walks past 100 levels", json_nested_too_deep),
)


def table() -> str:
    """docs/faults.md's table of faults, from the rows above."""
    return "\n".join(["| fault | what the suite records |", "|---|---|",
                      *(f"| {fault.name} | {fault.recorded} |" for fault in FAULTS)])


@pytest.mark.parametrize("fault", FAULTS, ids=[fault.check.__name__ for fault in FAULTS])
def test_fault(fault: Fault, tmp_path: Path) -> None:
    fault.check(tmp_path)


def test_a_failure_keeps_its_last_frames_each_field_capped(tmp_path: Path) -> None:
    """What a record keeps of where an error was raised is bounded, whatever the traceback: a deep recursion's is cut
    to its innermost FRAMES_KEPT frames, a long path keeps its end, a long name and source line their start; a
    library's file is named below its site-packages, ours below the clone; an error never raised has none."""
    name, message = "recursing_" + "f" * 2 * FRAME_FIELD_CHARS, "x" * 2 * FRAME_FIELD_CHARS
    source = tmp_path / ("d" * 200) / "deep.py"
    source.parent.mkdir()
    source.write_text(f"def {name}(depth):\n    if not depth: raise ValueError('{message}')\n    {name}(depth - 1)\n")
    space: dict = {}
    exec(compile(source.read_text(), str(source), "exec"), space)
    with pytest.raises(ValueError) as deep:
        space[name](100)
    frames = last_frames(deep.value)
    assert len(frames) == FRAMES_KEPT and all(frame["function"] == name[:FRAME_FIELD_CHARS] for frame in frames)
    assert all(len(frame[field]) <= FRAME_FIELD_CHARS for frame in frames for field in ("file", "function", "code"))
    assert frames[-1]["file"].endswith("/deep.py") and frames[-1]["line"] == 2
    assert frames[-1]["code"] == f"if not depth: raise ValueError('{message}')"[:FRAME_FIELD_CHARS]
    with pytest.raises(ValueError) as library:
        np.reshape(np.zeros(3), (2,))
    frames = last_frames(library.value)
    assert frames[0]["file"] == "tests/test_faults.py" and frames[-1]["file"].startswith("numpy/"), frames
    assert last_frames(ValueError("never raised")) == []


def test_the_readme_lists_every_fault_as_the_matrix_runs_it() -> None:
    """The table lives on docs/faults.md, which the README links."""
    assert table() in (ROOT / "docs" / "faults.md").read_text()
    assert "](docs/faults.md)" in (ROOT / "README.md").read_text()


# ---- the device rows: the rows a GPU must see, on the device FOOTPRINT_FAULT_DEVICE names, for torch and JAX ----

DEVICE = os.environ.get("FOOTPRINT_FAULT_DEVICE", "cpu")
DEVICE_FRAMEWORKS = ("torch", "jax")
DEVICE_ROWS_SELECTION = "device_row"  # `pytest tests/test_faults.py -k device_row`: the device rows alone


def out_of_memory_under_a_cap(base: Path, framework: str, device: str) -> None:
    """The framework's own out-of-memory at a 16 GiB layer: under `ulimit -v` on the CPU, its allocator's cap on a
    GPU."""
    _out_of_memory(base, framework, None, device)


def sigkill_of_the_worker(base: Path, framework: str, device: str) -> None:
    _killed_from_outside(base, signal.SIGKILL, "killed", framework, device)


def sigterm_of_the_bench(base: Path, framework: str, device: str) -> None:
    _stopped_bench(base, signal.SIGTERM, framework, device)


def budget_probe_ends(base: Path, framework: str, device: str) -> None:
    """`fit` of keras200m within 2 GiB, the budget probe that once hung on a GPU (the probe net within 2 GiB on the
    CPU, where keras200m's probes would take minutes): it ends with an answer, its exit code the answer's, and no
    probe ran into its timeout (a hang the timeout ended is still a hang)."""
    model = "keras200m" if device != "cpu" else "probe"
    out = base / "results" / "fit.json"
    ending = run(base, ["fit", "--model", model, "--framework", framework, "--budget", "2GiB", "--device", device,
                        "--max-batch", "2", "--timeout", "120", "--out", str(out)])
    assert ending.workers and "Traceback" not in ending.output, ending.output[-2000:]
    result = json.loads(out.read_text())
    assert result["answer"] in EXIT_CODES and ending.code == EXIT_CODES[result["answer"]], ending.output[-2000:]
    statuses = [found["status"] for found in result["probes"]]
    assert statuses and "timeout" not in statuses, (statuses, result["unknown_reason"])
    _clean(ending)


@dataclass(frozen=True)
class DeviceRow:
    check: Callable[[Path, str, str], None]  # (base, framework, device)
    on_the_cpu: dict[str, Callable[[Path], None]]  # the row of FAULTS each framework's CPU run of it is, exactly


DEVICE_ROWS = (
    DeviceRow(out_of_memory_under_a_cap, {"torch": torch_out_of_memory}),
    DeviceRow(sigkill_of_the_worker, {"torch": sigkill_from_outside}),
    DeviceRow(sigterm_of_the_bench, {"torch": sigterm_of_a_bench}),
    DeviceRow(budget_probe_ends, {}),
)


@pytest.mark.parametrize(("row", "framework"), [(row, framework) for row in DEVICE_ROWS for framework in
                                                DEVICE_FRAMEWORKS],
                         ids=[f"{row.check.__name__}-{framework}" for row in DEVICE_ROWS for framework in
                              DEVICE_FRAMEWORKS])
def test_device_row(row: DeviceRow, framework: str, tmp_path: Path) -> None:
    if "FOOTPRINT_FAULT_DEVICE" not in os.environ:  # `make test` runs them once, in the check's small form
        pytest.skip("run by `python -m suites check` (its faults piece names the device; tests/test_check.py)")
    chosen = [name for name in os.environ.get("FOOTPRINT_FAULT_FRAMEWORKS", "").split(",") if name]
    if chosen and framework not in chosen:
        pytest.skip(f"{framework} is not among FOOTPRINT_FAULT_FRAMEWORKS ({', '.join(chosen)})")
    if DEVICE == "cpu" and framework in row.on_the_cpu:
        pytest.skip(f"on the CPU this is the row {row.on_the_cpu[framework].__name__} of FAULTS, which runs it")
    row.check(tmp_path, framework, DEVICE)
