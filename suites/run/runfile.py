"""The run file: one suite's records with the facts needed to read and compare them, assembled from a store.

Each scenario's record is written to the store (`<run file>.store/<identity>.json`, write-then-rename) the
moment it completes, and the run file is assembled from the store after each one. A run starts from the run
file already there: a narrowed or repeated run adds or replaces only its own scenarios and deletes none
(`fresh` starts over on purpose, keeping the old file aside; `resume` skips scenarios already `ok`). A file there
that is not this suite's run on this device is never written over, and a stored record that is not one is
quarantined, never merged. A lock beside the run file keeps a second run from writing the same file; `complete` is
true only when every requested scenario has a record.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

from models import backends
from models.record import SCHEMA_VERSION, STATUSES, atomic_write_json, json_kind, load_json, regular_file, shape_fault
from models.scenario import Scenario
from suites.run import device, environment
from suites.run.registry import ROOT, SetupError, frameworks

# A local run's files: git ignores results/local/, so a bench never overwrites a published run
# (results/<machine>-<commit>/).
RESULTS = Path(os.environ.get("FOOTPRINT_RESULTS") or ROOT / "results" / "local")
KIND = "footprint.run"
RECORD_SUITE = "run"  # the suite a record file (`run --out`) reads as: a run of its one record
# what a command stores in a file it reads, which belongs to the run even in a record file, and which a bench writing
# the run file again keeps: compare --store-spread's spread (suites/analysis/compare.py SPREAD_FIELD; run/ imports
# nothing from analysis/)
RUN_FIELDS = ("repeat_spread",)
_LOCKS: dict[Path, IO] = {}  # the run files this process holds, so the bench command and pytest share one lock


def run_path(suite: str, resolved_device: str) -> Path:
    return RESULTS / f"{suite}-{resolved_device}.json"


def identity(scenario: dict) -> str:
    """A scenario's key in the store: its settings with older records' missing fields at their defaults and the
    spec in today's compact form, so the same scenario measured by older code has the same key."""
    known = Scenario.from_dict(scenario)
    settings = known.to_dict()
    if settings.get("spec_json"):
        settings["spec_json"] = known.spec.to_dict()
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:20]


