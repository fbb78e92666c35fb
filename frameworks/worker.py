"""The child side: runs one job in the process it starts in, one framework per process.

    python -m frameworks.worker scenario SCENARIO_FILE OUT_JSON
        [--fault PHASE:raise|hang|abort|garbage|allocator-oom|allocator-warning|exhaust]
    python -m frameworks.worker params FRAMEWORK MODEL...    (catalogue names or model files)
    python -m frameworks.worker forward SCENARIO_FILE ARRAYS_NPZ OUT_NPZ [SCENARIO_FILE ARRAYS_NPZ OUT_NPZ ...]
        [--training]    (parity: each net in turn, one framework import for them all; a net's arrays may set its mode)
    python -m frameworks.worker ahead SCENARIO_FILE OUT_JSON    (the compile helper, started by a scenario worker)
    python -m frameworks.worker steps SCENARIO_FILE...    (arithmetic checks: each training scenario's steps' notes,
        unmeasured, one framework import for them all)
    python -m frameworks.worker keras-reference MODEL_FILE ARRAYS_NPZ OUT_NPZ SCORES [MODEL_FILE ...]    (each Keras
        file's own counts, output and weights, for `models --check`; SCORES 1: without the output's softmax)

SCENARIO_FILE is a JSON file holding the scenario (`Scenario.to_dict`), written by whoever starts the job into its
own folder (models/protocol.py `write_scenario`): on the command line, a large spec's (an 8,000-layer chain) would
be past the 128 KiB Linux allows one argument. SIGINT ends a job as SIGTERM does, with no record of its own: the
orchestrator records it as `killed` from outside.

The scenario record is rewritten (atomically) after every phase, so whatever kills this
process, the orchestrator still has every phase that finished. The last one is written with memory and a file
taken before the run (`RecordReserve`), and before any cleanup: where memory ran out, the worker still says so.
"""

from __future__ import annotations

import argparse
import importlib
import json
import mmap
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from frameworks.adapter import Adapter
from frameworks.gate import Gate
from frameworks.host_memory import HostMemory
from frameworks.rss_sampler import RssSampler
from models.catalogue import load_model
from models.protocol import (
    ASK_READING,
    ASK_SETTLED,
    COMPILE_CACHE_VARIABLE,
    HELPER_PREFIX,
    MARK_VARIABLE,
    SETTLE_MAX_S,
    end_with_parent,
    in_order,
    numbered,
    programs_key,
    write_scenario,
)
from models.record import PEAK_AT_MOST, PEAK_SINCE_PHASE_START, atomic_write_json, counter, last_frames, one_line
from models.scenario import CALIBRATION_BYTES, DATA_RULE, INIT_RULE, OPTIMIZER_SETTINGS, Scenario

CALIBRATION_HOLD_S = 0.5
# The `allocator-warning` fault's line, word for word: XLA's autotuner asking for scratch it may be refused, as the
# compile helper of the fit's jax keras200m probe logged it on the H100 at c3d4247 (a warning, not an error)
AUTOTUNER_WARNING = ("W1124 08:36:33.305511    1228 bfc_allocator.cc:371] Allocator (GPU_0_bfc) ran out of memory "
                     "trying to allocate 1.18GiB from the lower end with freed_by_count=0. The caller indicates that "
                     "this is not a failure, but this may mean that there could be performance gains if more memory "
                     "were available.")
AUTOTUNER_GOES_ON_S = 7.0  # past the orchestrator's 5 s grace (ALLOCATOR_GRACE_S), as that autotuner went on
# Address space held from the start and given back to write the last record: a record is at most ~100 KB of JSON
# (its timeline is bounded), and serializing it takes a few times that. Never touched, so it is resident nowhere.
RECORD_RESERVE_BYTES = 16 * 2**20
WORKER = "worker"  # a failure's `recorded_by` where the worker wrote it itself (the orchestrator's own: "orchestrator")
VISIBLE_DEVICE_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")  # the pinning the worker saw
OWN_PACKAGES = ("frameworks", "models", "suites")  # the project's, which every worker imports alike
MARK_WAIT_S = 0.25  # a reading takes well under a millisecond (0.16 ms on the H100 at c3d4247)


