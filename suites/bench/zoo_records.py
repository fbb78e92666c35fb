"""The zoo's training records, published beside its table so that another machine goes on where this one stopped.

Training every net of the zoo in four frameworks takes longer than a machine may keep its work folder, so the
table's folder keeps the records it reads (`zoo-records.json`). A record's spec is the bulk of it and is rebuilt
from the net's source the same way on any machine, so it is kept as a hash: `--seed FOLDER` takes a record back for
the scenario of this call with the same file name, framework and settings whose imported spec has that hash (this
machine's path to the file put in), and trains only what is still missing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from models.record import atomic_write_json
from models.scenario import Scenario
from models.spec import SpecError
from suites.run import environment
from suites.run.runfile import RunFile

KIND = "footprint-zoo-records"
SCHEMA_VERSION = 1
FILE = "zoo-records.json"
_WHERE = ("model", "model_file", "spec_json")  # where the file lies (a file's model is its path), and its spec
UNREAD = ("timeline",)  # the memory samples over time: for plots; the table reads the phases, and it is 2/5 of a record


def _kept(scenario: dict) -> dict:
    """A scenario's settings with its file's name and its spec's hash in place of its path and spec."""
    known = Scenario.from_dict(scenario)  # an older record's missing fields at their defaults, as the store keys it
    spec = json.dumps(known.spec.to_dict(), sort_keys=True)
    return {key: value for key, value in known.to_dict().items() if key not in _WHERE} | {
        "file": Path(scenario["model_file"]).name, "spec_sha256": hashlib.sha256(spec.encode()).hexdigest()}


def write(folder: Path, records: Iterable[dict]) -> None:
    """The records, each with its scenario as `_kept` makes it, into the table's folder."""
    atomic_write_json(folder / FILE, {
        "schema_version": SCHEMA_VERSION, "kind": KIND, "git_commit": environment.git_commit(),
        "about": "the zoo's training records; each scenario names its file and its spec's sha256 (python -m suites "
                 "zoo --seed takes them back where the rebuilt file imports to the same spec)",
        "records": [{key: value for key, value in record.items() if key not in UNREAD} | {
            "scenario": _kept(record["scenario"])} for record in records]})


def read(folder: Path) -> list[dict]:
    """The records of `folder`'s table, read before anything is built or measured: a folder without the file, or a
    file that is not one, is refused in one line."""
    path = folder / FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        reason = getattr(error, "strerror", None) or error
        raise SpecError(f"--seed {folder}: cannot read {path.name}: {reason}") from None
    if not isinstance(data, dict) or (data.get("kind"), data.get("schema_version")) != (KIND, SCHEMA_VERSION):
        raise SpecError(f"--seed {folder}: {path.name} is not a {KIND} file of schema {SCHEMA_VERSION}")
    records = data.get("records")
    return [record for record in records if isinstance(record, dict)] if isinstance(records, list) else []


def take(run: RunFile, scenarios: Iterable[Scenario], records: list[dict]) -> int:
    """Adds to `run` each ok record (`read`'s) of one of `scenarios` that `run` has no ok record of; returns how
    many."""
    wanted = {json.dumps(_kept(scenario.to_dict()), sort_keys=True): scenario for scenario in scenarios}
    taken = 0
    for record in records:
        scenario = wanted.get(json.dumps(record.get("scenario"), sort_keys=True))
        if scenario is not None and record.get("status") == "ok" and not run.has_ok(scenario):
            run.add(record | {"scenario": scenario.to_dict()})
            taken += 1
    return taken
