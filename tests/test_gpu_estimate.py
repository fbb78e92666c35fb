"""The estimate on the GPU, over the committed H100 run files: its errors pinned, its constants from probes only.

No GPU is needed: the records were measured on an H100 (results/h100-ec3adfa), and the estimate is arithmetic
over the spec and the run's probe records. A change to the rules or to how constants are taken that makes any
pinned figure worse fails here; one that improves a figure should lower its pin.
"""

from __future__ import annotations

import copy
import itertools
import json
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from models.catalogue import get_model
from models.estimate import RULES, activations, estimate
from models.record import phase
from suites.analysis import accounting, constants, errors, figures
from suites.run.registry import ROOT

RUNS = ROOT / "results"
MIB = 2**20

# (run file, framework, view) -> (median, worst) absolute relative error of this suite's estimate, as of today's
# rules; the figures docs/estimate.md's table of errors shows (docs/findings.md's, c3d4247's default run). keras-jax
# at ec3adfa is left out: those records count XLA's autotuner as the model's (c3d4247 measured it with the compile
# ahead).
PINNED = {
    ("h100-ec3adfa/default-cuda.json", "torch", "allocator"): (0.001, 0.381),
    ("h100-ec3adfa/default-cuda.json", "torch", "driver"): (0.020, 0.447),
    ("h100-ec3adfa/default-cuda.json", "jax", "allocator"): (0.001, 0.130),
    ("h100-ec3adfa/default-cuda.json", "keras-torch", "allocator"): (0.011, 0.148),
    ("h100-ec3adfa/default-cuda.json", "keras-torch", "driver"): (0.008, 0.363),
    ("h100-ec3adfa/techniques-cuda.json", "torch", "allocator"): (0.020, 0.446),
    ("h100-ec3adfa/techniques-cuda.json", "torch", "driver"): (0.045, 0.102),
    ("h100-ec3adfa/techniques-cuda.json", "jax", "allocator"): (0.001, 0.196),
    ("h100-c3d4247/default-cuda.json", "torch", "allocator"): (0.001, 0.381),
    ("h100-c3d4247/default-cuda.json", "torch", "driver"): (0.023, 0.493),
    ("h100-c3d4247/default-cuda.json", "jax", "allocator"): (0.001, 0.392),
    ("h100-c3d4247/default-cuda.json", "keras-jax", "allocator"): (0.007, 0.455),
    ("h100-c3d4247/default-cuda.json", "keras-torch", "allocator"): (0.011, 0.148),
    ("h100-c3d4247/default-cuda.json", "keras-torch", "driver"): (0.010, 0.382),
    ("h100-c3d4247/techniques-cuda.json", "torch", "allocator"): (0.013, 0.063),
    ("h100-c3d4247/techniques-cuda.json", "torch", "driver"): (0.002, 0.102),
    ("h100-c3d4247/techniques-cuda.json", "jax", "allocator"): (0.001, 0.140),
    ("cpu-eb50ac8/default-cpu.json", "torch", "driver"): (0.004, 0.316),
    ("cpu-eb50ac8/default-cpu.json", "keras-torch", "driver"): (0.011, 0.184),
    ("cpu-eb50ac8/default-cpu.json", "jax", "driver"): (0.102, 0.204),
    ("cpu-eb50ac8/default-cpu.json", "keras-jax", "driver"): (0.099, 0.230),
    ("cpu-eb50ac8/default-cpu.json", "keras-tensorflow", "allocator"): (0.025, 0.108),
    ("cpu-eb50ac8/default-cpu.json", "keras-tensorflow", "driver"): (0.083, 0.177),
}


def _run(name: str) -> dict:
    return json.loads((RUNS / name).read_text())


@pytest.fixture(scope="module")
def summaries() -> dict[str, dict]:
    return {name: errors.of_run(_run(name)) for name in {key[0] for key in PINNED}}


@pytest.mark.parametrize("key", list(PINNED), ids=["/".join(key) for key in PINNED])
def test_estimate_errors_do_not_grow(key: tuple[str, str, str], summaries: dict[str, dict]) -> None:
    name, framework, view = key
    found = summaries[name][(framework, view, "footprint")]
    median, worst = PINNED[key]
    assert found["median"] <= median + 5e-4 and found["max"] <= worst + 5e-4, (key, found)


