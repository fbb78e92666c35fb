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
import time
from pathlib import Path
from typing import IO

from models import backends
from models.record import SCHEMA_VERSION, atomic_write_json
from models.scenario import Scenario
from models.spec import ModelSpec
from suites import device, environment
from suites.registry import ROOT, SetupError, frameworks

RESULTS = Path(os.environ.get("FOOTPRINT_RESULTS") or ROOT / "results")  # run files and constants go here
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


def lock(path: Path) -> None:
    """Holds the run file's lock for this process; a second run on the same file is refused in one line."""
    path = Path(path).resolve()
    if path in _LOCKS:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
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
        if fresh:
            shutil.rmtree(self.store, ignore_errors=True)
        earlier = [] if fresh else self._earlier(suite, resolved_device)
        self.order = list(dict.fromkeys(identity(record["scenario"]) for record in earlier))
        # the run file's records go into the store, unless the store has them from an interrupted run (newer)
        for record in earlier:
            stored = self.store / f"{identity(record['scenario'])}.json"
            if not stored.exists():
                atomic_write_json(stored, record)
        self.order += sorted(p.stem for p in self.store.glob("*.json") if p.stem not in self.order)
        self.requested: set[str] = set()
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

    def _earlier(self, suite: str, resolved_device: str) -> list[dict]:
        """The records of the run file already there, where it is this suite's on this device."""
        try:
            data = load(self.path)
        except (OSError, ValueError):
            return []
        return data["records"] if (data["suite"], data["device"]) == (suite, resolved_device) else []

    def has_ok(self, scenario: Scenario) -> bool:
        """Whether the store holds an `ok` record of this scenario (what `resume` skips)."""
        stored = self.store / f"{identity(scenario.to_dict())}.json"
        return stored.exists() and json.loads(stored.read_text()).get("status") == "ok"

    def add(self, record: dict) -> None:
        """Stores the record the moment it exists, then assembles the run file from the store."""
        key = identity(record["scenario"])
        atomic_write_json(self.store / f"{key}.json", record)
        if key not in self.order:
            self.order.append(key)
        self._assemble()

    def _assemble(self) -> None:
        self.data["records"] = [json.loads((self.store / f"{key}.json").read_text()) for key in self.order]
        atomic_write_json(self.path, self.data)

    def add_fit(self, result: dict) -> None:
        """A fit question's answer with its probes (the fit suite has answers, not records)."""
        self.data.setdefault("fits", []).append(result)
        atomic_write_json(self.path, self.data)

    def request(self, keys: frozenset[str]) -> None:
        """The identities of the scenarios this run was asked for: `complete` at the end means each has a record."""
        self.requested |= keys

    def finish(self) -> None:
        """Complete only where every requested scenario has a record; the store goes once the file holds it."""
        self.data["complete"] = self.requested <= set(self.order)
        self.data["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self._assemble()
        shutil.rmtree(self.store, ignore_errors=True)


def load(path: Path) -> dict:
    """A run file, with frameworks under their current names (models.backends)."""
    data = json.loads(Path(path).read_text())
    if data.get("kind") != "footprint.run" or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a footprint run file of schema {SCHEMA_VERSION}")
    for entry in (*data["records"], *data.get("fits", [])):
        entry["scenario"]["framework"] = backends.current(entry["scenario"]["framework"])
    data["frameworks_known"] = [backends.current(name) for name in data.get("frameworks_known", [])]
    return data