def writable(path: Path) -> None:
    """Checks, before anything is measured, that a file can be written at `path`: a one-line SetupError if not."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=path.parent).close()
    except OSError as error:
        raise SetupError(f"cannot write {path}: {error.strerror or error}") from None


def lock(path: Path) -> None:
    """Holds the run file's lock for this process; a second run on the same file is refused in one line. The place is
    checked writable first (the run file, its store, the report and the constants all go there). The lock file goes
    when this process ends (`_unlock`), however the command ended short of SIGKILL: a refused command leaves none."""
    path = Path(path).resolve()
    if path in _LOCKS:
        return
    writable(path)
    name = path.with_name(f".{path.name}.lock")
    while True:
        handle = open(name, "a+")  # noqa: SIM115 (held until the process ends)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise SetupError(f"{path.name} is being written by another run ({holder}); wait for it to finish") from None
        try:  # the file locked is still the one at `name`, not one a finishing holder removed as this one opened it
            if os.stat(name).st_ino == os.fstat(handle.fileno()).st_ino:
                break
        except FileNotFoundError:
            pass
        handle.close()
    try:  # unbuffered: a disk already full fails here, not again when the handle closes
        os.ftruncate(handle.fileno(), 0)
        os.write(handle.fileno(), f"pid {os.getpid()}".encode())
    except OSError as error:  # no lock file of this process's outlives the refusal
        os.unlink(name)
        handle.close()
        raise SetupError(f"cannot write {path}: {error.strerror or error}") from None
    if not _LOCKS:
        atexit.register(_unlock)
    _LOCKS[path] = handle


def holder(path: Path) -> str | None:
    """Who holds the run file's lock ("pid N"), or None where no process does: a look that makes no lock file and
    leaves none held."""
    path = Path(path).resolve()
    try:
        with open(path.with_name(f".{path.name}.lock")) as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return handle.read().strip() or "another process"
    except FileNotFoundError:
        pass
    return None


def _unlock() -> None:
    """Removes this process's lock files while it still holds them (a process that opened one meanwhile finds it
    gone, and makes its own)."""
    for path, handle in _LOCKS.items():
        with contextlib.suppress(OSError):
            path.with_name(f".{path.name}.lock").unlink()
        handle.close()
    _LOCKS.clear()


class RunFile:
    def __init__(self, suite: str, resolved_device: str, path: Path | None = None, fresh: bool = False) -> None:
        self.path = path or run_path(suite, resolved_device)
        lock(self.path)
        self.store = store_of(self.path)
        self.write_failure: str | None = None
        if fresh:
            set_aside(self.path)
        earlier = earlier_run(self.path, suite, resolved_device)
        # identity -> record: the run file's, each replaced by the store's where an interrupted run left a newer one
        self.records = {identity(record["scenario"]): record for record in earlier.get("records", [])}
        # question identity -> the fit suite's answer (answers written before they had one keep a key of their own)
        self.fits = {result.get("question_identity") or f"unkeyed-{index}": result
                     for index, result in enumerate(earlier.get("fits", []))}
        stored = stored_records(self.path)
        for key, record in self.records.items():
            if key not in stored:
                self._write(self.store / f"{key}.json", record)
        self.records |= stored
        self.requested: dict[str, dict] = {}  # identity -> scenario, to list what a stopped run is missing
        self.data = {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "suite": suite,
            "device": resolved_device,
            "device_description": device.describe(resolved_device),
            "complete": False,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "git_commit": environment.git_commit(),
            "machine": environment.machine(),
            "frameworks_known": frameworks(),
            "records": [],
        } | {field: earlier[field] for field in RUN_FIELDS if field in earlier}  # what other commands stored in it

    def has_fit(self, key: str) -> bool:
        """Whether the fit question with this identity (`fit_identity`) has an answer (what `resume` skips)."""
        return key in self.fits

    def has_ok(self, scenario: Scenario) -> bool:
        """Whether the run holds an `ok` record of this scenario (what `resume` skips)."""
        return self.records.get(identity(scenario.to_dict()), {}).get("status") == "ok"

    def add(self, record: dict) -> None:
        """Stores the record the moment it exists, then assembles the run file (a repeated scenario is replaced in
        its place)."""
        key = identity(record["scenario"])
        self.records[key] = record
        self._write(self.store / f"{key}.json", record)
        self._assemble()

    def _write(self, path: Path, data: dict) -> None:
        """Writes, or says in one line (once) what could not be written and where the measured records are."""
        try:
            atomic_write_json(path, data)
        except OSError as error:
            if not self.write_failure:
                self.write_failure = f"cannot write {path}: {error.strerror or error}"
                print(f"footprint: error: {self.write_failure}; the records measured before it stay in "
                      f"{self.store.name} and {self.path.name}", file=sys.stderr, flush=True)

    def _assemble(self) -> None:
        self.data["records"] = list(self.records.values())
        if self.fits:
            self.data["fits"] = list(self.fits.values())
        self.data["git_commits"] = commits(self.data)
        self._write(self.path, self.data)

    def add_fit(self, result: dict) -> None:
        """A fit question's answer with its probes, under its `question_identity` (the fit suite has answers, not
        records): written the moment it exists, replacing an earlier answer to the same question."""
        self.fits[result["question_identity"]] = result
        self._assemble()

    def request(self, scenarios: dict[str, dict]) -> None:
        """The scenarios this run was asked for, by identity: `complete` at the end means each has a record, and
        the run file lists those that have none under `missing`."""
        self.requested |= scenarios

    def finish(self) -> None:
        """Complete only where every requested scenario has a record; the store goes once the file holds it."""
        self.data["missing"] = [scenario for key, scenario in self.requested.items()
                                if key not in self.records and key not in self.fits]
        self.data["complete"] = not self.data["missing"] and not self.write_failure
        self.data["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._assemble()
        if not self.write_failure:  # else the store may hold what the run file could not
            shutil.rmtree(self.store, ignore_errors=True)


def fit_identity(scenario: Scenario, budget: int, max_batch: int) -> str:
    """A fit question's key: the scenario it asks about (before the budget caps it), the budget and the bound."""
    return f"fit-{identity(scenario.to_dict())}-{budget}-{max_batch}"


