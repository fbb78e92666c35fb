"""The summary page of a `check` folder (README.md there): what ran, how long each piece took, what is missing and
why, and what changed against the newest earlier folder for the same card (`compare`, with its verdict)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from models.record import worker_seconds
from suites.report import timing
from suites.run import runfile
from suites.run.pieces import PIECES, STATE, Piece, same_card
from suites.run.registry import ROOT

PAGE = "README.md"
COMPARED = "compare.txt"
GOAL_S = {"cuda": 300}  # the default suite's time a GPU box should take (issue: five minutes)
STATUS_WORDS = {"done": "done", "ended": "ended with exit {exit_code}", "stopped": "stopped {why}: run again",
                "not run": "not run yet", "skipped": "skipped: {why}"}


def _run(target: Path, piece: Piece, device: str) -> dict | None:
    name = piece.run_file(device)
    path = target / name if name else None
    try:
        return runfile.load(path) if path and path.exists() else None
    except (OSError, ValueError):
        return None


def _records_cell(run: dict | None) -> str:
    """Each status's count, the fit's answers, and the scenarios still missing."""
    if run is None:
        return "-"
    statuses = Counter(record["status"] for record in run.get("records", []))
    answers = Counter(result.get("answer") for result in run.get("fits", []))
    parts = [f"{count} {status}" for status, count in statuses.most_common()]
    parts += [f"{count} {answer}" for answer, count in answers.most_common()]
    missing = len(run.get("missing") or [])
    return ", ".join(parts + ([f"{missing} missing"] if missing else [])) or "nothing yet"


def _why_cell(target: Path, piece: Piece, run: dict | None) -> str:
    """Why a record is not ok (its status, phase and known cause), or for a test piece its log's last line."""
    if run is not None:
        failed = [f"{record['scenario']['framework']} {record['scenario']['model']} {record['scenario']['kind']}: "
                  f"{record['status']} in {(record.get('failure') or {}).get('phase')}"
                  for record in run.get("records", []) if record["status"] not in ("ok", "unavailable")]
        return "; ".join(failed[:3]) + (f"; {len(failed) - 3} more" if len(failed) > 3 else "")
    log = target / "logs" / f"{piece.name}.log"
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()] \
        if log.exists() else []
    return lines[-1].strip("= ") if lines else ""


def _pieces_table(target: Path, state: dict) -> list[str]:
    rows = ["| piece | status | seconds | calls | records | not ok, or the test's last line |",
            "|---|---|---:|---:|---|---|"]
    for piece in PIECES:
        entry = state["pieces"].get(piece.name, {"status": "not run", "seconds": 0, "calls": 0})
        run = _run(target, piece, state["device"])
        status = STATUS_WORDS[entry["status"]].format(exit_code=entry.get("exit_code"), why=entry.get("why"))
        name = f"[{piece.name}]({piece.suite}-{state['device']}.md)" if run else piece.name
        rows.append(f"| {name} | {status} | {entry['seconds']:,.0f} | {entry['calls']} | {_records_cell(run)} | "
                    f"{_why_cell(target, piece, run).replace('|', '/')} |")
    return rows


def _time_lines(target: Path, state: dict) -> list[str]:
    """The default suite's time against the goal, and where it went per framework (the workers' wall seconds, less
    their waits at the gate)."""
    run = _run(target, PIECES[0], state["device"])
    entry = state["pieces"]["default"]
    if run is None or entry["status"] != "done":
        return []
    by_framework: Counter = Counter()
    for record in run["records"]:
        by_framework[record["scenario"]["framework"]] += worker_seconds(record)
    goal = GOAL_S.get(state["device"])
    verdict = "" if goal is None or state["quick"] else (
        f" (the goal on a GPU: {goal} s: {'met' if entry['seconds'] <= goal else 'not met'})")
    spent = ", ".join(f"{name} {seconds:,.0f} s" for name, seconds in by_framework.most_common())
    return [f"The default suite took **{entry['seconds']:,.0f} s** for {len(run['records'])} scenarios{verdict}; "
            f"its workers' wall time per framework, less their waits at the gate: {spent}.", ""]


