"""A scenario that raises, hangs, aborts or runs out of memory is a recorded result; the run goes on."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.scenario import Scenario
from suites.orchestrator import run_scenario
from suites.runfile import RunFile, load
from tests.conftest import FRAMEWORKS

# 2**16 inputs x 2**20 units: 256 GiB of fp32 weights, far beyond this machine, so allocation really fails.
TOO_LARGE = {"name": "too-large", "input_shape": [65536], "loss": "mse",
             "layers": [{"type": "dense", "units": 1048576}]}


def test_failures_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    run = RunFile("failures", "cpu", tmp_path / "run.json")
    faults = (("build:raise", 120), ("compile:hang", 20), ("context:abort", 120), (None, 120))
    # one batch per fault: the run file keeps one record per scenario, and these are four
    for batch, (fault, timeout) in enumerate(faults, start=1):
        scenario = Scenario.create("torch", "keras-small", kind="infer", device="cpu", batch=batch)
        run.add(run_scenario(scenario, timeout=timeout, fault=fault))
    run.finish()
    records = load(tmp_path / "run.json")["records"]
    assert [r["status"] for r in records] == ["error", "timeout", "crashed", "ok"]
    assert [r["failure"]["phase"] for r in records[:3]] == ["build", "compile", "context"]
    assert "injected fault in phase build" in records[0]["failure"]["message"]
    assert "SIGABRT" in records[2]["failure"]["message"]
    # what finished before each failure is kept
    assert [p["name"] for p in records[0]["phases"]] == ["import", "context"]
    assert [p["name"] for p in records[1]["phases"]] == ["import", "context", "build"]
    assert records[1]["run"]["wall_seconds"] < 60
    assert [p["name"] for p in records[3]["phases"]] == list(scenario.phases)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_layer_too_large_for_the_machine_is_an_oom(framework: str, spec_file) -> None:  # noqa: ANN001
    scenario = Scenario.create(framework, model_file=str(spec_file(TOO_LARGE)), kind="infer", device="cpu")
    record = run_scenario(scenario, timeout=300)
    assert record["status"] == "oom", record["failure"]
    assert record["failure"]["phase"] == "build"
    assert [p["name"] for p in record["phases"]] == ["import", "context"]