def test_constants_come_from_the_probes_alone() -> None:
    """The nets' records removed, the run's constants are the same: none is estimated with its own figures."""
    run = _run("h100-ec3adfa/default-cuda.json")
    probes_only = copy.deepcopy(run)
    probes_only["records"] = [r for r in run["records"] if r["scenario"]["model"] in constants.PROBES]
    assert len(probes_only["records"]) < len(run["records"])
    assert constants.of_run(run) == constants.of_run(probes_only)
    assert constants.of_run(run)[0] is not None


def test_a_trailing_context_reading_does_not_count_as_the_model() -> None:
    """NVML read torch's probe (train) context as 104 MiB where the others read 518-520: every kind's driver figures
    are measured above the highest reading, so the probe's build costs what the other kind's does."""
    run = _run("h100-ec3adfa/default-cuda.json")
    probe = next(r for r in run["records"] if (r["scenario"]["framework"], r["scenario"]["model"],
                                               r["scenario"]["kind"]) == ("torch", constants.PROBE, "train"))
    assert constants.from_probe(probe)["context"] == 104 * MIB  # the trailing reading, as recorded
    taken, _ = constants.of_run(run)
    torch = taken["frameworks"]["torch"]
    assert torch["train"]["context"] == torch["infer"]["context"] == 520 * MIB
    assert torch["train"]["phases"]["build"]["driver"] == torch["infer"]["phases"]["build"]["driver"]
    assert torch["train"]["context_read"] == 104 * MIB


def test_the_committed_gpu_constants_are_the_h100_runs_probes() -> None:
    committed = json.loads((RUNS / "h100-ec3adfa" / "constants-cuda.json").read_text())
    taken, _ = constants.of_run(_run("h100-ec3adfa/default-cuda.json"))
    assert committed["frameworks"] == taken["frameworks"]
    assert constants.card(committed) == "NVIDIA H100 80GB HBM3"


def _estimate(*extra: str, framework: str = "torch") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suites", "estimate", "--model", "resnet50", "--framework", framework,
                           "--device", "cuda", *extra], capture_output=True, text=True, cwd=ROOT, check=False)


def _probe(run: dict, framework: str, kind: str = "train", model: str = constants.PROBE) -> dict:
    return next(r for r in run["records"] if (r["scenario"]["framework"], r["scenario"]["model"], r["scenario"]["kind"],
                                              r["scenario"]["allocator"]) == (framework, model, kind, "default"))


@pytest.mark.parametrize("framework", ["jax", "keras-jax"])
def test_a_pooled_frameworks_constants_keep_the_pool_apart(framework: str) -> None:
    """JAX's pool is in its probe's context phase (NVML): the constants take the context without it, which the run's
    pool-off twin (noprealloc) reads within a few MiB, and keep the pool with the card's memory beside it."""
    run = _run("h100-ec3adfa/default-cuda.json")
    probe = _probe(run, framework)
    known = constants.lookup(constants.load("cuda"), framework, "train")
    assert known["pool"] == figures.pool_size(probe) > 50_000 * MIB
    assert known["context"] + known["pool"] == figures.baseline(probe, "cuda")
    assert known["card_bytes"] == probe["nvml"]["gpu"]["total_bytes"]
    twin = next(r for r in _run("h100-ec3adfa/allocators-cuda.json")["records"]
                if (r["scenario"]["framework"], r["scenario"]["allocator"]) == ("jax", "noprealloc"))
    assert abs(figures.baseline(twin, "cuda") - known["context"]) <= 4 * MIB
    assert "pool" not in constants.lookup(constants.load("cuda"), "torch", "train")


def test_a_trailing_pooled_context_reading_leaves_the_context_not_the_pool() -> None:
    """`_rebase` takes the highest context reading per framework: a pooled probe's readings are without its pool, so
    one that trailed (here 500 MiB low) gives way to the others' context and never to a pool."""
    run = _run("h100-ec3adfa/default-cuda.json")
    context = constants.of_run(run)[0]["frameworks"]["jax"]["train"]["context"]
    readings = phase(_probe(run, "jax"), "context")["nvml"]
    for name in ("process_peak", "device_peak"):
        readings[name]["bytes"] -= 500 * MIB
    jax = constants.of_run(run)[0]["frameworks"]["jax"]
    assert jax["train"]["context_read"] == context - 500 * MIB
    assert jax["train"]["context"] == jax["infer"]["context"] == context < 1024 * MIB


