"""Compiled execution as a scenario axis: each framework's modes run here, or say why they cannot."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from models import executions
from models.record import phase
from models.scenario import Scenario
from models.spec import SpecError
from suites.report.render import markdown
from suites.run.orchestrator import run_scenario
from suites.run.registry import ROOT
from suites.run.runfile import load
from tests.conftest import run_cli

COMPILED = Scenario.create("torch", "probe", device="cpu", execution="compile")


@pytest.fixture(scope="module")
def compiled_runs() -> list[dict]:
    """The same torch.compile training scenario run twice, each compiling cold (Inductor builds C++ with the
    machine's gcc): the first run is the one whose graphs are counted, the second the one that must not hit its
    cache. The probe is the smallest net with an inference and a training graph to count."""
    return [run_scenario(COMPILED) for _ in range(2)]


def test_torch_compile_trains_and_infers_with_its_graphs_counted(compiled_runs: list[dict],
                                                                  shared_run: Callable[[Scenario], dict]) -> None:
    """Inductor's CPU backend builds with the machine's gcc: the inference graph compiles in the compile phase (one
    warm-up forward pass), the training graph at the first step, and nothing recompiles at the steady step."""
    compiled = compiled_runs[0]
    eager = shared_run(replace(COMPILED, execution="default"))  # the torch probe's, test_estimate's
    assert compiled["status"] == "ok", compiled["failure"]
    graphs = [phase(compiled, name)["notes"]["graphs_compiled"] for name in ("compile", "train_step_1", "train_step_2")]
    assert graphs[0] >= 1 and graphs[1] > graphs[0] and graphs[2] == graphs[1]
    seconds = [phase(compiled, name)["notes"]["compile_seconds_so_far"] for name in ("compile", "train_step_1",
                                                                                      "train_step_2")]
    assert 0 < seconds[0] < seconds[1] == seconds[2]  # the training graph compiled in the first step, not after
    assert all(phase(compiled, name)["host"]["processes_counted"] >= 1 for name in ("compile", "train_step_1"))
    assert "saved_activation_bytes" not in phase(compiled, "train_step_1")["notes"]  # the hooks cannot see inside
    assert compiled["framework_estimate"]["mem_tracker"]["execution"] == "eager"
    first = (phase(compiled, "train_step_1")["notes"]["loss"], phase(eager, "train_step_1")["notes"]["loss"])
    assert first[0] == pytest.approx(first[1], rel=1e-4)


def test_every_torch_compile_is_cold_even_after_the_same_scenario_ran(compiled_runs: list[dict]) -> None:
    """A second run would otherwise load the first one's kernels from Inductor's cache and measure the cache."""
    for record in compiled_runs:
        assert record["status"] == "ok", record["failure"]
        notes = phase(record, "compile")["notes"]
        assert notes["graphs_compiled"] >= 1 and notes["compile_cache_hits_so_far"] == 0
    folders = [record["run"]["env_set"]["TORCHINDUCTOR_CACHE_DIR"] for record in compiled_runs]
    assert folders[0] != folders[1] and not any(Path(folder).exists() for folder in folders)


@pytest.mark.parametrize(("framework", "execution", "jit_compile"), [
    ("keras-tensorflow", "jit", True), ("keras-tensorflow", "no-jit", False), ("keras-jax", "no-jit", False)])
def test_keras_runs_the_jit_compile_it_is_given(framework: str, execution: str, jit_compile: bool) -> None:
    """On the probe: which jit_compile Keras was given does not depend on the net."""
    record = run_scenario(Scenario.create(framework, "probe", device="cpu", execution=execution))
    assert record["status"] == "ok", record["failure"]
    assert phase(record, "compile")["notes"]["jit_compile"] is jit_compile


def test_jax_op_by_op_computes_what_the_jitted_step_does(shared_run: Callable[[Scenario], dict]) -> None:
    """On the probe (a conv, ReLU, max-pool, flatten and dense layer): op by op, each of them runs uncompiled."""
    eager = run_scenario(Scenario.create("jax", "probe", device="cpu", execution="eager"))
    jitted = shared_run(Scenario.create("jax", "probe", device="cpu"))
    assert eager["status"] == jitted["status"] == "ok", (eager["failure"], jitted["failure"])
    assert "memory_analysis" not in phase(eager, "compile")["notes"]  # nothing compiled, so no plan
    assert "memory_analysis" in phase(jitted, "compile")["notes"]
    assert jitted["worker"]["compile_helper"] == {}  # on the CPU the helper guards nothing
    losses = [phase(record, "train_step_2")["notes"]["loss"] for record in (eager, jitted)]
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)


def test_cuda_graphs_on_the_cpu_are_recorded_as_not_applicable() -> None:
    record = run_scenario(Scenario.create("torch", "keras-small", device="cpu", execution="reduce-overhead"))
    assert record["status"] == "unavailable" and "CUDA graphs" in record["failure"]["message"]
    assert executions.unavailable("torch", "reduce-overhead", "cuda") is None


def test_every_framework_names_its_modes_and_refuses_others() -> None:
    for framework, modes in executions.MODES.items():
        assert executions.resolve(framework, executions.DEFAULT) in modes
        for device in ("cpu", "cuda"):
            assert executions.examples(framework, device)[0] == executions.DEFAULT
    assert executions.examples("keras-tensorflow", "cpu") == ["default", "jit"]
    assert executions.examples("keras-jax", "cpu") == ["default", "no-jit"]
    assert executions.examples("torch", "cpu") == ["default", "compile", "reduce-overhead", "max-autotune"]
    with pytest.raises(SpecError, match="valid: default, jit, eager"):
        Scenario.create("jax", "probe", execution="compile")
    done = run_cli("run", "--framework", "torch", "--model", "probe", "--execution", "xla")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "execution" in done.stderr


def test_the_committed_compile_run_reports_every_mode() -> None:
    """The report's section reads the committed CPU run: each framework's modes beside its default, the mode that
    cannot run here with its reason."""
    run = load(ROOT / "results" / "cpu-a4d9e61" / "compile-cpu.json")
    text = markdown(run)
    assert "## What compiling costs and saves" in text
    assert "| torch | reduce-overhead | not applicable: CUDA graphs" in text
    for framework, mode in (("torch", "compile"), ("jax", "eager"), ("keras-tensorflow", "jit"),
                            ("keras-jax", "no-jit")):
        assert f"| {framework} | {mode} |" in text
