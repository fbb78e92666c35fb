"""The run store: a rerun adds or replaces its own scenarios and deletes none; resume, fresh and the lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from models.scenario import Scenario
from suites.report.render import markdown
from suites.run import runfile
from suites.run.registry import ROOT
from suites.run.runfile import load
from tests.conftest import gone, workers_of


def bench_command(results: Path, *args: str) -> dict:
    """`python -m suites bench` writing into `results` instead of the repository's results/."""
    return {"args": [sys.executable, "-m", "suites", "bench", "--suite", "default", "--device", "cpu",
                     "--models", "probe", *args], "cwd": ROOT, "text": True,
            "env": os.environ | {"FOOTPRINT_RESULTS": str(results)}}


def bench(results: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(**bench_command(results, *args), capture_output=True, timeout=600)


def interrupted_bench(results: Path, stored_before: int, *args: str) -> tuple[int, str, list[psutil.Process]]:
    """Starts a bench and sends it SIGINT (Ctrl-C) while a worker measures the scenario after `stored_before`
    records are in the store; returns its exit code, its output and the workers it had then. Its infer scenarios
    hang until the stop, so where the last stored is a train one (the suite alternates them), the next still runs when
    the stop comes, however fast the machine."""
    command = bench_command(results, *args)
    command["env"] |= {"FOOTPRINT_FAULT": "context:hang@infer"}
    with subprocess.Popen(**command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as run:
        store = results / "default-cpu.json.store"
        workers = workers_of(run, lambda: len(list(store.glob("*.json"))) >= stored_before)
        run.send_signal(signal.SIGINT)
        output, _ = run.communicate(timeout=120)
    return run.returncode, output, workers


def records(results: Path) -> list[dict]:
    return json.loads((results / "default-cpu.json").read_text())["records"]


def test_a_narrowed_rerun_keeps_the_others_and_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    first = bench(tmp_path, "--frameworks", "torch", "--jobs", "2")  # two at once: the same records, in order
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    executor = json.loads((tmp_path / "default-cpu.json").read_text())["executor"]
    assert executor == {"engine": "local", "concurrency": 2, "overlap": False}  # N at once: none held ahead
    torch = records(tmp_path)
    # the probe and the depth probe, train and infer: with --models, the default suite's parts would name the
    # probe's train and infer again, and the suite runs each scenario once
    assert "4 scenarios" in first.stdout and len(torch) == 4
    assert {r["scenario"]["framework"] for r in torch} == {"torch"}
    # Ctrl-C while JAX's second scenario runs: its worker is killed, the first is kept, the run is incomplete
    code, output, workers = interrupted_bench(tmp_path, 5, "--frameworks", "jax")
    assert code == 130 and "stopped by SIGINT" in output, output[-2000:]
    assert workers and gone(workers)
    stopped = json.loads((tmp_path / "default-cpu.json").read_text())
    assert not stopped["complete"] and stopped["records"][:4] == torch and len(stopped["records"]) == 5
    assert len(stopped["missing"]) == 3 and {s["framework"] for s in stopped["missing"]} == {"jax"}
    resumed = bench(tmp_path, "--frameworks", "torch,jax", "--resume")
    assert resumed.returncode == 0 and resumed.stdout.count("SKIPPED") == 5, resumed.stdout[-2000:]  # only the rest
    both = records(tmp_path)
    assert len(both) == 8 and both[:5] == stopped["records"]  # the records kept as they were, in their place
    finished = json.loads((tmp_path / "default-cpu.json").read_text())
    assert finished["complete"] and finished["missing"] == []
    assert not (tmp_path / "default-cpu.json.store").exists()  # the file holds everything: the store is gone


@pytest.fixture(scope="module")
def probe_records(shared_run: Callable[[Scenario], dict]) -> dict[str, dict]:
    """Real records for the tests of the store, measured once (they read them, never change them): the torch
    probe's train and infer (the session's), and its infer at batch 2."""
    scenarios = {"train": Scenario.create("torch", "probe", kind="train", device="cpu"),
                 "infer": Scenario.create("torch", "probe", kind="infer", device="cpu"),
                 "infer at batch 2": Scenario.create("torch", "probe", kind="infer", device="cpu", batch=2)}
    return {name: shared_run(scenario) for name, scenario in scenarios.items()}


def test_the_store_replaces_by_identity_fresh_starts_over_and_complete_means_every_request(
        tmp_path: Path, probe_records: dict[str, dict]) -> None:
    train, infer = (Scenario.create("torch", "probe", kind=kind, device="cpu") for kind in ("train", "infer"))
    measured = {kind: probe_records[kind] for kind in ("train", "infer")}
    both = {runfile.identity(scenario.to_dict()): scenario.to_dict() for scenario in (train, infer)}
    path = tmp_path / "default-cpu.json"
    run = runfile.RunFile("default", "cpu", path)
    run.request(both)
    run.add(measured["train"])
    assert (run.store / f"{runfile.identity(train.to_dict())}.json").exists()  # stored the moment it came
    run.finish()
    stopped = json.loads(path.read_text())
    assert not stopped["complete"] and stopped["missing"] == [infer.to_dict()]  # asked for, with no record
    again = runfile.RunFile("default", "cpu", path)
    assert again.has_ok(train) and not again.has_ok(infer)
    again.request(both)
    again.add(measured["infer"])
    again.add(measured["train"] | {"status": "crashed"})  # a repeated scenario replaces its record
    again.finish()
    data = json.loads(path.read_text())
    assert [r["scenario"]["kind"] for r in data["records"]] == ["train", "infer"] and data["complete"]
    assert data["records"][0]["status"] == "crashed"
    fresh = runfile.RunFile("default", "cpu", path, fresh=True)
    fresh.add(measured["infer"])
    assert [r["scenario"]["kind"] for r in json.loads(path.read_text())["records"]] == ["infer"]


def test_a_second_run_on_the_same_file_is_refused_in_one_line(tmp_path: Path) -> None:
    runfile.lock(tmp_path / "default-cpu.json")  # this test process holds it, as a running bench would
    done = bench(tmp_path, "--frameworks", "torch")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "default-cpu.json is being written by another run (pid" in done.stderr
    assert not (tmp_path / "default-cpu.json").exists()


def test_a_write_that_fails_mid_run_keeps_what_was_measured_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], probe_records: dict[str, dict]) -> None:
    records = [probe_records["infer"], probe_records["infer at batch 2"]]  # at batch 1 (the probe's own) and 2
    run = runfile.RunFile("default", "cpu", tmp_path / "default-cpu.json")
    run.add(records[0])
    os.rename(run.store, tmp_path / "moved")
    run.store.write_text("not a folder")  # the store can no longer be written, as on a full disk
    run.add(records[1])
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith(f"footprint: error: cannot write {run.store}/"), said
    assert run.write_failure and [r["scenario"]["batch"] for r in load(tmp_path / "default-cpu.json")["records"]] \
        == [1, 2]  # the run file holds both: the one the store has, and the one it could not take
    run.finish()
    assert not load(tmp_path / "default-cpu.json")["complete"]