def _total(done: subprocess.CompletedProcess) -> str:
    return next(line for line in done.stdout.splitlines() if line.startswith("total at the peak"))


def _line(done: subprocess.CompletedProcess, start: str) -> str:
    """The line that starts so, its wrapped continuation (indented) joined back on."""
    lines = done.stdout.splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith(start))
    after = [line.strip() for line in itertools.takewhile(lambda line: line.startswith("  "), lines[first + 1:])]
    return " ".join([lines[first], *after])


def _takes(done: subprocess.CompletedProcess) -> str:
    return _line(done, "takes by default:")


@pytest.mark.parametrize("framework", ["jax", "keras-jax"])
def test_a_pooled_estimate_totals_the_net_and_shows_the_pool_apart(framework: str) -> None:
    """ResNet-50 at batch 32 trains in about 2.9 GiB of tensors: the total is those with the context less the pool and
    the runtime overhead its allocator held (a pool fills the driver's figures), far below the 60 GB pool, which has
    a line of its own sized for the card asked about; another card moves the pool, not the total."""
    probe = _probe(_run("h100-ec3adfa/default-cuda.json"), framework)
    pool, card = figures.pool_size(probe), probe["nvml"]["gpu"]["total_bytes"]
    known = constants.lookup(constants.load("cuda"), framework, "train")
    analytic = estimate(get_model("resnet50"), "train", 32, framework=framework, device="cuda")
    peak, expected = max(((p.name, p.total + (constants.overhead(known, p.name, "allocator", analytic) or 0)
                           + figures.context_alone(probe, "cuda")) for p in analytic.phases if p.items),
                         key=lambda pair: pair[1])
    assert expected - figures.context_alone(probe, "cuda") - analytic.phase(peak).total < 200 * MIB
    h100 = _estimate("--batch", "32", "--gpu", "NVIDIA H100 80GB HBM3", framework=framework)
    assert h100.returncode == 0, h100.stderr
    total = _total(h100)
    assert f"total at the peak ({peak}): {expected / MIB:,.1f} MiB, the pool left out" in total
    assert expected < pool / 10
    assert f"{pool / MIB:,.1f} MiB" in _takes(h100) and f"{card / MIB:,.1f} MiB" in _takes(h100)
    assert f"{pool / MIB:,.1f}" not in total
    smaller = _estimate("--batch", "32", "--gpu", "NVIDIA GeForce RTX 4090", "--gpu-memory", "24GiB",
                        framework=framework)
    assert _total(smaller) == total
    assert f"a pool that {framework} maps" in _takes(smaller)
    assert f": {round(pool * 24 * 2**30 / card) / MIB:,.1f} MiB (" in _takes(smaller)
    unknown = _estimate("--batch", "32", "--gpu", "NVIDIA GeForce RTX 4090", framework=framework)
    assert _total(unknown) == total
    assert f"{pool / card:.1%} of NVML's total" in _takes(unknown) and "give --gpu-memory" in _takes(unknown)
    assert not re.search(r"[0-9,]+\.[0-9] MiB", _takes(unknown))  # no size without the card's memory


@pytest.mark.parametrize("framework", ["jax", "keras-jax"])
def test_what_a_pooled_process_holds_without_its_pool_is_what_the_twins_held(framework: str) -> None:
    """`estimate`'s "holds without the pool" is the pool-off mode's estimate (its allocator's regions,
    models.estimate.bfc), not the tensors' total: against the pool-off twins' NVML peaks at c3d4247 it is at most 4 %
    short (resnet50's train step 2,062 MiB against 2,106 measured; keras200m's 4,666 against 4,692), the kernel modules
    a step loads without the pool being unmeasured; the tensors' total would be 29 % short on resnet50. Read with the
    twins' own run's probes, as `errors` reads every run (ec3adfa's Keras-on-JAX probe counts XLA's autotuner as its
    own)."""
    twins = [record for record in _run("h100-c3d4247/default-cuda.json")["records"]
             if (record["scenario"]["framework"], record["scenario"]["allocator"]) == (framework, "noprealloc")
             and record["scenario"]["model"] in ("resnet50", "keras200m")]
    assert len(twins) == 4
    for twin in twins:
        scenario = twin["scenario"]
        measured = max(phase["nvml"].get("process_peak", {}).get("bytes", 0) for phase in twin["phases"]
                       if phase.get("nvml"))
        done = subprocess.run([sys.executable, "-m", "suites", "estimate", "--model", scenario["model"],
                               "--framework", framework, "--device", "cuda", "--scenario", scenario["kind"],
                               "--batch", str(scenario["batch"]), "--gpu", "NVIDIA H100 80GB HBM3",
                               "--constants", str(RUNS / "h100-c3d4247" / "default-cuda.json")],
                              capture_output=True, text=True, cwd=ROOT, check=True)
        holds = float(_line(done, "holds without the pool:").split()[4].replace(",", "")) * MIB
        assert 0.96 * measured <= holds <= measured, (scenario["model"], scenario["kind"], holds / MIB, measured / MIB)