def earlier_folder(target: Path) -> Path | None:
    """The newest other folder of results/ for the same card with a default run of the same device."""
    state = json.loads((target / STATE).read_text())
    return timing.newest_run(state["device"], lambda other: other.resolve() != target.resolve()
                             and same_card(other.name, state["card_slug"]))


def _compare_lines(target: Path, device: str) -> list[str]:
    """`compare` of the default runs against the newest earlier folder's: its verdict here, all of it in
    compare.txt."""
    name = f"default-{device}.json"
    earlier = earlier_folder(target)
    if earlier is None or not (target / name).exists():
        return ["No earlier folder for this card has a default run to compare with."]
    done = subprocess.run([sys.executable, "-m", "suites", "compare", str(earlier / name), str(target / name)],
                          cwd=ROOT, capture_output=True, text=True)
    (target / COMPARED).write_text(done.stdout + done.stderr)
    ending = [line for line in done.stdout.splitlines() if line.startswith("verdict")] or \
        (done.stdout + done.stderr).strip().splitlines()[-1:]
    shown = earlier.relative_to(ROOT) if earlier.is_relative_to(ROOT) else earlier
    return [f"`python -m suites compare {shown}/{name} {name}` (exit {done.returncode}; all of it in "
            f"[{COMPARED}]({COMPARED})):", "", *(f"> {line}" for line in ending)]


def _environment_lines(target: Path, state: dict) -> list[str]:
    path = target / "environment.json"
    facts = json.loads(path.read_text()) if path.exists() else {}
    lines = [f"- {facts.get('device', state['device'])}; code {state['git_commit']}"]
    driver = facts.get("driver") or {}
    if driver:
        lines.append(f"- driver {driver.get('driver')} (CUDA {driver.get('cuda')})")
    for name, found in facts.get("interpreters", {}).items():
        packages = found.get("packages", {})
        versions = ", ".join(f"{package} {facts_['version']}" for package, facts_ in packages.items()
                             if package not in ("numpy", "ml-dtypes", "nvidia-ml-py", "onnx"))
        keras = packages.get("keras")
        came = (f"; keras installed by {keras.get('installer') or 'an unknown installer'}"
                f"{' from ' + keras['from'] if keras.get('from') else ''}"
                f", bytecode {'written' if found.get('keras_bytecode') else 'not written'}") if keras else ""
        lines.append(f"- {name}: Python {found.get('python')} ({found.get('executable')}): {versions}{came}"
                     if "error" not in found else f"- {name}: {found['error']}")
    wheels = facts.get("wheels")
    if wheels:
        into = "; ".join(f"{python}: {'installed' if ok is True else ok}"
                         for python, ok in wheels["installed_into"].items()) or "every Keras interpreter had keras"
        lines.append(f"- carried wheels ({', '.join(wheels['wheels'])}): {into}")
    lines += [f"- left out: {name}: {why}" for name, why in state.get("left_out", {}).items()]
    return lines


def write(target: Path) -> Path:
    state = json.loads((target / STATE).read_text())
    form = " (the small form, `QUICK=1`: the machinery, not evidence)" if state["quick"] else ""
    calls = state["calls"]
    lines = [f"# `make gpu-check` on {state['card']} at {state['git_commit'][:7]}{form}", "",
             f"{len(calls)} call{'s' * (len(calls) != 1)} of at most {state['limit_s']:,.0f} s, the last started "
             f"{calls[-1]['started_at'] if calls else 'never'}; frameworks: {', '.join(state.get('frameworks', []))}. "
             "Each piece's output is in logs/; what each piece is: docs/usage.md.", "",
             *_pieces_table(target, state), "", *_time_lines(target, state),
             "## Against the newest earlier run on this card", "", *_compare_lines(target, state["device"]), "",
             "## Environment", "", *_environment_lines(target, state), ""]
    path = target / PAGE
    path.write_text("\n".join(lines))
    return path
