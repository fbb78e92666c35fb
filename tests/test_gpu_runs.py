"""The report's arithmetic over real GPU data: the committed run files of the first H100 run (torch and JAX).

No GPU is needed: these records were measured on one, and every figure the report and plots draw from
them is recomputed here by the same functions.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from models.record import STATIC_PLAN, phase
from suites.analysis import accounting, figures, fit
from suites.report import plots
from suites.run import known
from suites.run.registry import ROOT

RUNS = ROOT / "results" / "h100-d2f1409"
GIB = 2**30


def _run(suite: str) -> dict:
    data = json.loads((RUNS / f"{suite}-cuda.json").read_text())
    data["records"] = [record | accounting.refresh(record) for record in data["records"]]
    return data


def _record(run: dict, framework: str, model: str, kind: str = "train", allocator: str = "default") -> dict:
    return next(r for r in run["records"] if (r["scenario"]["framework"], r["scenario"]["model"],
                                              r["scenario"]["kind"], r["scenario"]["allocator"])
                == (framework, model, kind, allocator))


@pytest.fixture(scope="module")
def default() -> dict:
    return _run("default")


@pytest.fixture(scope="module")
def allocators() -> dict:
    return _run("allocators")


@pytest.mark.parametrize("suite", ["default", "allocators", "techniques", "sweeps"])
def test_no_part_of_any_breakdown_is_negative_and_parts_add_up(suite: str) -> None:
    run = _run(suite)
    checked = 0
    for record in run["records"]:
        for name, parts in record["breakdown"].items():
            assert all(part["bytes"] >= 0 for part in parts.values()), (record["scenario"], name, parts)
            driver = figures.driver_peak(phase(record, name), "cuda")[0]
            assert sum(part["bytes"] for part in parts.values()) == driver
            checked += 1
    assert checked > 50


def test_a_preallocated_pool_is_its_own_part_and_the_context_is_left_alone(default: dict) -> None:
    jax = _record(default, "jax", "keras200m")
    parts = jax["breakdown"]["train_step_1"]
    pool = phase(jax, "context")["allocator"]["bytes_limit"]["bytes"]
    assert parts["context"]["bytes"] == figures.baseline(jax, "cuda") - pool
    assert 400 * 2**20 < parts["context"]["bytes"] < 700 * 2**20  # the CUDA context, as torch's is
    assert parts["pool_unused"]["bytes"] > 50 * GIB
    assert parts["weights"]["bytes"] == 826_152_612
    assert parts["optimizer_state"]["bytes"] == 2 * 826_152_612 + 4  # two moments and the step count
    assert parts["activations"]["basis"] == STATIC_PLAN


def test_kernel_modules_are_what_the_driver_holds_beyond_context_and_allocator(default: dict) -> None:
    torch = _record(default, "torch", "keras200m")
    step = phase(torch, "train_step_1")
    parts = torch["breakdown"]["train_step_1"]
    driver = step["nvml"]["process_peak"]["bytes"]
    reserved = step["allocator"]["reserved_peak"]["bytes"]
    assert parts["kernel_modules"]["bytes"] == driver - figures.baseline(torch, "cuda") - reserved
    assert parts["kernel_modules"]["bytes"] > 0  # lazy loading: modules arrive with the first kernels
    assert parts["allocator_cache"]["bytes"] == reserved - step["allocator"]["allocated_peak"]["bytes"]


def test_the_estimate_is_compared_only_where_the_view_can_be(default: dict) -> None:
    jax, torch = _record(default, "jax", "keras200m"), _record(default, "torch", "keras200m")
    assert all("driver" not in views for views in jax["comparison"].values())  # a 60 GB pool says nothing
    assert all("driver" in views for views in torch["comparison"].values())
    # JAX's cumulative counter, set by compile-time autotuning, is no in-phase peak: not compared either
    assert all("allocator" not in views for views in jax["comparison"].values())
    step = phase(torch, "train_step_1")["allocator"]["allocated_peak"]["bytes"]
    assert torch["comparison"]["train_step_1"]["allocator"]["measured"] == step


def test_holds_and_needs_side_by_side(default: dict) -> None:
    jax, torch = _record(default, "jax", "keras200m"), _record(default, "torch", "keras200m")
    assert figures.driver_peak(phase(jax, "train_step_1"), "cuda")[0] > 59 * GIB
    jax_need, basis = figures.need(jax, "train_step_1")
    assert basis == STATIC_PLAN and 2.4 * GIB < jax_need < 2.8 * GIB  # weights, Adam state, XLA's temp
    step = phase(torch, "train_step_1")["allocator"]["allocated_peak"]["bytes"]
    assert figures.need(torch, "train_step_1") == (step, "allocator peak in the phase")
    assert 3.9 * GIB < step < 4 * GIB  # what an independent plain torch script saw: 4,198,931,968


def test_headline_figure_cuts_the_pool_and_leaves_out_the_probe(default: dict) -> None:
    panels = plots.breakdown_panels(default)
    assert {panel.model for panel in panels} == {"keras200m", "keras-small", "heatmap68"}
    panel = next(p for p in panels if (p.model, p.kind) == ("keras200m", "train"))
    torch, jax = panel.columns
    assert (torch.label, jax.label) == ("torch", "jax")
    assert sum(torch.holds.values()) <= panel.limit < jax.holds["pool_unused"]
    # at d2f1409 XLA autotuned inside the compile phase: that is where JAX's process held most, and its scratch is
    # no part any rule names
    assert jax.phase == "compile" and jax.holds["unexplained"] > 4000 * figures.MIB
    assert set(jax.holds) >= {"context", "weights", "optimizer_state", "pool_unused", "kernel_modules"}
    assert set(torch.needs) <= set(plots.MODEL_CATEGORIES)
    assert sum(torch.needs.values()) == figures.need(_record(default, "torch", "keras200m"), torch.phase)[0]


def test_allocators_figure_has_one_bar_pair_per_mode_named_by_it(allocators: dict) -> None:
    bars = plots.mode_bars(allocators)
    assert [bar.mode for bar in bars[("keras200m", "jax")]] == ["default", "noprealloc", "fraction=0.3", "platform"]
    assert [bar.mode for bar in bars[("keras200m", "torch")]] == ["default", "expandable", "nocache", "fraction=0.3"]
    nocache = bars[("keras200m", "torch")][2]
    assert nocache.needs is None  # torch's statistics stay at zero without caching: no figure, not a zero
    platform = bars[("keras200m", "jax")][3]
    assert platform.status == "error in train_step_1"


def test_the_platform_allocator_failure_has_a_known_cause(allocators: dict) -> None:
    failed = _record(allocators, "jax", "keras200m", allocator="platform")
    assert "CUDA graph" in known.classify(failed)
    fraction = _record(allocators, "torch", "keras200m", allocator="fraction=0.3")
    assert known.classify(fraction) is None  # that one was ours (fixed): no excuse for it


def test_the_fit_finder_counts_a_pool_as_what_the_model_used(default: dict) -> None:
    jax = _record(default, "jax", "keras200m")
    peak = fit.process_peak(jax)
    # context, modules and what the model used of the pool, at most: here the compile phase's counter, set by
    # autotuning in this (older) worker; not the 60 GB pool
    compiled = phase(jax, "compile")
    assert peak == (compiled["nvml"]["process_peak"]["bytes"] - phase(jax, "context")["allocator"]["bytes_limit"]
                    ["bytes"] + compiled["allocator"]["peak_bytes_in_use"]["bytes"])
    assert peak < 8 * GIB
    torch = _record(default, "torch", "keras200m")
    assert fit.process_peak(torch) == max(p["nvml"]["process_peak"]["bytes"] for p in torch["phases"]
                                          if "process_peak" in p.get("nvml", {}))


def test_committed_gpu_run_files_render(tmp_path: Path) -> None:
    from suites.report.render import render

    for suite in ("default", "allocators"):
        copy = tmp_path / f"{suite}-cuda.json"
        copy.write_text((RUNS / f"{suite}-cuda.json").read_text())
        written = render(copy)
        text = copy.with_suffix(".md").read_text()
        assert all(path.exists() for path in written)
        assert "holds / needs" in text and "+7865%" not in text


def test_the_first_runs_fit_answer_reads_as_unknown_today() -> None:
    """It said "does not fit, not even batch 1" because `fraction=F` crashed: an error, not memory."""
    result = json.loads((RUNS / "fit-cuda.json").read_text())["fits"][0]
    assert result["largest_batch"] is None and "answer" not in result
    again = fit.reread(result)
    assert again["answer"] == "unknown" and again["unknown_reason"] == "batch 1: error in context"
    assert [probe["fits"] for probe in again["probes"]] == [None]
    assert "unknown: batch 1: error in context" in fit.describe(again)


def test_a_gpu_runs_probes_let_a_machine_without_one_estimate_for_that_gpu(tmp_path: Path) -> None:
    """`constants` takes a GPU run's probes into constants-cuda.json beside it; `estimate --device cuda` reads the
    published run's by default and another's with --constants, labelled with the GPU, its driver and the framework
    versions; a run without probes is refused in one line."""
    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "suites", *args], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)

    published = cli("estimate", "--model", "keras200m", "--framework", "torch", "--device", "cuda")
    assert "measured constants from results/h100-ec3adfa/constants-cuda.json" in " ".join(published.stdout.split())
    run = tmp_path / "default-cuda.json"
    run.write_text((RUNS / "default-cuda.json").read_text())
    taken = cli("constants", str(run))
    assert taken.returncode == 0 and "constants of 4 probe records" in taken.stdout, taken.stderr
    made = cli("estimate", "--model", "keras200m", "--framework", "torch", "--device", "cuda",
               "--constants", str(tmp_path / "constants-cuda.json"))
    probe = json.loads((tmp_path / "constants-cuda.json").read_text())["frameworks"]["torch"]["train"]
    said = " ".join(made.stdout.split())  # the lines are wrapped at 120
    assert f"context ({probe['context'] / 2**20:,.1f} MiB)" in said
    assert "the probe model on NVIDIA H100 80GB HBM3, driver 580.159.04, 80 GiB, torch 2.11.0+cu130" in said
    from_run = cli("estimate", "--model", "keras200m", "--framework", "torch", "--device", "cuda", "--constants",
                   str(run)).stdout  # the same but for the file's name, which wraps its lines elsewhere
    assert said == " ".join(from_run.replace(str(run), str(tmp_path / "constants-cuda.json")).split())
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps(json.loads((RUNS / "default-cuda.json").read_text()) | {"records": []}))
    refused = cli("constants", str(empty))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "no finished probe record" in refused.stderr
    unusable = cli("estimate", "--model", "keras200m", "--device", "cuda", "--constants", str(empty))
    assert unusable.returncode == 2 and "neither a constants file nor a run file" in unusable.stderr