def test_an_output_location_that_cannot_be_written_is_refused_before_measuring(tmp_path: Path) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    done = bench(blocked / "results", "--frameworks", "torch")
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert f"cannot write {blocked}/results/default-cpu.json: Not a directory" in done.stderr
    assert "SKIPPED" not in done.stdout and "ok" not in done.stdout


def test_a_merged_run_lists_every_commit_its_records_came_from_and_the_report_says_so(tmp_path: Path) -> None:
    """A run whose records were measured at two commits (a narrowed rerun after a change) names both, with counts,
    where its top-level git_commit names only the newest."""
    published = load(ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json")["records"][:3]
    published[0] = published[0] | {"run": published[0]["run"] | {"git_commit": "0123456789abcdef"}}
    run = runfile.RunFile("default", "cpu", tmp_path / "default-cpu.json")
    for record in published:
        run.add(record)
    run.finish()
    written = load(tmp_path / "default-cpu.json")
    assert list(written["git_commits"].items()) == [(published[1]["run"]["git_commit"], 2), ("0123456789abcdef", 1)]
    assert (f"- **records from several commits** (a merged run): `{published[1]['run']['git_commit'][:10]}` (2), "
            "`0123456789` (1)") in markdown(written)


def test_a_fit_answer_is_kept_by_its_question_and_resume_skips_it(tmp_path: Path) -> None:
    """The fit suite's answers are keyed by question: a second run of the file knows what was answered (what
    --resume skips), a repeated answer replaces the first, and `missing` lists only the unanswered."""
    scenario = Scenario.create("torch", "heatmap68", kind="infer", device="cpu")
    asked = {runfile.fit_identity(scenario, budget, 64): scenario.to_dict() | {"fit_budget_bytes": budget}
             for budget in (2**30, 2**31)}
    first, second = list(asked)
    run = runfile.RunFile("fit", "cpu", tmp_path / "fit-cpu.json")
    run.request(asked)
    run.add_fit({"scenario": scenario.to_dict(), "answer": "fits", "question_identity": first})
    run.add_fit({"scenario": scenario.to_dict(), "answer": "fits", "largest_batch": 9, "question_identity": first})
    run.finish()
    written = load(tmp_path / "fit-cpu.json")
    assert [fit["largest_batch"] for fit in written["fits"]] == [9] and not written["complete"]
    assert [entry["fit_budget_bytes"] for entry in written["missing"]] == [2**31]
    again = runfile.RunFile("fit", "cpu", tmp_path / "fit-cpu.json")
    assert again.has_fit(first) and not again.has_fit(second)
