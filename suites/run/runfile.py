"""The run file: one suite's records with the facts needed to read and compare them, assembled from a store.

Each scenario's record is written to the store (`<run file>.store/<identity>.json`, write-then-rename) the
moment it completes, and the run file is assembled from the store after each one. A run starts from the run
file already there: a narrowed or repeated run adds or replaces only its own scenarios and deletes none
(`fresh` starts over on purpose; `resume` skips scenarios already `ok`). A lock beside the run file keeps a
second run from writing the same file; `complete` is true only when every requested scenario has a record.
"""

from __future__ import annotations

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
from models.record import SCHEMA_VERSION, atomic_write_json
from models.scenario import Scenario
from models.spec import ModelSpec
from suites.run import device, environment
from suites.run.registry import ROOT, SetupError, frameworks

# A local run's files: git ignores results/local/, so a bench never overwrites a published run
# (results/<machine>-<commit>/).
RESULTS = Path(os.environ.get("FOOTPRINT_RESULTS") or ROOT / "results" / "local")
_LOCKS: dict[Path, IO] = {}  # the run files this process holds, so the bench command and pytest share one lock


def run_path(suite: str, resolved_device: str) -> Path:
    return RESULTS / f"{suite}-{resolved_device}.json"


def identity(scenario: dict) -> str:
    """A scenario's key in the store: its settings with older records' missing fields at their defaults and the
    spec in today's compact form, so the same scenario measured by older code has the same key."""
    settings = Scenario.from_dict(scenario).to_dict()
    if settings.get("spec_json"):
        settings["spec_json"] = ModelSpec.from_dict(settings["spec_json"]).to_dict()
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
    checked writable first (the run file, its store, the report and the constants all go there)."""
    path = Path(path).resolve()
    if path in _LOCKS:
        return
    writable(path)
    handle = open(path.with_name(f".{path.name}.lock"), "a+")  # noqa: SIM115 (held until the process ends)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise SetupError(f"{path.name} is being written by another run ({holder}); wait for it to finish") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    _LOCKS[path] = handle


class RunFile:
    def __init__(self, suite: str, resolved_device: str, path: Path | None = None, fresh: bool = False) -> None:
        self.path = path or run_path(suite, resolved_device)
        lock(self.path)
        self.store = self.path.with_name(f"{self.path.name}.store")
        self.write_failure: str | None = None
        if fresh:
            shutil.rmtree(self.store, ignore_errors=True)
        earlier = {} if fresh else self._earlier(suite, resolved_device)
        # identity -> record: the run file's, each replaced by the store's where an interrupted run left a newer one
        self.records = {identity(record["scenario"]): record for record in earlier.get("records", [])}
        # question identity -> the fit suite's answer (answers written before they had one keep a key of their own)
        self.fits = {result.get("question_identity") or f"unkeyed-{index}": result
                     for index, result in enumerate(earlier.get("fits", []))}
        for key, record in self.records.items():
            if not (self.store / f"{key}.json").exists():
                self._write(self.store / f"{key}.json", record)
        for stored in sorted(self.store.glob("*.json")):
            self.records[stored.stem] = json.loads(stored.read_text())
        self.requested: dict[str, dict] = {}  # identity -> scenario, to list what a stopped run is missing
        self.data = {
            "schema_version": SCHEMA_VERSION,
            "kind": "footprint.run",
            "suite": suite,
            "device": resolved_device,
            "device_description": device.describe(resolved_device),
            "complete": False,
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "git_commit": environment.git_commit(),
            "machine": environment.machine(),
            "frameworks_known": frameworks(),
            "records": [],
        }

    def _earlier(self, suite: str, resolved_device: str) -> dict:
        """The run file already there, where it is this suite's on this device (its records and fit answers)."""
        try:
            data = load(self.path)
        except (OSError, ValueError):
            return {}
        return data if (data["suite"], data["device"]) == (suite, resolved_device) else {}

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


def load(path: Path) -> dict:
    """A run file, with frameworks under their current names (models.backends)."""
    data = json.loads(Path(path).read_text())
    if data.get("kind") != "footprint.run" or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a footprint run file of schema {SCHEMA_VERSION}")
    for entry in (*data["records"], *data.get("fits", [])):
        entry["scenario"]["framework"] = backends.current(entry["scenario"]["framework"])
    # a record cut short by older code lacks what the scenario alone says (the model, the framework's name)
    data["records"] = [Scenario.from_dict(record["scenario"]).bare_record() | record for record in data["records"]]
    data["frameworks_known"] = [backends.current(name) for name in data.get("frameworks_known", [])]
    return data
