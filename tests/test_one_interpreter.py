"""One interpreter holding every framework, scikit-learn and SciPy (a GPU image, a data-science workstation), given as
FOOTPRINT_PYTHON: every framework's scenarios run in it, the Keras ones with the other backends hidden. There, Keras's
import imports scikit-learn and SciPy, whose array-API helper reads sys.modules: a backend hidden as a None there
failed every Keras-on-JAX and Keras-on-TensorFlow import. One inference scenario per framework: an import that fails
fails them all alike, and the probe's other scenarios add only time."""

from __future__ import annotations

import pytest

from frameworks.hidden_packages import BACKEND_PACKAGES, HIDDEN_VARIABLE
from models import backends
from models.scenario import Scenario
from suites.run.orchestrator import run_scenario
from suites.run.registry import ROOT, frameworks

ONE_INTERPRETER = ROOT / ".tox" / "one-interpreter" / "bin" / "python"


def test_every_framework_runs_in_one_interpreter_holding_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ONE_INTERPRETER.exists(), "no one-interpreter env: run `tox run -e one-interpreter --notest`"
    monkeypatch.setenv("FOOTPRINT_PYTHON", str(ONE_INTERPRETER))
    records = {name: run_scenario(Scenario.create(name, "probe", kind="infer", device="cpu")) for name in frameworks()}
    failed = {name: record["failure"] for name, record in records.items() if record["status"] != "ok"}
    assert not failed and {r["run"]["interpreter"] for r in records.values()} == {str(ONE_INTERPRETER)}, failed
    for name in ("keras-jax", "keras-tensorflow", "keras-torch"):
        imported = records[name]["framework"]["imported_packages"]
        others = [package for backend, packages in BACKEND_PACKAGES.items() if backend != backends.backend(name)
                  for package in packages if package != "flax"]  # flax: not installed there
        assert records[name]["worker"]["env_set"][HIDDEN_VARIABLE].split(",") == others
        assert "sklearn" in imported and "scipy" in imported and not set(others) & set(imported), imported
