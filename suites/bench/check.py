"""`python -m suites check` (`make gpu-check`): every piece of evidence a machine can give, as resumable pieces
that end within a time limit, into one folder, `results/<card>-<commit>/`, ready to commit.

The folder's `check.json` keeps each piece's state across calls: a piece that ended is not run again (`--pieces`
names pieces to run again), one stopped at the limit is, and its bench resumes where it stopped; so is one whose run
file another run was writing (a lock refuses no piece for good). The folder is one call's at a time (its own lock),
each call is in check.json from its start (one killed outright too), and a piece's process ends with its check
however the check ends. Each call writes the environment (`environment.json`), each piece's output
(`logs/<piece>.log`), and the summary page (the caller renders it); a file there it cannot write, or a check.json
it cannot read (set aside, kept), is one line and exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from models.protocol import end_with_parent
from models.record import SCHEMA_VERSION, atomic_write_json, json_kind, load_json
from suites.analysis.constants import PROBES
from suites.bench.matrix import SUITES
from suites.run import device, environment, interrupts, runfile
from suites.run.pieces import PIECE_STATUSES, PIECES, STATE, Piece, card_slug
from suites.run.registry import ROOT, SetupError, frameworks, interpreter

KIND = "footprint.check"
STOP_GRACE_S = 60.0  # a piece told to stop writes its run file and report first
HELD_POLL_S = 0.5  # how often a check looks again at a run file another run is writing
PACKAGES = ("torch", "jax", "jaxlib", "flax", "optax", "keras", "tensorflow", "tensorflow-cpu", "numpy", "ml-dtypes",
            "nvidia-ml-py", "onnx")
# run in each framework's interpreter: its Python and package versions, and how Keras came (pip's INSTALLER, the
# wheel or URL it came from, whether its bytecode was written), without importing any framework
_PACKAGES_SCRIPT = """
import json, platform, sys
from importlib import metadata, util
def facts(name):
    try:
        found = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    came = {"version": found.version, "installer": (found.read_text("INSTALLER") or "").strip() or None}
    url = found.read_text("direct_url.json")
    if url:
        came["from"] = json.loads(url).get("url")
    return came
keras = util.find_spec("keras")
found = {name: facts(name) for name in sys.argv[1:]}
out = {"python": platform.python_version(), "executable": sys.executable,
       "packages": {name: came for name, came in found.items() if came}}
if keras and keras.submodule_search_locations:
    from pathlib import Path
    out["keras_bytecode"] = any(Path(keras.submodule_search_locations[0], "__pycache__").glob("*.pyc"))
print(json.dumps(out))
"""


def card(resolved: str) -> str:
    """The card a run measures: NVML's name, or "cpu"."""
    if resolved == "cpu":
        return "cpu"
    from suites.run import nvml

    return nvml.visible_gpu_name() or "cuda"


def folder(resolved: str, quick: bool) -> Path:
    """results/<card>-<commit>/ (results/local/...-quick for the small form, which is no evidence to publish)."""
    commit = environment.git_commit()
    short = commit[:7] if re.match(r"[0-9a-f]{7}", commit) else "unknown"
    name = f"{card_slug(card(resolved))}-{short}" + ("-dirty" if "+dirty" in commit else "")
    return ROOT / "results" / ("local" if quick else "") / (name + ("-quick" if quick else ""))


def _lacking(python: str, modules: list[str]) -> list[str] | None:
    """The modules `python` cannot find (found without importing them), or None where it did not even start."""
    script = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if not importlib.util.find_spec(m)))"
    found = subprocess.run([python, "-c", script, *modules], capture_output=True, text=True)
    return found.stdout.split() if found.returncode == 0 else None


def _missing_modules(framework: str, resolved: str) -> str | None:
    """Why `framework` cannot run here, or None: its interpreter lacks a module its name names (keras-jax needs
    keras and jax)."""
    try:
        python = interpreter(framework, resolved)
    except SetupError as error:
        return str(error)
    lacking = _lacking(python, framework.split("-"))
    if lacking is None or lacking:
        return f"no module {', '.join(lacking or ['(the interpreter failed)'])} in {python}"
    return None


def available(resolved: str) -> tuple[list[str], dict[str, str]]:
    """(the frameworks this machine can run, {framework: why not} for the rest)."""
    reasons = {name: _missing_modules(name, resolved) for name in frameworks()}
    return [name for name, why in reasons.items() if not why], {name: why for name, why in reasons.items() if why}


