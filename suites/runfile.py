"""The run file: one suite's records with the facts needed to read and compare them.

It is rewritten atomically after every scenario, so an interrupted run keeps what it measured
(`complete` says whether the suite finished).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from models import backends
from models.record import SCHEMA_VERSION, atomic_write_json
from suites import device, environment
from suites.registry import ROOT, frameworks

RESULTS = ROOT / "results"


def run_path(suite: str, resolved_device: str) -> Path:
    return RESULTS / f"{suite}-{resolved_device}.json"


class RunFile:
    def __init__(self, suite: str, resolved_device: str, path: Path | None = None) -> None:
        self.path = path or run_path(suite, resolved_device)
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

    def add(self, record: dict) -> None:
        self.data["records"].append(record)
        atomic_write_json(self.path, self.data)

    def add_fit(self, result: dict) -> None:
        """A fit question's answer with its probes (the fit suite has answers, not records)."""
        self.data.setdefault("fits", []).append(result)
        atomic_write_json(self.path, self.data)

    def finish(self) -> None:
        self.data["complete"] = True
        self.data["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        atomic_write_json(self.path, self.data)


def load(path: Path) -> dict:
    """A run file, with frameworks under their current names (models.backends)."""
    data = json.loads(Path(path).read_text())
    if data.get("kind") != "footprint.run" or data.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path} is not a footprint run file of schema {SCHEMA_VERSION}")
    for entry in (*data["records"], *data.get("fits", [])):
        entry["scenario"]["framework"] = backends.current(entry["scenario"]["framework"])
    data["frameworks_known"] = [backends.current(name) for name in data.get("frameworks_known", [])]
    return data