def commits(run: dict) -> dict[str, int]:
    """Every commit the run's records (a fit's probes' included) were measured at, with how many: a run merged from
    several runs (a narrowed rerun, --resume after a change) says so, where its top-level `git_commit` names only
    the newest."""
    found: dict[str, int] = {}
    probes = [probe["record"] for result in run.get("fits", []) for probe in result.get("probes", [])
              if "record" in probe]
    for record in [*run["records"], *probes]:
        commit = record.get("run", {}).get("git_commit") or "unknown"
        found[commit] = found.get(commit, 0) + 1
    return dict(sorted(found.items(), key=lambda item: -item[1]))


class RunFileError(ValueError):
    """Why a file is not a run file (or a record not one a run file may hold), in one line."""


def read_record(record: object) -> dict:
    """A scenario's record as a run file holds it (older records' missing fields from their scenario, frameworks
    under their current names), or RunFileError saying why it is not one: not an object, no scenario this code can
    read, another schema, a status that is none of STATUSES, or a shape its readers cannot read (`shape_fault`:
    its phases, say)."""
    if not isinstance(record, dict):
        raise RunFileError(f"a record is {json_kind(record)}, not an object")
    if not isinstance(record.get("scenario"), dict):
        raise RunFileError("a record has no scenario")
    try:
        scenario = record["scenario"] | {"framework": backends.current(str(record["scenario"]["framework"]))}
        if scenario.get("model_file"):  # known by its path (older code named it by its stem: two files, one name)
            scenario["model"] = scenario["model_file"]
        identity(scenario)
        record = Scenario.from_dict(scenario).bare_record() | record | {"scenario": scenario}
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise RunFileError(f"a record's scenario is not one ({type(error).__name__}: {error})") from None
    if record["schema_version"] != SCHEMA_VERSION:
        raise RunFileError(f"a record of schema {record['schema_version']!r}; this code reads {SCHEMA_VERSION}")
    if record["status"] not in STATUSES:
        raise RunFileError(f"a record's status is {record['status']!r}, none of {', '.join(STATUSES)}")
    fault = shape_fault(record)
    if fault:
        raise RunFileError(f"a record of {record['scenario'].get('framework')} {record['scenario'].get('model')}: "
                           f"{fault}")
    return record


def read_run(data: object) -> dict:
    """The run file's data checked for what every reader takes for granted (RunFileError, in one line, where it is
    not a run file), with frameworks under their current names (models.backends)."""
    if not isinstance(data, dict):
        raise RunFileError(f"it is {json_kind(data)}, not an object")
    if data.get("kind") != KIND:
        raise RunFileError(f"its kind is {data.get('kind')!r}, not {KIND!r}")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise RunFileError(f"its schema_version is {data.get('schema_version')!r}; this code reads {SCHEMA_VERSION}")
    for field in ("suite", "device"):
        if not isinstance(data.get(field), str):
            raise RunFileError(f"its {field} is {data.get(field)!r}, not a name")
    if not isinstance(data.get("records"), list) or not isinstance(data.get("fits", []), list):
        raise RunFileError("its records (and fits) are not lists")
    data["records"] = [read_record(record) for record in data["records"]]
    for result in data.get("fits", []):
        if not isinstance(result, dict) or not isinstance(result.get("scenario"), dict):
            raise RunFileError("a fit answer has no scenario")
        result["scenario"]["framework"] = backends.current(str(result["scenario"].get("framework")))
    data["frameworks_known"] = [backends.current(name) for name in data.get("frameworks_known", [])]
    return data


def load(path: Path) -> dict:
    """A run file or a record file (`read`): OSError where it cannot be read (or is no regular file, before it is
    read), ValueError where it is neither (JSON nested too deeply to read among them)."""
    return read(load_json(path))


def read(data: object) -> dict:
    """A run file's data, checked (`read_run`), or a record's (`run --out`) read as a run of its one record
    (`_as_run`); RunFileError, in one line, where it is neither."""
    is_record = isinstance(data, dict) and "kind" not in data and {"scenario", "phases"} <= data.keys()
    return read_run(_as_run(data) if is_record else data)


