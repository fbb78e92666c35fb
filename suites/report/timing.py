"""How long each suite took on the newest published GPU run: docs/usage.md's time table reads its GPU column from
here (a test keeps the two in step), so the page says what the newest run took, not what an older one did."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from suites.run import runfile
from suites.run.pieces import STATE
from suites.run.registry import ROOT, frameworks

DEVICE = "cuda"


def newest_run(device: str, accept: Callable[[Path], bool] = lambda folder: True) -> Path | None:
    """The folder of results/ (of those `accept` takes) whose default run on `device` finished last."""
    found = []
    for folder in (ROOT / "results").iterdir():
        path = folder / f"default-{device}.json"
        if not path.exists() or not accept(folder):
            continue
        try:
            run = runfile.load(path)
        except (OSError, ValueError):
            continue
        found.append((run.get("finished_at") or run.get("started_at") or "", folder.name, folder))
    return max(found)[2] if found else None


def newest_gpu_run() -> Path | None:
    """The published folder whose default GPU run finished last."""
    return newest_run(DEVICE)


def _seconds(run: dict) -> float:
    started, finished = (datetime.strptime(run[key], "%Y-%m-%dT%H:%M:%S%z") for key in ("started_at", "finished_at"))
    return (finished - started).total_seconds()


def took(folder: Path, suite: str) -> str:
    """A suite's time there: its check piece's seconds where a check ran it (a resumed run's start and finish span
    the calls between), else its run file's start to finish; or why there is none."""
    path = folder / f"{suite}-{DEVICE}.json"
    if not path.exists():
        return "not run"
    run = runfile.load(path)
    counted = f"{len(run['fits'])} questions" if suite == "fit" else f"{len(run['records'])} scenarios"
    if not run.get("complete") or not run.get("finished_at"):
        return f"not finished ({counted})"
    state = folder / STATE
    piece = json.loads(state.read_text())["pieces"].get(suite, {}) if state.exists() else {}
    seconds = piece["seconds"] if piece.get("status") == "done" else _seconds(run)
    return f"{seconds:,.0f} s ({counted})"


def column(folder: Path, suites: Iterable[str]) -> tuple[str, dict[str, str]]:
    """The GPU column's header (the card, the commit, the frameworks of its default run) and the cell of each of
    `suites` (the bench suites' names, `suites.bench.matrix.SUITES`, which the caller passes: a report imports no
    bench)."""
    default = runfile.load(folder / f"default-{DEVICE}.json")
    ran = {record["scenario"]["framework"] for record in default["records"]}
    card, commit = re.fullmatch(r"(.+?)-([0-9a-f]{7}|unknown).*", folder.name).groups()
    header = f"{card.upper()} at {commit}: {', '.join(name for name in frameworks() if name in ran)}"
    return header, {suite: took(folder, suite) for suite in suites}