class RecordReserve:
    """What writing the last record needs, taken before the run: its file (beside the record, renamed onto it) and
    address space. Under `ulimit -v` a framework that ran out of memory can leave too little to open a file or
    serialize a record (Keras on TensorFlow did); the record was then lost, and out of memory known only from the
    output's text."""

    def __init__(self, out: str) -> None:
        self.out = os.path.abspath(out)
        os.makedirs(os.path.dirname(self.out), exist_ok=True)
        self.fd, self.path = tempfile.mkstemp(prefix=f".{os.path.basename(self.out)}.", dir=os.path.dirname(self.out))
        os.fchmod(self.fd, 0o644)  # mkstemp's 0600 would make results unreadable to others
        self.ballast = mmap.mmap(-1, RECORD_RESERVE_BYTES, flags=mmap.MAP_PRIVATE)

    def release(self) -> None:
        """Gives the address space back, for what comes after a failure and the record's serialization."""
        self.ballast.close()

    def write(self, record: dict) -> None:
        """Writes `record` through the file opened up front (compact JSON: the C encoder, no indenting pass), then
        renames it onto the record, which a reader never sees half written."""
        self.release()
        data = memoryview(json.dumps(record).encode())
        while data:
            data = data[os.write(self.fd, data):]
        os.close(self.fd)
        self.fd = -1
        os.replace(self.path, self.out)

    def discard(self) -> None:
        """Closes and removes the file where no record went through it."""
        self.release()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
            os.unlink(self.path)


class HelperFailed(RuntimeError):
    """The compile helper's failure, raised in the worker's compile phase with the frames where the helper raised it:
    the worker's own frames there would say only that the helper failed."""

    def __init__(self, message: str, frames: list[dict]) -> None:
        super().__init__(message)
        self.frames = frames


def _quietly(what: str, cleanup: Callable[[], object]) -> None:
    """Runs a cleanup after the record is written: where memory ran out it can fail too (ENOMEM removing a
    folder), and must not turn the worker's result into a traceback. A failure is noted in the output."""
    try:
        cleanup()
    except Exception as error:
        with suppress(Exception):
            print(f"footprint worker: {what} failed: {one_line(error)}", file=sys.stderr, flush=True)


def exhaust(box: list) -> None:
    """Takes all the address space this process's limit (`ulimit -v`) leaves, in halving blocks down to a page
    (untouched), then what the heap's free lists hold, down to a byte, into `box[0]`; refused without a limit,
    where it would take the machine's memory instead. Nothing here may allocate but the blocks: they are chained
    in pairs into a box that exists (a list, or assigning a result, would need memory, fail, and free them all),
    and the sizes are made before (an int above 256 is an allocation too)."""
    import resource

    if resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY:
        raise RuntimeError("the exhaust fault needs a virtual memory limit (ulimit -v)")
    for size in [2**power for power in range(30, -1, -1)]:
        while True:
            try:
                box[0] = (mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE) if size >= mmap.PAGESIZE else bytearray(size),
                          box[0])
            except (MemoryError, OSError):
                break


def load_adapter(scenario: Scenario) -> Adapter:
    """The adapter module named after the framework (keras-jax: keras_adapter); it imports its framework only
    when asked."""
    module = importlib.import_module(f"frameworks.{scenario.framework.partition('-')[0]}_adapter")
    adapter_class = next(value for value in vars(module).values() if isinstance(value, type)
                         and issubclass(value, Adapter) and value.__module__ == module.__name__)
    return adapter_class(scenario)


