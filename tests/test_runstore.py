"""The run store: a rerun adds or replaces its own scenarios and deletes none; resume, fresh and the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from models.scenario import Scenario
from suites import runfile
from suites.orchestrator import run_scenario
from suites.registry import ROOT


def bench(results: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m suites bench` writing into `results` instead of the repository's results/."""
    return subprocess.run([sys.executable, "-m", "suites", "bench", "--suite", "default", "--device", "cpu",
                           "--models", "probe", *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=os.environ | {"FOOTPRINT_RESULTS": str(results)})


def records(results: Path) -> list[dict]:
    return json.loads((results / "default-cpu.json").read_text())["records"]


def test_a_narrowed_rerun_keeps_the_others_and_resume_runs_only_what_is_missing(tmp_path: Path) -> None:
    first = bench(tmp_path, "--frameworks", "torch")
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    torch = records(tmp_path)
    # the probe and the depth probe, train and infer: with --models, the default suite's parts would name the
    # probe's train and infer again, and the suite runs each scenario once
    assert "4 scenarios" in first.stdout and len(torch) == 4
    assert {r["scenario"]["framework"] for r in torch} == {"torch"}
    second = bench(tmp_path, "--frameworks", "jax")
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    both = records(tmp_path)
    assert len(both) == 8 and both[:4] == torch  # the torch records kept as they were, in their place
    resumed = bench(tmp_path, "--frameworks", "torch,jax", "--resume")
    assert resumed.returncode == 0 and resumed.stdout.count("SKIPPED") == 8  # all ok already
    assert records(tmp_path) == both and json.loads((tmp_path / "default-cpu.json").read_text())["complete"]
    assert not (tmp_path / "default-cpu.json.store").exists()  # the file holds everything: the store is gone


def test_the_store_replaces_by_identity_fresh_starts_over_and_complete_means_every_request(tmp_path: Path) -> None:
    train, infer = (Scenario.create("torch", "probe", kind=kind, device="cpu") for kind in ("train", "infer"))
    measured = {scenario.kind: run_scenario(scenario) for scenario in (train, infer)}
    both = frozenset(runfile.identity(scenario.to_dict()) for scenario in (train, infer))
    path = tmp_path / "default-cpu.json"
    run = runfile.RunFile("default", "cpu", path)
    run.request(both)
    run.add(measured["train"])
    assert (run.store / f"{runfile.identity(train.to_dict())}.json").exists()  # stored the moment it came
    run.finish()
    assert not json.loads(path.read_text())["complete"]  # infer was asked for and has no record
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