def install_wheels(wheels: Path, resolved: str) -> dict:
    """Keras from carried wheels, on an image without a package registry (docs/usage.md: a prepared interpreter):
    each Keras framework's interpreter that lacks keras gets the folder's wheels, offline and without dependencies,
    with their bytecode compiled (pip's default: each worker would otherwise compile Keras's source at its import).
    What was installed where, for environment.json."""
    found = sorted(str(path) for path in wheels.glob("*.whl"))
    if not found:
        raise SetupError(f"--wheels {wheels}: no .whl file there")
    done: dict = {"folder": str(wheels), "wheels": [Path(path).name for path in found], "installed_into": {}}
    for python in sorted({interpreter(name, resolved) for name in frameworks() if name.startswith("keras-")}):
        if _lacking(python, ["keras"]):
            installed = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps", *found],
                                       capture_output=True, text=True)
            done["installed_into"][python] = installed.returncode == 0 or installed.stderr.strip()[-300:]
    return done


def write_environment(target: Path, resolved: str, chosen: list[str], wheels: dict | None) -> dict:
    """environment.json: the machine, the driver, each framework interpreter's versions and the wheels installed."""
    facts: dict = {"machine": environment.machine(), "git_commit": environment.git_commit(),
                   "device": device.describe(resolved), "interpreters": {}, "wheels": wheels}
    if resolved == "cuda":
        from suites.run import nvml

        facts["driver"] = nvml.driver_versions()
    for name in chosen:
        python = interpreter(name, resolved)
        found = subprocess.run([python, "-c", _PACKAGES_SCRIPT, *PACKAGES], capture_output=True, text=True)
        facts["interpreters"][name] = (json.loads(found.stdout) if found.returncode == 0
                                       else {"executable": python, "error": found.stderr.strip()[-300:]})
    with _said(target / "environment.json"):
        atomic_write_json(target / "environment.json", facts)
    return facts


@contextlib.contextmanager
def _said(path: Path) -> Iterator[None]:
    """A write into the check's folder that fails (a full disk, a folder made read-only) as one line, SetupError:
    what the pieces measured stays in their run files."""
    try:
        yield
    except OSError as error:
        raise SetupError(f"cannot write {path}: {error.strerror or error}") from None


def load_state(target: Path, resolved: str, quick: bool, limit: float) -> dict:
    """The folder's check.json, or a new one; a piece added since the folder was begun is still to run."""
    path, name = target / STATE, card(resolved)
    state = _earlier_state(path, (resolved, quick, environment.git_commit())) if path.exists() else {
        "schema_version": SCHEMA_VERSION, "kind": KIND, "device": resolved, "card": name, "card_slug": card_slug(name),
        "git_commit": environment.git_commit(), "quick": quick, "calls": [], "pieces": {}}
    for piece in PIECES:
        state["pieces"].setdefault(piece.name, {"status": "not run", "seconds": 0.0, "calls": 0})
    return state | {"limit_s": limit}


def _earlier_state(path: Path, ours: tuple[str, bool, str]) -> dict:
    """check.json as the folder's earlier calls left it. Another check's (device, form, code) is refused; one that
    cannot be read as a check's state is set aside (kept, named by the time, as --fresh keeps a run file) and the call
    refused: one line each, and never written over in silence."""
    try:
        state, fault = load_json(path), None
    except OSError as error:
        raise SetupError(f"cannot read {path}: {error.strerror or error}") from None
    except ValueError as error:
        state, fault = None, str(error)
    if isinstance(state, dict) and state.get("kind") == KIND and (
            state.get("device"), state.get("quick"), state.get("git_commit")) != ours:
        raise SetupError(f"{path}: another check's state ({state.get('device')}, quick {state.get('quick')}, code "
                         f"{state.get('git_commit')}); give another --out")
    fault = fault or _state_fault(state)
    if fault:
        kept = runfile.set_aside(path)[0]
        raise SetupError(f"{path} cannot be read as a check's state ({fault}); set aside as {kept.name}: run the check "
                         "again to begin it anew (the pieces' run files stay, and their benches resume)")
    return state


def _state_fault(state: object) -> str | None:
    """What in a check.json the check and its summary page could not read, or None."""
    if not isinstance(state, dict):
        return f"it is {json_kind(state)}, not an object"
    if state.get("kind") != KIND:
        return f"its kind is {state.get('kind')!r}, not {KIND!r}"
    pieces, calls = state.get("pieces"), state.get("calls")
    if not isinstance(pieces, dict) or not isinstance(calls, list):
        return "its pieces are not an object or its calls not a list"
    if not all(isinstance(call, dict) and isinstance(call.get("started_at"), str) for call in calls):
        return "a call is not an object with its start"
    for name, entry in pieces.items():
        if not (isinstance(entry, dict) and entry.get("status") in PIECE_STATUSES
                and isinstance(entry.get("seconds"), int | float) and isinstance(entry.get("calls"), int)):
            return f"its piece {name!r} has no valid status, seconds and calls"
    if not all(isinstance(state.get(field), str) for field in ("card", "card_slug")):
        return "its card is not named"
    return None


