"""Allocator modes: parsed, validated, set before import on a GPU, recorded as not applicable on the CPU."""

from __future__ import annotations

import subprocess

import pytest

from models import allocator_modes
from models.scenario import Scenario
from models.spec import SpecError
from suites.run.orchestrator import run_scenario, worker_environment
from suites.run.registry import ROOT, interpreter
from tests.conftest import run_cli


def test_every_framework_has_its_modes() -> None:
    assert allocator_modes.mode_names("torch") == ["default", "expandable", "nocache", "fraction=F"]
    assert allocator_modes.mode_names("keras-tensorflow") == ["default", "growth", "limit=MB", "async"]
    assert allocator_modes.mode_names("jax") == ["default", "noprealloc", "fraction=F", "platform"]
    assert allocator_modes.mode_names("a-new-framework") == ["default"]


@pytest.mark.parametrize("framework, text", [
    ("keras-tensorflow", "limit"), ("keras-tensorflow", "limit=big"), ("keras-tensorflow", "growth=1"),
    ("jax", "fraction=1.5"),
    ("jax", "fraction=x"), ("torch", "growth"), ("jax", "limit=100"),
])
def test_bad_modes_name_the_valid_ones(framework: str, text: str) -> None:
    with pytest.raises(SpecError, match=f"valid for {framework}: default"):
        allocator_modes.parse(framework, text)


@pytest.mark.parametrize("framework, mode, variables", [
    ("torch", "expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("torch", "nocache", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    ("keras-tensorflow", "growth", {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}),
    ("keras-tensorflow", "async", {"TF_GPU_ALLOCATOR": "cuda_malloc_async"}),
    ("keras-jax", "noprealloc", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),  # Keras on JAX: JAX's allocator
    ("keras-torch", "expandable", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("torch", "fraction=0.5", {}),  # set through torch.cuda by the adapter, before the first allocation
    ("keras-tensorflow", "limit=2048", {}),  # set through tf.config by the adapter, before the device starts
    ("jax", "noprealloc", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    ("jax", "fraction=0.25", {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.25"}),
    ("jax", "platform", {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}),
])
def test_on_a_gpu_the_worker_starts_with_the_mode_set(framework: str, mode: str, variables: dict) -> None:
    scenario = Scenario.create(framework, "keras-small", device="cuda", allocator=mode, cuda_module_loading="EAGER")
    env = worker_environment(scenario)
    assert env.items() >= (variables | {"CUDA_MODULE_LOADING": "EAGER"}).items()
    assert scenario.allocator_settings["applicable"] is True


def test_on_the_cpu_a_mode_is_recorded_as_not_applicable() -> None:
    scenario = Scenario.create("keras-tensorflow", "keras-small", kind="infer", device="cpu", allocator="growth",
                               cuda_module_loading="EAGER")
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in worker_environment(scenario)
    record = run_scenario(scenario)
    assert record["status"] == "ok", record["failure"]
    assert record["allocator"]["mode"] == "growth" and record["allocator"]["applicable"] is False
    assert "CPU" in record["allocator"]["reason"]
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in record["run"]["env_set"]
    assert record["nvml"] == {"available": False, "reason": "the run is on the CPU: no GPU memory to sample"}


def test_cli_rejects_a_mode_of_another_framework() -> None:
    done = run_cli("run", "--framework", "jax", "--model", "keras-small", "--allocator", "growth")
    assert done.returncode == 2
    assert done.stderr.strip().endswith("valid for jax: default, noprealloc, fraction=F, platform")
    assert len(done.stderr.strip().splitlines()) == 1


def test_torch_gives_its_per_device_calls_an_indexed_device() -> None:
    """The first GPU run's `fraction=F` died in the context phase: torch refuses an index-less 'cuda' device.

    torch's own validator (the one set_per_process_memory_fraction applies) runs without a GPU."""
    code = ("import torch; from torch.cuda._utils import _get_device_index; "
            "from frameworks.torch_adapter import device_of; "
            "assert _get_device_index(device_of('cuda'), optional=False) == 0; "
            "assert device_of('cpu') == torch.device('cpu'); "
            "_get_device_index(torch.device('cuda'), optional=False)")
    done = subprocess.run([interpreter("torch"), "-c", code], cwd=ROOT, env=worker_environment(),
                          capture_output=True, text=True, timeout=300)
    # the asserts pass; the last call, with the device the first run passed, fails as it did on the GPU
    assert done.stderr.strip().splitlines()[-1] == ("ValueError: Expected a torch.device with a specified index "
                                                    "or an integer, but got:cuda"), done.stderr[-2000:]


def test_preallocating_and_uncounted_modes_are_data() -> None:
    assert [mode for mode in allocator_modes.mode_names("jax") if allocator_modes.preallocates("jax", mode.replace(
        "=F", "=0.5"), "cuda")] == ["default", "fraction=F"]
    assert not allocator_modes.preallocates("jax", "default", "cpu")  # no pool on the CPU
    assert not allocator_modes.counted("torch", "nocache") and allocator_modes.counted("torch", "expandable")