def _as_run(data: dict) -> dict:
    """A record as a run of that one record (suite RECORD_SUITE), so every command that reads runs reads what `run
    --out` wrote, and the file stays the plain record docs/records.md describes. The run's facts are the record's
    own: its device, commit and machine (and its GPU's name, never this machine's)."""
    record = read_record({key: value for key, value in data.items() if key not in RUN_FIELDS})
    facts = record.get("run")
    if not isinstance(facts, dict) or not isinstance(facts.get("machine"), dict):
        raise RunFileError("a record without its run's facts (run.machine, run.git_commit)")
    resolved, started = record["scenario"]["device"], facts.get("started_at_unix")
    gpu = (record.get("nvml") or {}).get("gpu") or {}
    return {"schema_version": record["schema_version"], "kind": KIND, "suite": RECORD_SUITE, "device": resolved,
            "device_description": device.describe(resolved, [gpu["name"]] if gpu.get("name") else []),
            "complete": True, "git_commit": facts.get("git_commit"), "machine": facts["machine"],
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)) if started else "never",
            "records": [record]} | {key: data[key] for key in RUN_FIELDS if key in data}


def store_of(path: Path) -> Path:
    """Where a run file's records are stored the moment they exist: `<run file>.store/`."""
    return path.with_name(f"{path.name}.store")


def carry(path: Path, records: list[dict]) -> None:
    """Stores records measured for another run file into a run file not yet begun, as an interrupted run's would
    be: the run that begins it keeps them, and `--resume` runs those scenarios not again."""
    for record in records:
        atomic_write_json(store_of(path) / f"{identity(record['scenario'])}.json", record)


def stored_records(path: Path) -> dict[str, dict]:
    """The records in the run file's store by identity (what an interrupted run measured). One that is not a record
    a run file may hold (`read_record`) is moved to `<run file>.quarantine/`, said in one line, and never merged."""
    path = Path(path)
    store, quarantine = store_of(path), path.with_name(f"{path.name}.quarantine")
    records = {}
    for stored in sorted(store.glob("*.json")):
        try:
            record = read_record(load_json(stored))
        except (OSError, ValueError) as error:
            quarantine.mkdir(exist_ok=True)
            os.replace(stored, quarantine / stored.name)
            print(f"footprint: warning: {stored} is not a record ({error}); moved to {quarantine / stored.name}, "
                  "out of the run file", file=sys.stderr, flush=True)
            continue
        records[identity(record["scenario"])] = record
    return records


def earlier_run(path: Path, suite: str, resolved_device: str) -> dict:
    """The run file a run starts from: {} where there is none; SetupError, in one line, where one is there that this
    run must not write over (it cannot be read, it is not a run file, or another suite's or device's)."""
    path = Path(path)
    if not path.exists():
        return {}
    keep = f"nothing was written (move it away, or --fresh keeps it as {aside_name(path).name})"
    try:
        data = load(path)
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) else error
        raise SetupError(f"{path} cannot be read as a run file ({reason}); {keep}") from None
    if (data["suite"], data["device"]) != (suite, resolved_device):
        raise SetupError(f"{path} is the {data['suite']} suite's run on {data['device']}, not {suite} on "
                         f"{resolved_device}; {keep}")
    return data


def aside_name(path: Path) -> Path:
    """Where --fresh keeps the run file it starts over from: beside it, named by the time it was set aside."""
    path = Path(path)
    return path.with_name(f"{path.stem}.before-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")


def set_aside(path: Path) -> list[Path]:
    """Moves the run file and its store (what an interrupted run left) aside for a fresh start: kept, never
    deleted. Returns where they went."""
    path, target = Path(path), aside_name(path)
    while target.exists():  # two fresh starts within one second
        target = target.with_name(f"{target.stem}-again{target.suffix}")
    kept = []
    store, store_kept = store_of(path), store_of(target)
    for source, moved in ((path, target), (store, store_kept)):
        if source.exists():
            os.replace(source, moved)
            kept.append(moved)
    return kept


def refuse_run_file(path: Path) -> None:
    """SetupError where `path` holds a run file: the one record or answer `--out` writes would replace its records;
    or where it is there but no regular file (a FIFO would hang the read, and the file written would replace it, a
    device such as /dev/zero too)."""
    try:
        regular_file(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise SetupError(f"--out {path}: {error.strerror}; give the path of a file") from None
    try:
        data = load_json(path)
    except (OSError, ValueError):
        return
    if isinstance(data, dict) and data.get("kind") == KIND:
        raise SetupError(f"{path} is a run file ({len(data.get('records') or [])} records); --out writes one "
                         "record or answer and would replace them: give another path")