class DriverReadings:
    """Asks the orchestrator's NVML sampler for a reading and waits until it is taken, so that a phase shorter than
    the sampling interval (torch's compile phase: 0.3 ms) still has the driver's figure. Nothing where no sampler
    listens (a CPU run: no variable), and nothing more once an answer did not come within MARK_WAIT_S: a worker
    never waits on an orchestrator that does not answer, and never has two asks pending."""

    def __init__(self) -> None:
        named = os.environ.pop(MARK_VARIABLE, "")  # for this process alone: its children have no such pipes
        self.fds = tuple(int(fd) for fd in named.split(",")) if named else ()
        self.held = False  # before its gate a worker asks nothing: the sampler starts when it is released
        self.answers = select.poll()  # not select(): the numbers are the orchestrator's, and may pass FD_SETSIZE
        if self.fds:
            ask, hear = self.fds
            os.set_inheritable(ask, False)
            os.set_inheritable(hear, False)
            os.set_blocking(ask, False)  # a full pipe is no answer either
            self.answers.register(hear, select.POLLIN)

    def take(self) -> None:
        """Returns once a reading taken after this call is in the sampler's series (or it gave up)."""
        self._ask(ASK_READING, MARK_WAIT_S)

    def settle(self) -> float:
        """Returns once NVML's figure has stopped moving (or it gave up), and how long that took: NVML's reading of
        a new CUDA context trails it (in the H100 run at ec3adfa, 3 of 16 probes ended a 0.1-0.3 s context phase at
        32-104 MiB and NVML showed the other ~420 MiB within the next 20 ms), so the context phase waits for it
        rather than a fixed second."""
        started = time.monotonic()
        self._ask(ASK_SETTLED, SETTLE_MAX_S + MARK_WAIT_S)
        return round(time.monotonic() - started, 3)

    def _ask(self, word: bytes, wait_s: float) -> None:
        if not self.fds or self.held:
            return
        ask, hear = self.fds
        try:
            os.write(ask, word)
            if self.answers.poll(wait_s * 1000) and os.read(hear, 1):  # not b"": the sampler is gone
                return
        except OSError:  # the sampler is gone (a broken pipe)
            pass
        print(f"footprint worker: no NVML reading within {MARK_WAIT_S} s of asking; not asking again",
              file=sys.stderr, flush=True)
        for fd in self.fds:
            os.close(fd)
        self.fds = ()


class PhaseRunner:
    """Measures each phase: wall time, the host peak inside it, and the allocator's own figures."""

    def __init__(self, adapter: Adapter, record: dict, out: str, fault: str | None) -> None:
        self.adapter, self.record, self.out = adapter, record, out
        self.fault_phase, _, self.fault_kind = (fault or "").partition(":")
        self.host = HostMemory()
        self.rss = RssSampler()
        self.rss.start()
        self.driver = DriverReadings()
        self.current: str | None = None
        self.exhausted: list = [()]  # the exhaust fault's blocks, held as a framework holds what it built

    @contextmanager
    def measured(self, name: str) -> Iterator[dict]:
        self.current = self.record["current_phase"] = name
        atomic_write_json(self.out, self.record)  # so a hang or a kill still names the phase
        self.adapter.synchronize()
        self.adapter.reset_peaks()
        start_rss = self.host.rss()
        self.host.reset_peak()
        self.rss.phase_started()
        started_at = time.monotonic()  # system-wide: the orchestrator's NVML samples use the same clock
        self.driver.take()  # after `started_at`: a reading inside the phase's window, however short it is
        notes: dict = {}
        self._inject(name)
        yield notes
        self.adapter.synchronize()
        notes.update(self.adapter.compile_counts())
        self.driver.take()  # before `ended_at`: the reading at the phase's end is inside its window
        ended_at = time.monotonic()
        end_rss = self.host.rss()  # before the peak, so the peak (which includes the current RSS) bounds it
        self.record["phases"].append({
            "name": name,
            "seconds": round(ended_at - started_at, 6),
            "started_at": started_at,
            "ended_at": ended_at,
            "host": {"peak_rss": self.host.peak(), "sampled_peak_rss_anon": self.rss.phase_peak(),
                     "start_rss_bytes": start_rss, "end_rss_bytes": end_rss, **self.host.rss_split(),
                     **self.host.children()},
            "allocator": self.adapter.counters(),
            "tensors": self.adapter.tensor_bytes(),
            "notes": notes,
        })
        self.record["timeline"] = self.rss.timeline()
        atomic_write_json(self.out, self.record)

    def run(self, name: str, action: Callable[[], dict | None]) -> None:
        with self.measured(name) as notes:
            notes.update(action() or {})

    def _inject(self, name: str) -> None:
        """Fault injection for the suite's own failure tests, on request: a real raise, hang or abort, or a FAKE of
        XLA's output where the CPU has nothing to produce it."""
        if name != self.fault_phase:
            return
        if self.fault_kind == "hang":
            time.sleep(10**6)
        if self.fault_kind == "abort":
            os.abort()
        if self.fault_kind == "garbage":  # a record of the wrong shape, as a broken worker would leave
            with open(self.out, "w") as out:
                out.write("[1, 2]")
            os._exit(0)
        if self.fault_kind == "allocator-oom":  # a FAKE of XLA's BFC allocator: its last word, then its retry waits
            print(f"W external/xla/xla/tsl/framework/bfc_allocator.cc:501] Allocator (GPU_0_bfc) ran out of memory "
                  f"trying to allocate 1.58GiB (rounded to 1698693120) requested by op (fault injected in {name})",
                  file=sys.stderr, flush=True)
            time.sleep(10**6)
        if self.fault_kind == "allocator-warning":  # a FAKE of XLA's autotuner: scratch refused, and it goes on
            print(AUTOTUNER_WARNING, file=sys.stderr, flush=True)
            time.sleep(AUTOTUNER_GOES_ON_S)
            return
        if self.fault_kind == "exhaust":  # a real out-of-memory under `ulimit -v`, with nothing left to write with
            exhaust(self.exhausted)
            raise MemoryError(f"injected fault in phase {name}: the address space is exhausted")
        raise RuntimeError(f"injected fault in phase {name}")


