"""The user's framework variables reach the worker and the record names them (issue 64): TensorFlow's oneDNN off and
on, set by the user (off, Keras on TensorFlow is measured all the same, its needs not available with why), and
XLA_FLAGS. Each case sets the variable itself, so none depends on this CPU's instruction set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.scenario import Scenario
from suites.analysis.figures import need
from suites.report import readout, render, summary
from suites.run.orchestrator import passed_variables, run_scenario, worker_environment
from suites.run.runfile import load

ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
PROBE_TF = Scenario.create("keras-tensorflow", "probe", kind="infer", device="cpu")


@pytest.fixture(scope="module")
def onednn_runs() -> dict[str, dict]:
    """Keras on TensorFlow's probe with the user's TF_ENABLE_ONEDNN_OPTS at 0 and at 1, and a KERAS_BACKEND of the
    user's that the adapter's own must beat."""
    runs = {}
    for value in ("0", "1"):
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ONEDNN, value)
            patch.setenv("KERAS_BACKEND", "torch")
            runs[value] = run_scenario(PROBE_TF, timeout=300)
    return runs


def test_with_onednn_off_keras_tensorflow_is_measured_and_its_needs_say_why(onednn_runs: dict[str, dict],
                                                                           tmp_path: Path) -> None:
    record = onednn_runs["0"]
    assert record["status"] == "ok", record["failure"]
    assert record["framework"]["onednn"] == {"enabled": False, "set_by": f"the user's {ONEDNN}=0"}
    why = record["framework"]["allocator_figures"]
    assert why.startswith("not available: ") and "oneDNN off" in why
    assert all(not measured["allocator"] and measured["host"]["peak_rss"] for measured in record["phases"])
    assert need(record, "inference") == (None, why)
    assert record["run"]["env_passed"][ONEDNN] == "0" and "KERAS_BACKEND" not in record["run"]["env_passed"]
    assert record["framework"]["versions"]["keras_backend"] == "tensorflow"
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    read = load(path)["records"][0]
    report = render.markdown(load(path))
    assert report.count(f"| needs | {why} |") == 1 and "| inference | " in report
    assert f"needs {why}" in " ".join(readout.phase_table(read).split())
    assert summary.tables(load(path)).count(f"keras-tensorflow needs {why}") == 1


def test_with_onednn_on_keras_tensorflow_has_its_allocator_figures(onednn_runs: dict[str, dict]) -> None:
    record = onednn_runs["1"]
    assert record["status"] == "ok", record["failure"]
    assert record["framework"]["onednn"] == {"enabled": True, "set_by": f"the user's {ONEDNN}=1"}
    assert "allocator_figures" not in record["framework"]
    assert need(record, "inference")[0] is not None
    assert record["run"]["env_passed"][ONEDNN] == "1" and not record["run"]["env_overridden"]


def test_only_framework_variables_pass_and_the_suite_s_own_win(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/mine")
    for held_back in ("KERAS_BACKEND", "TF_CLI_CONFIG_FILE", "TF_VAR_region", "CUDA_API_TOKEN", "MY_SETTING"):
        monkeypatch.setenv(held_back, "x")
    passed = passed_variables()
    assert {"OMP_NUM_THREADS": "1", "TORCHINDUCTOR_CACHE_DIR": "/mine"}.items() <= passed.items()
    assert not {"KERAS_BACKEND", "TF_CLI_CONFIG_FILE", "TF_VAR_region", "CUDA_API_TOKEN", "MY_SETTING"} & passed.keys()
    env = worker_environment(PROBE_TF, tmp_path)
    assert env["OMP_NUM_THREADS"] == "1" and env["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor")


def test_xla_flags_reach_a_jax_worker_and_the_record_names_them(monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    dump = tmp_path / "xla-dump"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={dump}")
    monkeypatch.setenv("JAX_PLATFORMS", "cuda")  # the adapter's own (the scenario's device) wins, and says so
    record = run_scenario(Scenario.create("jax", "probe", kind="infer", device="cpu"), timeout=300)
    assert record["status"] == "ok", record["failure"]
    assert any(dump.iterdir())
    assert record["run"]["env_passed"]["XLA_FLAGS"] == f"--xla_dump_to={dump}"
    assert record["run"]["env_overridden"] == {"JAX_PLATFORMS": "cpu"}