def test_a_torch_estimate_has_no_pool_and_ignores_the_cards_memory() -> None:
    plain = _estimate("--batch", "32")
    assert plain.returncode == 0 and "takes by default" not in plain.stdout and "pool" not in _total(plain)
    assert _estimate("--batch", "32", "--gpu-memory", "24GiB").stdout == plain.stdout


def test_estimate_names_its_card_and_warns_for_another() -> None:
    same = _estimate("--gpu", "NVIDIA H100 80GB HBM3")
    assert same.returncode == 0 and "warning" not in same.stderr
    assert "the probe model on NVIDIA H100 80GB HBM3, driver 580.159.04" in same.stdout
    other = _estimate("--gpu", "NVIDIA A100-SXM4-40GB")
    assert other.returncode == 0
    assert "measured on NVIDIA H100 80GB HBM3, not NVIDIA A100-SXM4-40GB" in other.stderr


def test_errors_command_prints_the_table_and_refuses_a_bad_file(tmp_path: Path) -> None:
    name = "results/h100-ec3adfa/default-cuda.json"
    done = subprocess.run([sys.executable, "-m", "suites", "errors", name], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    assert f"| {name} | jax | allocator | footprint | tuned | - | 12 |" in done.stdout
    bad = tmp_path / "nothing.json"
    bad.write_text("{}")
    refused = subprocess.run([sys.executable, "-m", "suites", "errors", str(bad)], capture_output=True, text=True,
                             cwd=ROOT, check=False)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1


def test_the_probes_measure_torchs_cublas_workspace_on_the_h100() -> None:
    """The probe's allocator figure beyond its tensors is its cuBLAS workspaces, one per thread that multiplied: 32 MiB
    each on a Hopper card (ATen's CublasHandlePool), and the few KiB of its tiny tensors' rounding."""
    taken, _ = constants.of_run(_run("h100-ec3adfa/default-cuda.json"))
    for framework in ("torch", "keras-torch"):
        for kind in ("train", "infer"):
            assert 0 <= taken["frameworks"][framework][kind]["blas_workspace"] - 32 * MIB < 8192, (framework, kind)
    assert "blas_workspace" not in taken["frameworks"]["jax"]["infer"]  # XLA plans its workspaces inside temp


def _items(model: str, kind: str, phase: str, device: str = "cuda", technique: str = "none") -> dict[str, int]:
    return estimate(get_model(model), kind, 8, framework="torch", device=device, technique=technique,
                    blas_workspace=32 * MIB).phase(phase).items


def test_a_blas_workspace_is_held_where_the_net_multiplies_and_from_then_on() -> None:
    assert "library_workspace" not in _items("heatmap68", "infer", "inference")  # convolutions only: none
    assert "library_workspace" not in _items("probe", "infer", "inference", device="cpu")  # not on the CPU
    assert _items("probe", "infer", "inference")["library_workspace"] == 32 * MIB  # its peak is at the dense layer
    # ResNet-50 multiplies last, after its largest activations are freed: its inference peak holds no workspace
    assert "library_workspace" not in _items("resnet50", "infer", "inference")
    # training: the forward's thread and autograd's each hold one, from the step on
    assert _items("resnet50", "train", "train_step_2")["library_workspace"] == 64 * MIB
    assert _items("resnet50", "train", "inference")["library_workspace"] == 64 * MIB


def test_the_caching_allocator_keeps_a_steps_blocks_for_the_driver_unless_emptied() -> None:
    """Inference after training: the card still holds the step's segments (the driver's view), the allocator does
    not count them; empty_cache returns those with nothing left in them."""
    kept = _items("resnet50", "train", "inference")
    step = estimate(get_model("resnet50"), "train", 8, framework="torch", device="cuda",
                    blas_workspace=32 * MIB).phase("train_step_2").items
    tensors = sum(step.values()) - step.get("retained_pages", 0)
    assert sum(kept.values()) >= tensors and kept["retained_pages"] > tensors / 2
    emptied = _items("resnet50", "train", "inference", technique="empty_cache")
    assert emptied.get("retained_pages", 0) < kept["retained_pages"] / 4
    assert "retained_pages" not in _items("resnet50", "train", "inference", device="cpu")


def test_a_recomputed_runs_inputs_are_freed_once_the_backward_passed_them() -> None:
    """torch and JAX free a checkpointed block's input after its backward (the H100's allocators: ResNet-50's
    checkpoint step 771 MiB for torch, 870 for JAX; held to the end the estimate said 1,028 and 1,082); TensorFlow's
    recompute_grad holds them to the backward's end (its CPU allocator: 673 MiB, 578 if freed)."""
    spec = get_model("resnet50")
    freed = activations(spec, RULES["torch"], 16, 4, "checkpoint")
    held = activations(spec, replace(RULES["torch"], holds_run_inputs=True), 16, 4, "checkpoint")
    assert freed.saved == held.saved and freed.backward_peak < held.backward_peak - 200 * MIB
    assert RULES["keras-tensorflow"].holds_run_inputs and not RULES["jax"].holds_run_inputs


def test_a_miss_is_judged_relative_for_a_large_need_and_absolute_for_a_small_one() -> None:
    """heatmap68's -43 % on the H100 at c3d4247 is 5.6 MiB short of a 13 MiB need: within the bar; a 15 % miss of
    a large need is past it only beyond 8 MiB too. `errors` gives each worst in MiB and counts the phases past."""
    row = errors.Row("jax", "heatmap68", "infer", "inference", "allocator", "footprint", 13 * MIB, 7 * MIB,
                     accounting.relative_error(7 * MIB, 13 * MIB))
    assert row.miss == -6 * MIB and row.within_bar
    assert not replace(row, measured=1000 * MIB, estimate=800 * MIB, error=-0.2).within_bar
    assert replace(row, measured=1000 * MIB, estimate=860 * MIB, error=-0.14).within_bar
    found = errors.of_run(_run("h100-c3d4247/default-cuda.json"))[("jax", "allocator", "footprint")]
    line = next(line for line in errors.table([("c3d4247", _run("h100-c3d4247/default-cuda.json"))]).splitlines()
                if line.startswith("| c3d4247 | jax | allocator | footprint |"))
    assert f"| {found['worst'].miss / MIB:+,.1f} | heatmap68 infer inference | {found['past_bar']} |" in line
    assert found["past_bar"] == sum(not row.within_bar for row in errors.rows(
        {"records": accounting.reaccount(_run("h100-c3d4247/default-cuda.json"))})
        if (row.framework, row.view, row.source) == ("jax", "allocator", "footprint"))


def test_the_fields_figures_and_the_margin_over_a_run() -> None:
    """`errors`'s figures on the H100 run at c3d4247, computed again here from the rows: the 90th percentile as numpy
    interpolates it, the unsafe rate as the share below the measured by more than 2 %, and the margin (the 95th
    percentile of the shortfalls) leaving at most 5 % of the rows unsafe where a margin 2 points smaller leaves more."""
    found = errors.rows({"records": accounting.reaccount(_run("h100-c3d4247/default-cuda.json"))})
    ours = [row for row in found if (row.framework, row.view, row.source) == ("jax", "allocator", "footprint")]
    summed = errors.summary(ours)[("jax", "allocator", "footprint")]
    sizes = [abs(row.error) for row in ours]
    assert summed["p90"] == pytest.approx(float(np.quantile(sizes, 0.9)))
    assert summed["median"] <= summed["p90"] <= summed["max"]
    assert summed["unsafe"] == sum(row.estimate < 0.98 * row.measured for row in ours) / len(ours) > 0
    margin = errors.margin(ours)
    assert margin > 0.02
    assert sum(row.unsafe(margin) for row in ours) / len(ours) <= 0.05 + 1 / len(ours)
    assert sum(row.unsafe(margin - 0.02) for row in ours) > sum(row.unsafe(margin) for row in ours)
    assert {row.half for row in found} == {"tuned"}  # the catalogue's nets: the tuned half