def imported_packages() -> dict[str, str | None]:
    """Every package the process has imported (a top-level name, not the standard library's, not the project's own,
    not private), with its version where its distribution has its name or it has a `__version__`: what the framework
    pulled in beside it, which one interpreter holding more than a tox env changes (Keras imports scikit-learn, and
    matplotlib, where installed), and `compare` reads. Modules made in memory (no loader: Cython's, TensorFlow's
    generated ones) are not packages."""
    import importlib.metadata  # every framework has imported it by the end of its import: it costs nothing here

    def version(name: str, module: object) -> str | None:
        with suppress(importlib.metadata.PackageNotFoundError):
            return importlib.metadata.version(name)
        found = getattr(module, "__version__", None)
        return found if isinstance(found, str) else None

    return {name: version(name, module) for name, module in sorted(dict(sys.modules).items())
            if "." not in name and not name.startswith("_") and name not in sys.stdlib_module_names
            and name not in OWN_PACKAGES and getattr(getattr(module, "__spec__", None), "loader", None)}


def phase_actions(adapter: Adapter, framework: dict, worker: dict,
                  settle: Callable[[], float]) -> dict[str, Callable[[], dict | None]]:
    """What each phase does; an action returns the notes it wants in the phase's record. Where a helper compiled
    ahead (`worker["compile_helper"]`, by the compile phase), `compile` loads from its cache and records the
    helper's compile scratch, or fails as the helper did. `settle` waits until NVML's figure stops moving."""

    def import_framework() -> None:
        framework["versions"] = adapter.import_framework()
        framework["imported_packages"] = imported_packages()

    def context() -> dict | None:
        framework["device"] = adapter.init_device()
        framework.update(adapter.device_notes())
        if adapter.scenario.device != "cuda":
            return None
        return {"settled_s": settle()}  # so that the phase's NVML peak holds the whole context, not a build phase

    def build() -> None:
        adapter.build()
        framework["param_count"] = adapter.param_count()
        framework["statistics_count"] = adapter.statistics_count()

    def allocate() -> dict:
        held = adapter.allocate(CALIBRATION_BYTES)
        time.sleep(CALIBRATION_HOLD_S)  # long enough for many NVML samples
        del held
        return {"allocated_bytes": CALIBRATION_BYTES}

    def compile_phase() -> dict:
        helper = worker.get("compile_helper") or {}
        if helper.get("failure"):
            raise HelperFailed(helper["failure"], helper.get("failure_frames", []))
        notes = adapter.compile()
        if not helper:
            return notes | {"compiled_in": "this process"}
        return notes | {"compiled_in": "helper process, before the device phases; loaded here from its persistent "
                                       "cache", "compile_scratch": helper["compile_scratch"]}

    return {"import": import_framework, "context": context, "build": build, "compile": compile_phase,
            "train_step_1": adapter.train_step, "train_step_2": adapter.train_step, "inference": adapter.infer,
            "allocate": allocate}


