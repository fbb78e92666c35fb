"""XLA's compile scratch stays out of the step phases: JAX and Keras on JAX compile in a helper process, into JAX's
persistent cache, and the worker's phases load from it. The GPU autotuner's scratch cannot exist on the CPU, so it
is a FAKE here (frameworks.xla_compiles.FAKE_AUTOTUNE): every real compile takes that much host memory at once."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

import pytest

from frameworks.worker import load_adapter
from frameworks.xla_compiles import FAKE_AUTOTUNE
from models import allocator_modes
from models.protocol import COMPILE_CACHE_VARIABLE, programs_key, write_scenario
from models.record import phase
from models.scenario import Scenario
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter

SCRATCH = 600 * 2**20


def run_with_fake_scratch(framework: str, folder: Path, mode: str = "default", bench_cache: Path | None = None,
                          kind: str = "train") -> dict:
    """A plain-8 run of the worker (training unless `kind` says) under the fake autotuning scratch, its allocator
    `mode`, in a bench's compilation cache where given (else in its own folder, as a run outside a bench): its
    record."""
    scenario = Scenario.create(framework, "plain-8", kind=kind, device="cpu", allocator=mode)
    folder.mkdir()
    out = folder / "record.json"
    bench = {COMPILE_CACHE_VARIABLE: str(bench_cache)} if bench_cache else {}
    done = subprocess.run([interpreter(framework), "-m", "frameworks.worker", "scenario",
                           write_scenario(scenario.to_dict(), folder), str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300,
                          env=worker_environment(scenario) | {FAKE_AUTOTUNE: str(SCRATCH)} | bench)
    record = json.loads(out.read_text())
    assert done.returncode == 0 and record["status"] == "ok", done.stderr[-2000:]
    return record


@pytest.fixture(scope="module")
def benches(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], list[dict]]:
    """Per framework, once: a bench's pooled training run, its pool-off twin and then the same net's inference
    scenario, sharing the bench's compilation cache."""

    @cache
    def bench(framework: str) -> list[dict]:
        folder = tmp_path_factory.mktemp(framework)
        (folder / "bench-cache").mkdir()
        return [*(run_with_fake_scratch(framework, folder / mode, mode, folder / "bench-cache")
                  for mode in ("default", allocator_modes.without_pool(framework))),
                run_with_fake_scratch(framework, folder / "infer", bench_cache=folder / "bench-cache", kind="infer")]

    return bench


@pytest.mark.parametrize(("framework", "in_bench"), [("jax", False), ("jax", True), ("keras-jax", True)])
def test_the_compile_phase_records_the_scratch_and_the_steps_exclude_it(
        framework: str, in_bench: bool, benches: Callable[[str], list[dict]], tmp_path: Path) -> None:
    """In a bench (the cache its twin reads, so that run is shared) and, for JAX, outside one (the cache in the
    worker's own folder: which cache it is does not depend on the framework)."""
    record = benches(framework)[0] if in_bench else run_with_fake_scratch(framework, tmp_path / "run")
    assert record["worker"]["compile_helper"]["exit_code"] == 0
    compile_notes = phase(record, "compile")["notes"]
    assert compile_notes["compiled_in"].startswith("helper process")
    scratch = compile_notes["compile_scratch"]
    assert scratch["xla_compiled_so_far"] > 0
    assert scratch["host_peak_above_start"]["bytes"] >= SCRATCH  # the helper's compiles took the fake scratch
    for name in ("train_step_1", "train_step_2", "inference"):
        measured = phase(record, name)
        assert measured["notes"]["xla_compiled_so_far"] == 0, (name, measured["notes"])  # all loaded from the cache
        rise = measured["host"]["peak_rss"]["bytes"] - measured["host"]["start_rss_bytes"]
        assert rise < SCRATCH / 2, (name, rise)


