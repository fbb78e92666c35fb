"""Keras 3 on TensorFlow, JAX and torch: one adapter, each backend's allocator, its overhead beside the raw one.

Parity (parameter counts, outputs and loss to 1e-4 with shared weights) and the techniques' arithmetic run for
every framework, these three included, in test_parity.py and test_techniques.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable

import pytest

from models import allocator_modes, backends
from models.record import phase
from models.scenario import Scenario
from suites.analysis import across_records
from suites.run import runfile
from suites.run.registry import ROOT, frameworks, interpreter

KERAS = ["keras-jax", "keras-tensorflow", "keras-torch"]


def test_one_adapter_runs_every_keras_backend_each_after_its_raw_one() -> None:
    assert frameworks() == ["jax", "keras-jax", "keras-tensorflow", "torch", "keras-torch"]
    assert not (ROOT / "frameworks" / "tensorflow_adapter.py").exists()
    assert [backends.raw(name) for name in KERAS] == ["jax", None, "torch"]


@pytest.mark.parametrize("framework", KERAS)
def test_keras_has_its_backends_allocator_modes(framework: str) -> None:
    assert allocator_modes.mode_names(framework) == allocator_modes.mode_names(backends.backend(framework))


def test_records_of_the_first_tensorflow_adapter_read_as_keras_tensorflow() -> None:
    """It ran Keras on TensorFlow under the name `tensorflow`; committed CPU runs still carry that name."""
    path = ROOT / "results" / "cpu-04e7e70" / "allocators-cpu.json"
    assert "tensorflow" in {r["scenario"]["framework"] for r in json.loads(path.read_text())["records"]}
    names = {r["scenario"]["framework"] for r in runfile.load(path)["records"]}
    assert "keras-tensorflow" in names and "tensorflow" not in names
    old = runfile.load(path)["records"][0]["scenario"] | {"framework": "tensorflow", "allocator": "growth"}
    assert Scenario.from_dict(old).framework == "keras-tensorflow"


def test_keras_on_torch_leaves_its_gradients_where_torch_keeps_them(shared_run: Callable[[Scenario], dict]) -> None:
    record = shared_run(Scenario.create("keras-torch", "keras-small", device="cpu"))  # test_records' too
    assert record["status"] == "ok", record["failure"]
    assert record["framework"]["versions"]["keras_backend"] == "torch"
    step = phase(record, "train_step_1")["tensors"]
    assert step["gradients"] == step["weights"] == 313_617 * 4  # in .grad until the next step zeroes them
    assert step["optimizer_state"] >= 2 * step["weights"]  # Adam's two moments (and its counters)


def test_keras_overhead_pairs_each_keras_record_with_its_raw_backend() -> None:
    run = runfile.load(ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json")
    found = across_records.keras_overhead(run)
    assert {(o.keras, o.raw) for o in found} == {("keras-jax", "jax"), ("keras-torch", "torch")}
    records = {(r["scenario"]["framework"], r["scenario"]["model"], r["scenario"]["kind"]): r for r in run["records"]}
    for overhead in found:
        keras, raw = (records[(name, overhead.model, overhead.kind)] for name in (overhead.keras, overhead.raw))
        holds, _ = overhead.phases["build"]
        assert holds == (phase(keras, "build")["host"]["peak_rss"]["bytes"]
                         - phase(raw, "build")["host"]["peak_rss"]["bytes"])


def test_a_keras_process_hides_the_other_backends_packages() -> None:
    """One prepared interpreter for every framework (a GPU image) holds jax beside torch, and Keras on torch imported
    it at its import (orbax_checkpoint's `import jax`): 100 MiB and a second of import no tox env has. A hidden
    package is as if not installed to every probe (tomllib stands in: it is installed and Keras never imports it):
    an import of it or its submodule, importlib.util.find_spec and sys.modules, which SciPy reads (a None there
    failed every Keras import where scikit-learn is installed); the installed packages' metadata stays readable."""
    script = ("import importlib.metadata, importlib.util, os, sys; os.environ['FOOTPRINT_KERAS_HIDDEN'] = 'tomllib'\n"
              "from frameworks.hidden_packages import hide_packages\nhide_packages()\n"
              "assert importlib.util.find_spec('tomllib') is None and sys.modules.get('tomllib') is None\n"
              "assert 'tomllib' not in sys.modules and importlib.metadata.version('keras')\n"
              "for probe in ('sys.modules[\"tomllib\"]', 'import tomllib', 'import tomllib._parser'):\n"
              "    try:\n        exec(probe)\n    except (KeyError, ModuleNotFoundError) as error:\n"
              "        print(type(error).__name__)\n")
    done = subprocess.run([interpreter("keras-torch"), "-c", script], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": os.environ["PATH"]})
    assert done.stdout.split() == ["KeyError", "ModuleNotFoundError", "ModuleNotFoundError"], done.stderr[-2000:]