def compile_ahead(adapter: Adapter, folder: str) -> Callable[[], dict] | None:
    """Sets the compile cache's variables now, before the framework is imported, and returns what runs the adapter's
    compile helper (None where it has none), which the worker calls between its import and context phases (after
    its gate, if it has one: the helper touches the device), so its scratch is in no measured window.

    The helper is a fresh process of this interpreter that builds the same scenario (its file written in `folder`)
    and compiles what the phases will run into a persistent cache, which this worker then reads (its variables set
    here, before the framework is imported). The cache is the bench's one (COMPILE_CACHE_VARIABLE) where there is
    one, else in `folder`: where an earlier helper of the bench compiled the same programs under the same allocator
    settings (`programs_key`: a pool-off twin's are its pooled run's; an inference scenario's are its training
    run's, whose helper ran the inference step too), no helper starts, and the record says whose helper compiled
    them and what that took. The helper's
    output goes to this worker's line by line as it comes, each after HELPER_PREFIX: the orchestrator reads an
    out-of-memory line live, and names `compile` for it whatever phase this worker has reached by then. A failure is
    kept for `compile` to report.
    """
    if not adapter.compiles_ahead or "compile" not in adapter.scenario.phases:
        return None
    bench_cache = os.environ.get(COMPILE_CACHE_VARIABLE)
    bench_cache = bench_cache if bench_cache and os.path.isdir(bench_cache) else None  # not on a Ray node elsewhere
    cache = os.path.join(bench_cache or folder, "cache")
    shared, own = adapter.cache_environment(cache), adapter.helper_environment()
    compiled = [Path(bench_cache, "compiled", f"{key}.json") for key in _programs_keys(adapter, own)] \
        if bench_cache else []
    os.environ.update(shared)
    if compiled and compiled[0].exists():
        earlier = json.loads(compiled[0].read_text())
        return lambda: {"what": f"compiled by the helper of {earlier['compiled_by']} in this bench, into its cache; "
                                "no helper here: the phases load from that cache", "seconds": 0.0, "env_set": shared,
                        "compiled_by": earlier["compiled_by"], "compile_scratch": earlier["compile_scratch"]}
    return lambda: _run_helper(adapter, folder, compiled, shared, own)


def _programs_keys(adapter: Adapter, own: dict[str, str]) -> list[str]:
    """The `programs_key` of this scenario's programs, then of every other scenario whose programs its helper
    compiles too: a training scenario's helper runs the inference step (`Adapter.warm_up`), so it compiles all that
    the same net's inference scenario runs (its build, its forward), under the same settings."""
    scenario = adapter.scenario.to_dict()
    settings = adapter.scenario.allocator_settings["env"] | own
    covered = [scenario] + ([scenario | {"kind": "infer"}] if scenario["kind"] == "train" else [])
    return [programs_key(each, settings) for each in covered]