def piece_frameworks(piece: Piece, chosen: list[str], quick: bool) -> list[str]:
    """The frameworks a piece runs: those available here, in the small form only its own."""
    return [name for name in chosen if not quick or name in piece.quick_frameworks]


def command(piece: Piece, resolved: str, chosen: list[str], quick: bool) -> tuple[list[str], dict[str, str]] | None:
    """The piece's command line and its variables; None where none of its frameworks can run here."""
    names = piece_frameworks(piece, chosen, quick)
    if not names:
        return None
    extra = list(piece.arguments_for(quick))
    if piece.suite:
        return ([sys.executable, "-m", "suites", "bench", "--suite", piece.suite, "--device", resolved, "--resume",
                 "--frameworks", ",".join(names), *extra], {})
    tests = ROOT / ".tox" / "test" / "bin" / "python"
    python = str(tests) if tests.exists() and not os.environ.get("FOOTPRINT_PYTHON") else sys.executable
    return ([python, "-m", "pytest", piece.tests, "-q", "-p", "no:cacheprovider", *extra],
            {"FOOTPRINT_FAULT_DEVICE": resolved, "FOOTPRINT_FAULT_FRAMEWORKS": ",".join(names)})


def carry_probes(piece: Piece, target: Path, resolved: str, names: list[str]) -> int:
    """Every suite runs the probes first (their constants feed its estimates): a suite piece not yet begun is given
    the probes' records an earlier piece of this check measured (same folder: one commit, one machine, one device)
    for its frameworks, so the check measures each probe once; an earlier run file that cannot be read is passed over,
    said in one line. Returns how many it was given."""
    if not piece.suite or not SUITES[piece.suite]:  # a test piece, or the fit suite's questions: no probes
        return 0
    path = target / piece.run_file(resolved)
    if path.exists() or runfile.store_of(path).exists():
        return 0
    measured: dict[str, dict] = {}
    for source in (target / name for earlier in PIECES[:PIECES.index(piece)] if (name := earlier.run_file(resolved))):
        if not source.exists():
            continue
        try:
            records = runfile.load(source)["records"]
        except (OSError, ValueError) as error:  # as runfile.stored_records does: said in one line, never merged
            print(f"footprint check: warning: {source} cannot be read as a run file ({error}); its probes are not "
                  f"carried: {piece.name} measures them itself", file=sys.stderr, flush=True)
            continue
        measured |= {runfile.identity(record["scenario"]): record for record in records
                     if record["scenario"]["model"] in PROBES and record["scenario"]["framework"] in names
                     and record["status"] == "ok"}
    runfile.carry(path, list(measured.values()))
    return len(measured)


def _pump(process: subprocess.Popen, log: Path) -> threading.Thread:
    """Copies the piece's output to the terminal and its log, line by line, as it comes; a log that can no longer be
    written (a full disk) is passed over, so the piece's output is still read and it never waits on it."""
    def copy() -> None:
        with log.open("ab", buffering=0) as out:
            for line in process.stdout:
                with contextlib.suppress(OSError):
                    out.write(line.encode())
                sys.stdout.write(line)
                sys.stdout.flush()

    thread = threading.Thread(target=copy, daemon=True)
    thread.start()
    return thread


def _stop(process: subprocess.Popen) -> int:
    """SIGTERM (a bench then keeps what it measured and writes its run file), SIGKILL after STOP_GRACE_S."""
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _ends_with_the_check(check: int) -> Callable[[], None]:
    """What a piece's process runs before its command: SIGTERM when the check ends, however it ends (SIGKILL too),
    so a bench stops as at the limit, keeping what it measured, instead of holding its run file's lock unseen; one
    whose check ended before the request ends at once."""
    def arrange() -> None:
        if end_with_parent(signal.SIGTERM) and os.getppid() != check:
            os._exit(interrupts.EXIT_CODE)

    return arrange


def run_piece(piece: Piece, argv: list[str], variables: dict[str, str], target: Path, deadline: float) -> tuple[
        str, int]:
    """(status, exit code): "done" (exit 0), "ended" (another exit: a result, not run again), "stopped" (at the
    deadline or by a signal: run again next call)."""
    log = target / "logs" / f"{piece.name}.log"
    with _said(log):
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("a", encoding="utf-8") as out:
            out.write(f"== {time.strftime('%Y-%m-%dT%H:%M:%S%z')} {' '.join(argv)}\n")
    env = os.environ | {"FOOTPRINT_RESULTS": str(target), "PYTHONUNBUFFERED": "1"} | variables
    with interrupts.deferred():
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, encoding="utf-8", errors="replace",
                                   preexec_fn=_ends_with_the_check(os.getpid()))
    pump = _pump(process, log)
    try:
        code = process.wait(max(0.0, deadline - time.monotonic()))
        status = "done" if code == 0 else "ended"
    except subprocess.TimeoutExpired:
        code, status = _stop(process), "stopped"
    except BaseException:  # a stop of the check: the piece stops as it would at the deadline, then the check does
        _stop(process)
        pump.join(5)
        raise
    pump.join(5)
    return status, code


