"""Records hold real per-phase peaks from real frameworks on the CPU, with their semantics."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Callable

import pytest

from frameworks.host_memory import HostMemory
from frameworks.torch_adapter import CUDA_BUILD_COST, CUDA_BUILD_ON_CPU
from models.record import PEAK_SINCE_PHASE_START, STATIC_PLAN, phase
from models.scenario import PHASES, Scenario
from suites.bench.suite import cuda_build_warning
from suites.run.orchestrator import run_scenario
from suites.run.registry import ROOT
from tests.conftest import FRAMEWORKS

# 5000 x 5000 dense: 100 MB of fp32 weights, enough to stand out of the interpreter's own noise.
WIDE = {"name": "wide", "input_shape": [5000], "loss": "mse",
        "layers": [{"type": "dense", "units": 5000}, {"type": "relu"}, {"type": "dense", "units": 1}]}
WIDE_WEIGHT_BYTES = (5000 * 5000 + 5000 + 5000 + 1) * 4


def test_host_peak_sees_a_transient_inside_the_phase() -> None:
    memory = HostMemory()
    assert memory.resettable, "this Linux should allow resetting VmHWM through /proc/self/clear_refs"
    start = memory.rss()
    memory.reset_peak()
    transient = bytearray(300 * 2**20)  # zero-filled: every page touched
    del transient
    peak, end = memory.peak(), memory.rss()
    assert peak["semantics"] == PEAK_SINCE_PHASE_START
    assert peak["bytes"] >= start + 290 * 2**20
    assert end < peak["bytes"] - 200 * 2**20  # a reading at the end would have missed it


CHILD_HOLDS = ("import sys, time; block = bytearray(200 * 2**20); sys.stdout.write('ready\\n'); sys.stdout.flush();"
               " time.sleep(60)")
# Run in a fresh interpreter: the kernel's finished-child peak is a lifetime maximum, and this test process has
# already waited for larger workers.
TREE_CHECK = f"""
import json, subprocess, sys
from frameworks.host_memory import HostMemory
memory = HostMemory()
memory.reset_peak()
seen = {{"before": memory.children()}}
child = subprocess.Popen([sys.executable, "-c", {CHILD_HOLDS!r}], stdout=subprocess.PIPE, text=True)
child.stdout.readline()
seen["alive"] = memory.children()
child.kill()
child.wait()
seen["finished"] = memory.children()
memory.reset_peak()
seen["next phase"] = memory.children()
print(json.dumps(seen))
"""


def test_host_figures_count_the_processes_a_phase_starts() -> None:
    """A child alive at the phase's end is counted with its own reset peak; one that finished inside the phase by
    the kernel's largest finished-child peak, where it rose."""
    done = subprocess.run([sys.executable, "-c", TREE_CHECK], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["before"] == seen["next phase"] == {"processes_counted": 1}
    assert seen["alive"]["processes_counted"] == 2 and seen["alive"]["children_peak_rss"]["bytes"] >= 200 * 2**20
    assert seen["finished"]["processes_counted"] == 2
    assert seen["finished"]["finished_child_peak_rss"]["bytes"] >= 200 * 2**20


@pytest.fixture
def keras_small_train(shared_run: Callable[[Scenario], dict]) -> Callable[[str], dict]:
    """The framework's keras-small train record (adam), the session's one run of it: test_estimate and test_keras
    read the same records, and none changes it."""
    return lambda framework: shared_run(Scenario.create(framework, "keras-small", device="cpu"))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_train_record_is_complete(framework: str, keras_small_train: Callable[[str], dict]) -> None:
    record = keras_small_train(framework)
    assert record["status"] == "ok", record["failure"]
    assert [p["name"] for p in record["phases"]] == list(PHASES["train"])
    assert record["framework"]["param_count"] == record["model"]["param_count"] == 313_617
    assert record["framework"]["versions"] and record["worker"]["env_set"] is not None
    assert record["shared_settings"]["optimizer"] == {"adam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999,
                                                              "epsilon": 1e-8}}
    assert record["run"]["git_commit"] and record["worker"]["host_peak_resettable"]
    for measured in record["phases"]:
        host = measured["host"]
        assert measured["seconds"] > 0
        assert host["peak_rss"]["bytes"] >= host["end_rss_bytes"]
        # other threads may free a page between the start reading and the reset
        assert host["peak_rss"]["bytes"] >= host["start_rss_bytes"] - 2**20
        for figure in measured["allocator"].values():
            assert figure["semantics"] and figure["bytes"] >= 0
    losses = [phase(record, name)["notes"]["loss"] for name in ("train_step_1", "train_step_2")]
    assert all(math.isfinite(loss) for loss in losses)
    assert phase(record, "import")["host"]["peak_rss"]["bytes"] > 50 * 2**20  # a framework really loaded


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_build_phase_holds_the_weights(framework: str, spec_file) -> None:  # noqa: ANN001
    record = run_scenario(Scenario.create(framework, model_file=str(spec_file(WIDE)), kind="infer", device="cpu"))
    assert record["status"] == "ok", record["failure"]
    build = phase(record, "build")
    rise = build["host"]["peak_rss"]["bytes"] - build["host"]["start_rss_bytes"]
    assert rise >= 0.95 * WIDE_WEIGHT_BYTES
    assert build["host"]["end_rss_bytes"] - build["host"]["start_rss_bytes"] >= 0.95 * WIDE_WEIGHT_BYTES