def _run_helper(adapter: Adapter, folder: str, compiled: list[Path], shared: dict[str, str],
                own: dict[str, str]) -> dict:
    """Runs the compile helper into the cache `compile_ahead` set up; what it took, or how it failed."""
    figures = os.path.join(folder, "helper.json")
    command = [sys.executable, "-m", "frameworks.worker", "ahead", write_scenario(adapter.scenario.to_dict(), folder),
               figures]
    started = time.monotonic()
    with subprocess.Popen(command, env=os.environ | own, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace") as done:
        for line in done.stdout:
            sys.stderr.write(HELPER_PREFIX + line.removesuffix("\n") + "\n")
            sys.stderr.flush()
    helper = {"what": "compiled in a helper process after the import phase, before the others, into a persistent cache "
                      "the phases load from",
              "seconds": round(time.monotonic() - started, 3), "exit_code": done.returncode, "env_set": shared | own}
    written = json.loads(Path(figures).read_text()) if os.path.exists(figures) else {}
    if done.returncode or "failure" in written:
        reason = written.get("failure") or {"phase": "start", "message": f"exit status {done.returncode}"}
        return helper | {"failure": f"the compile helper failed in its {reason['phase']}: {reason['message']}",
                         "failure_frames": reason.get("frames", [])}
    for marker in compiled:
        marker.parent.mkdir(exist_ok=True)
        atomic_write_json(marker, {"compiled_by": adapter.scenario.label,
                                   "compile_scratch": written["compile_scratch"]})
    return helper | written


def helper_job(scenario: Scenario, out: str) -> None:
    """The compile helper's job: build and compile as the worker would, run what else compiles at a first call,
    and write what compiling took: the device allocator's scratch above what was live, and the host's peak."""
    adapter = load_adapter(scenario)
    os.environ.update(adapter.environment())
    figures: dict = {}

    def compile_into_cache() -> None:
        host = HostMemory()
        start_rss, before = host.rss(), adapter.allocator_reading()
        host.reset_peak()
        adapter.compile()
        adapter.warm_up()
        adapter.synchronize()
        figures["compile_scratch"] = {"device": compile_scratch(before, adapter.allocator_reading()),
                                      "host_peak_above_start": counter(host.peak()["bytes"] - start_rss,
                                                                       PEAK_SINCE_PHASE_START),
                                      **adapter.compile_counts()}

    steps = {"import": adapter.import_framework, "context": adapter.init_device, "build": adapter.build,
             "compile": compile_into_cache}
    done: list[str] = []
    try:
        for name, action in steps.items():
            action()
            done.append(name)
    except BaseException as error:  # the worker reports it in its compile phase, as out of memory where it was
        figures["failure"] = {"phase": list(steps)[len(done)], "message": one_line(error),
                              "frames": last_frames(error)}
    atomic_write_json(out, figures)


def compile_scratch(before: tuple[int, int] | None, after: tuple[int, int] | None) -> dict | None:
    """What compiling took on the device above the bytes live before it (XLA's autotuning scratch), from the
    allocator's (in use, peak) readings; None where it has none (the CPU)."""
    if before is None or after is None:
        return None
    rose = after[1] > before[1]
    return counter(max(0, after[1] - before[0]), PEAK_SINCE_PHASE_START if rose else PEAK_AT_MOST)


def run_scenario(scenario: Scenario, out: str, fault: str | None = None) -> int:
    reserve = RecordReserve(out)  # first: before a framework can take what writing the record needs
    adapter = load_adapter(scenario)
    env = adapter.environment()
    os.environ.update(env)
    record: dict = scenario.bare_record() | {
        "shared_settings": {"init": INIT_RULE, "data": DATA_RULE, "dtype": scenario.dtype,
                            "optimizer": {scenario.optimizer: OPTIMIZER_SETTINGS[scenario.optimizer]}},
        "worker": {"pid": os.getpid(), "python": platform.python_version(), "executable": sys.executable,
                   "platform": platform.platform(), "env_set": env,
                   "visible_devices": {name: os.environ.get(name) for name in VISIBLE_DEVICE_VARIABLES}},
    }
    folder = tempfile.mkdtemp(prefix="footprint-helper-")  # in the orchestrator's folder: its TMPDIR
    try:
        helper = compile_ahead(adapter, folder)
        return _measure(adapter, scenario, record, out, fault, reserve, helper)
    finally:  # the record is written by now: cleaning up after it cannot lose it
        _quietly("closing the record's reserve", reserve.discard)
        _quietly(f"removing {folder}", lambda: shutil.rmtree(folder))


def _measure(adapter: Adapter, scenario: Scenario, record: dict, out: str, fault: str | None,
             reserve: RecordReserve, helper: Callable[[], dict] | None) -> int:
    runner = PhaseRunner(adapter, record, out, fault)
    gate = Gate()
    runner.driver.held = gate.held
    record["worker"]["compile_helper"] = {}
    try:
        actions = phase_actions(adapter, record["framework"], record["worker"], runner.driver.settle)
        for name in scenario.phases:
            if name == "context":  # the first phase that may touch the device
                _pass_gate(gate, runner, record, out)
                if helper:  # it does the compile phase's work: a hang or a kill there names that phase
                    atomic_write_json(out, record | {"current_phase": "compile"})
                    record["worker"]["compile_helper"] = helper()
            runner.run(name, actions[name])
        record["status"] = "ok"
        record["current_phase"] = None
        record["framework_estimate"] = framework_estimate(adapter)
    except BaseException as error:  # a failure is a result: record it, then leave non-zero
        reserve.release()  # where memory ran out, even naming the failure needs some
        record["status"] = "oom" if adapter.is_oom(error) else "error"
        record["failure"] = {"phase": runner.current, "message": one_line(error), "recorded_by": WORKER,
                             "frames": error.frames if isinstance(error, HelperFailed) else last_frames(error)}
    record["worker"]["host_peak_resettable"] = runner.host.resettable
    reserve.write(record)
    return 0 if record["status"] == "ok" else 1


def _pass_gate(gate: Gate, runner: PhaseRunner, record: dict, out: str) -> None:
    """Where the orchestrator started this worker ahead of its turn, waits at its gate, the record saying so (a
    check sees it waiting), then lets the phases ask for NVML readings again."""
    if not gate.held:
        return
    record["worker"]["gate"] = {"waiting": True}
    atomic_write_json(out, record)
    record["worker"]["gate"] = gate.wait()
    runner.driver.held = False


def framework_estimate(adapter: Adapter) -> dict[str, object]:
    """The framework's own estimate, made after every phase is measured so it perturbs none of them."""
    try:
        return adapter.framework_estimate()
    except Exception as error:  # an estimator that fails is a note, not a failed measurement
        return {"error": one_line(error)}


def built(scenario: Scenario, values: bool = True) -> Adapter:
    """An adapter with its net built, unmeasured: for the checks that compare frameworks. Without `values`, the
    weights may be shapes alone (`build_shapes`)."""
    adapter = load_adapter(scenario)
    os.environ.update(adapter.environment())
    adapter.import_framework()
    adapter.init_device()
    if values:
        adapter.build()
    else:
        build_shapes(adapter)
    return adapter


def build_shapes(adapter: Adapter) -> None:
    """The adapter's own build, with the weights' shapes made and their values not, where the framework can: what
    the counts need. On JAX every value costs a compiled initializer per distinct weight shape: most of the params
    job's time over the catalogue (~90 s of ~95), for raw JAX and for Keras on JAX alike. Keras defers its variables'
    initialization inside a stateless scope (on any backend); raw JAX's build runs under jax.eval_shape, which gives
    back its weights' shapes (its batch stays the trace's, unused), with nothing to wait for (a tracer's
    block_until_ready is an AttributeError whose message walks the whole trace: ~15 s for densenet121). Torch's
    build makes its values."""
    if adapter.name == "keras":
        import keras

        with keras.StatelessScope(initialize_variables=False):
            adapter.build()
    elif adapter.name == "jax":
        import jax

        def build() -> tuple:
            adapter.build()
            return adapter.params, adapter.state

        adapter.synchronize = lambda: None
        adapter.params, adapter.state = jax.eval_shape(build)
    else:
        adapter.build()


def count_params(framework: str, models: list[str]) -> dict[str, dict[str, int]]:
    """Builds each model in turn (shapes alone where the framework can) and returns the framework's own trainable
    and non-trainable counts."""
    counts = {}
    for name in models:
        adapter = built(Scenario.create(framework, name, batch=1), values=False)
        counts[name] = {"trainable": adapter.param_count(), "statistics": adapter.statistics_count()}
    return counts


def forward(scenario: Scenario, arrays_path: str, out_path: str, training: bool) -> None:
    """Parity: loads canonical weights, a batch and a target per output (arrays `layer<i>_<name>`, `inputs`,
    `targets<i>`), writes each output (`output<i>`), the loss and the running statistics after the pass
    (`statistics<i>_<name>`). An array `training`, where there is one, is the
    net's own mode, over the job's: one worker runs inference and training nets alike. An array `float64` true
    (torch only) computes the net in float64: how far float32's rounding moves it."""
    import numpy as np

    arrays = np.load(arrays_path)
    training = bool(arrays["training"]) if "training" in arrays.files else training
    wide = "float64" in arrays.files and bool(arrays["float64"])  # torch's alone: the net in float64 (`--check`)
    weights: list[dict[str, np.ndarray]] = [{} for _ in scenario.spec.layers]
    for key in arrays.files:
        if key.startswith("layer"):
            index, name = key.removeprefix("layer").split("_")
            weights[int(index)][name] = arrays[key]
    # raw JAX's weights and statistics are all replaced here, and each initial value would cost a compiled
    # initializer per shape (EfficientNetB0: ~30 CPU-s); Keras's deferred variables take no set_weights
    adapter = built(scenario, values=scenario.framework != "jax")
    adapter.set_weights(weights)
    if wide:
        adapter.model.double()
    inputs = arrays["inputs"].astype(np.float64) if wide else arrays["inputs"]
    outputs, loss = adapter.evaluate(inputs, in_order("targets", arrays), training)
    statistics = {f"statistics{index}_{name}": value for index, layer in enumerate(adapter.statistics())
                  for name, value in layer.items()}
    np.savez(out_path, **numbered("output", outputs), loss=np.float64(loss), **statistics)


def train_steps(scenario: Scenario) -> list[dict]:
    """The notes of each training step the scenario's phases run (its loss, the bytes autograd saved...), through
    the calls its phases make (build, compile, the steps), unmeasured: for the checks of a framework's arithmetic
    (a technique keeps the baseline's losses; the rules predict what autograd saves), several scenarios to a
    process."""
    adapter = built(scenario)
    adapter.compile()
    return [adapter.train_step() for name in scenario.phases if name.startswith("train_step")]


def die_with_parent() -> None:
    """Asks the kernel to kill this process when the process that started it ends (Linux), so no worker outlives
    an orchestrator that was killed outright; one whose parent already ended stops here."""
    if not end_with_parent(signal.SIGKILL):  # not Linux: the orchestrator's process-group kill still applies
        return
    if os.getppid() == 1:  # it ended before the request: the kernel will not send the signal
        sys.exit("footprint worker: the process that started it has ended")


def main(argv: list[str] | None = None) -> int:
    # SIGINT ends a job as SIGTERM does: Python's KeyboardInterrupt would be recorded as the job's own error
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    die_with_parent()
    parser = argparse.ArgumentParser(prog="frameworks.worker")
    jobs = parser.add_subparsers(dest="job", required=True)
    job = jobs.add_parser("scenario")
    job.add_argument("scenario_file")
    job.add_argument("out")
    job.add_argument("--fault")
    job = jobs.add_parser("params")
    job.add_argument("framework")
    job.add_argument("models", nargs="+")
    job = jobs.add_parser("forward")
    job.add_argument("nets", nargs="+", metavar="SCENARIO_FILE ARRAYS_NPZ OUT_NPZ")
    job.add_argument("--training", action="store_true")
    job = jobs.add_parser("ahead")
    job.add_argument("scenario_file")
    job.add_argument("out")
    job = jobs.add_parser("steps")
    job.add_argument("scenario_files", nargs="+")
    job = jobs.add_parser("keras-reference")
    job.add_argument("files", nargs="+", metavar="MODEL_FILE ARRAYS_NPZ OUT_NPZ SCORES")
    job = jobs.add_parser("keras-rewrap")
    job.add_argument("model_file")
    job.add_argument("package")
    job.add_argument("out")
    args = parser.parse_args(argv)
    if args.job == "keras-rewrap":
        from frameworks.keras_reference import rewrap

        return rewrap(args.model_file, args.package, args.out)
    if args.job == "keras-reference":
        if len(args.files) % 4:
            parser.error("keras-reference takes MODEL_FILE ARRAYS_NPZ OUT_NPZ SCORES for each file")
        from frameworks.keras_reference import keras_reference

        for model_file, arrays, out, scores in zip(*[iter(args.files)] * 4, strict=True):
            keras_reference(model_file, arrays, out, scores == "1")
        return 0
    if args.job == "params":
        for name in args.models:
            load_model(name)  # fail on a bad name or file before any framework loads
        print(json.dumps(count_params(args.framework, args.models)))
        return 0
    if args.job == "forward":
        if len(args.nets) % 3:
            parser.error("forward takes SCENARIO_FILE ARRAYS_NPZ OUT_NPZ for each net")
        for scenario_file, arrays, out in zip(*[iter(args.nets)] * 3, strict=True):
            forward(Scenario.from_dict(json.loads(Path(scenario_file).read_text())), arrays, out, args.training)
        return 0
    if args.job == "steps":
        print(json.dumps([train_steps(Scenario.from_dict(json.loads(Path(path).read_text())))
                          for path in args.scenario_files]))
        return 0
    scenario = Scenario.from_dict(json.loads(Path(args.scenario_file).read_text()))
    if args.job == "ahead":
        helper_job(scenario, args.out)
        return 0
    return run_scenario(scenario, args.out, args.fault)


def end_now(code: int) -> None:
    """Ends the process once its output is flushed, without the interpreter's teardown: every file the job writes
    is closed by then (a record atomically), and unloading the framework's modules and threads took 0.3 s (JAX) to
    1 s (torch, Keras on torch) a worker, time the next scenario waited for. The orchestrator still ends the
    process group, so nothing a framework started outlives it."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    end_now(main())