def _held(piece: Piece, target: Path, resolved: str, deadline: float) -> str | None:
    """Who else is writing the piece's run file (a bench of a check stopped a moment ago, still writing what it
    measured; a bench a person started), once it is done or the deadline comes; None where nobody is."""
    name = piece.run_file(resolved)
    while name:
        holder = runfile.holder(target / name)
        if not holder or time.monotonic() >= deadline:
            return holder
        time.sleep(HELD_POLL_S)
    return None


def _busy(holder: str) -> str:
    return f"while its run file was being written by another run ({holder})"


def run_check(target: Path, resolved: str, quick: bool, limit: float, only: list[str],
              summarize: Callable[[Path], Path], wheels: Path | None = None) -> int:
    """Runs the pieces that are due within `limit` seconds; 0 where every piece is done, 3 where one is still to
    run (call again), 1 where one ended with a failure (its log says why). The folder is this call's alone (its lock:
    a second check on it is refused), and check.json lists the call from its start, so a call killed outright is
    listed too, with the piece it was in."""
    runfile.lock(target / STATE)  # writable first (a read-only folder, a full disk's): one line, before anything
    state = load_state(target, resolved, quick, limit)
    started, call = time.time(), {"started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "ran": []}
    state["calls"].append(call)

    def save() -> None:
        call["seconds"] = round(time.time() - started, 1)
        with _said(target / STATE):
            atomic_write_json(target / STATE, state)

    save()
    installed = install_wheels(wheels, resolved) if wheels else None
    chosen, left_out = available(resolved)
    state |= {"frameworks": chosen, "left_out": left_out}
    write_environment(target, resolved, chosen, installed)
    deadline = time.monotonic() + limit
    try:
        for piece in PIECES:
            entry = state["pieces"][piece.name]
            if (only and piece.name not in only) or (not only and entry["status"] in ("done", "ended", "skipped")):
                continue
            planned = command(piece, resolved, chosen, quick)
            if planned is None:
                entry |= {"status": "skipped", "why": "none of its frameworks can run here"}
                continue
            held = _held(piece, target, resolved, deadline)
            if held:
                entry |= {"status": "stopped", "why": _busy(held)}
                print(f"footprint check: {piece.name}: not started {entry['why']}", flush=True)
            if held or time.monotonic() >= deadline:
                break
            carried = carry_probes(piece, target, resolved, piece_frameworks(piece, chosen, quick))
            print(f"footprint check: {piece.name}: {' '.join(planned[0][1:])}"
                  + (f" ({carried} probe records carried from earlier pieces)" if carried else ""), flush=True)
            began = time.monotonic()
            call["ran"].append(piece.name)
            save()  # a call killed outright from here on is listed with the piece it was in
            try:
                status, code = run_piece(piece, *planned, target, deadline)
            except BaseException:
                entry |= {"status": "stopped", "exit_code": None, "calls": entry["calls"] + 1,
                          "seconds": round(entry["seconds"] + time.monotonic() - began, 1),
                          "why": "by a stop of the check"}
                raise
            held = _held(piece, target, resolved, deadline=0) if status == "ended" else None  # at once
            if held:  # refused by another run's lock in the moment after the look above: still to run
                status = "stopped"
            entry.pop("why", None)
            entry |= {"status": status, "exit_code": code, "calls": entry["calls"] + 1,
                      "seconds": round(entry["seconds"] + time.monotonic() - began, 1)}
            if status == "stopped":
                entry["why"] = _busy(held) if held else "at the limit"
            save()  # a call killed outright from here on keeps what its pieces did
            print(f"footprint check: {piece.name}: {status} (exit {code}) after {entry['seconds']:,.0f} s in all",
                  flush=True)
            if status == "stopped":
                break
    finally:
        save()
        with _said(target / "README.md"):
            print(f"footprint check: wrote {summarize(target)}", flush=True)
    asked = [state["pieces"][name] for name in only or state["pieces"]]
    if any(entry["status"] in ("stopped", "not run") for entry in asked):
        print("footprint check: not finished within the limit: run it again to go on", flush=True)
        return 3
    return 1 if any(entry.get("exit_code") for entry in asked) else 0