def test_on_the_cpu_nothing_compiles_ahead(tmp_path: Path) -> None:
    """Nothing autotunes on the CPU: no helper, no cache, and the first step compiles where it runs."""
    scenario = Scenario.create("keras-jax", "plain-8", kind="train", device="cpu")
    out = tmp_path / "record.json"
    scenario_file = write_scenario(scenario.to_dict(), tmp_path)
    subprocess.run([interpreter("keras-jax"), "-m", "frameworks.worker", "scenario", scenario_file, str(out)], cwd=ROOT,
                   env=worker_environment(scenario), check=True, timeout=300)
    record = json.loads(out.read_text())
    assert record["worker"]["compile_helper"] == {}
    assert phase(record, "compile")["notes"]["compiled_in"] == "this process"
    assert phase(record, "train_step_1")["notes"]["xla_compiled_so_far"] > phase(record, "compile")["notes"][
        "xla_compiled_so_far"]


@pytest.mark.parametrize(("framework", "execution", "ahead", "helper_variables"), [
    ("jax", "default", True, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "CUDA_MODULE_LOADING": "LAZY"}),
    ("keras-jax", "default", True, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "CUDA_MODULE_LOADING": "LAZY"}),
    ("keras-tensorflow", "default", True, {"TF_FORCE_GPU_ALLOW_GROWTH": "true", "CUDA_MODULE_LOADING": "LAZY"}),
    ("keras-tensorflow", "no-jit", False, None),
    ("keras-torch", "default", False, None),
])
def test_on_a_gpu_every_xla_compile_goes_through_the_helper_and_its_cache(
        framework: str, execution: str, ahead: bool, helper_variables: dict | None) -> None:
    """The GPU side on paper (no GPU here, and never TensorFlow's GPU build): which adapters compile ahead on a GPU,
    into which cache, and with their pool off in the helper (a second 75 % pool would not fit beside the worker's)."""
    adapter = load_adapter(Scenario.create(framework, "plain-8", kind="train", device="cuda", execution=execution))
    assert adapter.compiles_ahead is ahead
    if not ahead:
        return
    assert adapter.helper_environment() == helper_variables
    cache = adapter.cache_environment("/cache")
    assert cache.get("JAX_COMPILATION_CACHE_DIR") == "/cache" or cache["TF_XLA_FLAGS"].endswith(
        "--tf_xla_persistent_cache_directory=/cache")


@pytest.mark.parametrize("framework", ["jax", "keras-jax"])
@pytest.mark.parametrize("which", [1, 2], ids=["pool-off twin", "inference scenario"])
def test_a_pool_off_twin_and_an_inference_scenario_load_the_training_run_s_programs_and_start_no_helper(
        framework: str, which: int, benches: Callable[[str], list[dict]]) -> None:
    """A bench's scenarios share one compilation cache (COMPILE_CACHE_VARIABLE): the twin, which differs only in its
    allocator, and the inference scenario, whose build and forward the training run's helper ran, compile nothing,
    in a helper or in a phase, and say whose helper compiled what they load."""
    records = benches(framework)
    pooled, sharing = (records[index]["worker"]["compile_helper"] for index in (0, which))
    assert pooled["exit_code"] == 0 and pooled["compile_scratch"]["xla_compiled_so_far"] > 0
    assert "exit_code" not in sharing and sharing["seconds"] == 0.0
    assert sharing["compiled_by"] == Scenario.from_dict(records[0]["scenario"]).label
    assert sharing["compile_scratch"] == pooled["compile_scratch"]  # the figure of the helper that compiled them
    assert [measured["name"] for measured in records[which]["phases"]] == list(
        Scenario.from_dict(records[which]["scenario"]).phases)
    for measured in records[which]["phases"]:
        assert measured["notes"].get("xla_compiled_so_far", 0) == 0, (measured["name"], measured["notes"])


@pytest.mark.parametrize("framework", ["jax", "keras-jax"])
def test_on_a_gpu_only_the_pool_off_twin_shares_its_pooled_run_s_programs(framework: str) -> None:
    """The helper runs with the pool off whatever the worker's mode, so a twin's helper would compile and autotune
    what its pooled run's did, under the same settings; a cap or another allocator is another autotuning."""
    def key(mode: str) -> str:
        scenario = Scenario.create(framework, "plain-8", kind="train", device="cuda", allocator=mode)
        helper = allocator_modes.settings(framework, allocator_modes.without_pool(framework), "LAZY", "cuda")["env"]
        return programs_key(scenario.to_dict(), scenario.allocator_settings["env"] | helper)

    assert key("default") == key(allocator_modes.without_pool(framework))
    assert key("platform") != key("default") and key("fraction=0.3") != key("default")