@pytest.mark.parametrize("framework", ["torch", "keras-torch"])
def test_a_torch_record_names_its_build(framework: str, keras_small_train: Callable[[str], dict]) -> None:
    """`cuda` is the build's CUDA version ("None" for the CPU build the tox envs pin); a CUDA build measuring on
    the CPU, as this scenario does, carries the note that its figures are not the CPU build's."""
    versions = keras_small_train(framework)["framework"]["versions"]
    assert versions["torch"].endswith("+cpu") == (versions["cuda"] == "None")
    assert (CUDA_BUILD_ON_CPU in versions) == (versions["cuda"] != "None")


def test_a_cuda_build_measuring_on_the_cpu_is_one_line_of_the_bench() -> None:
    cpu = {"scenario": {"framework": "jax"}, "framework": {"versions": {"jax": "0.10.2"}}}
    failed = {"scenario": {"framework": "torch"}}  # ended before its import: no versions
    cuda = {"torch": "2.13.0+cu130", "cuda": "13.0", CUDA_BUILD_ON_CPU: CUDA_BUILD_COST}
    on_cpu = [{"scenario": {"framework": name}, "framework": {"versions": cuda}}
              for name in ("torch", "keras-torch", "torch")]
    assert cuda_build_warning([cpu, failed]) is None
    assert cuda_build_warning([cpu, failed, *on_cpu]) == (
        "footprint: warning: keras-torch, torch: torch 2.13.0+cu130 is a CUDA build measuring on the CPU: its host "
        "figures hold CUDA's libraries, 65-93 % above the CPU build's (torch 2.13.0); the tox envs pin the +cpu "
        "build (README.md)")


def test_tensorflow_cpu_allocator_peak_is_reset_per_phase(keras_small_train: Callable[[str], dict]) -> None:
    """Where oneDNN is on, TensorFlow's CPU allocator keeps statistics; where it is off (its default on a CPU without
    AVX512_VNNI, or TF_ENABLE_ONEDNN_OPTS=0: tests/test_user_environment.py sets both) no phase has a figure, and the
    record says why."""
    record = keras_small_train("keras-tensorflow")
    if not record["framework"]["onednn"]["enabled"]:
        assert record["framework"]["allocator_figures"].startswith("not available: ")
        assert not any(p["allocator"] for p in record["phases"])
        return
    peaks = {p["name"]: p["allocator"]["allocator_peak"] for p in record["phases"] if p["allocator"]}
    assert all(figure["semantics"] == PEAK_SINCE_PHASE_START for figure in peaks.values())
    assert peaks["train_step_1"]["bytes"] > peaks["compile"]["bytes"] > 0


def test_jax_records_xla_static_plan(keras_small_train: Callable[[str], dict]) -> None:
    record = keras_small_train("jax")  # adam: its state is an argument of the train step
    plans = phase(record, "compile")["notes"]["memory_analysis"]
    assert set(plans) == {"forward", "train_step"}
    assert plans["train_step"]["argument"]["semantics"] == STATIC_PLAN
    # the train step takes weights, optimizer state and the batch as arguments
    assert plans["train_step"]["argument"]["bytes"] >= 3 * record["model"]["weight_bytes"]


def test_jax_compiles_in_its_compile_phase_on_the_cpu(keras_small_train: Callable[[str], dict]) -> None:
    """The compile helper guards a GPU peak counter the CPU does not have: here JAX compiles in its own compile
    phase, which so shows what compiling costs in host memory, and the step trains."""
    record = keras_small_train("jax")
    assert record["status"] == "ok", record["failure"]
    assert record["worker"]["compile_helper"] == {}
    compiled = phase(record, "compile")["notes"]
    assert compiled["compiled_in"] == "this process"
    assert set(compiled["memory_analysis"]) == {"forward", "train_step"}
    losses = [phase(record, name)["notes"]["loss"] for name in ("train_step_1", "train_step_2")]
    assert all(math.isfinite(loss) for loss in losses) and losses[0] != losses[1]  # the step updated the weights
