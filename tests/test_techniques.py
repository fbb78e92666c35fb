"""Techniques compute the same thing as the baseline, are recorded where a framework lacks them, and are estimated."""

from __future__ import annotations

import pytest

from models.catalogue import get_model
from models.estimate import RULES, activations, estimate
from models.record import phase
from models.scenario import Scenario
from models.spec import SpecError
from suites.analysis import across_records, fit
from suites.run.orchestrator import run_scenario
from tests.conftest import FRAMEWORKS, run_cli

# (relative tolerance, steps compared): mixed precision only the first step, since fp16's dynamic loss
# scaling may skip a step whose scaled gradients overflow (torch's GradScaler starts at 65536)
SAME_LOSS = {"checkpoint": (1e-5, 2), "accumulate": (1e-5, 2), "bf16": (3e-2, 1), "fp16": (1e-2, 1)}


def _losses(framework: str, technique: str) -> list[float]:
    record = run_scenario(Scenario.create(framework, "plain-2", device="cpu", batch=8, technique=technique,
                                          optimizer="sgd"))
    assert record["status"] == "ok", record["failure"]
    return [phase(record, name)["notes"]["loss"] for name in ("train_step_1", "train_step_2")]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_techniques_compute_the_baselines_loss(framework: str) -> None:
    """Checkpointing and accumulation change memory, not arithmetic; mixed precision only rounding."""
    baseline = _losses(framework, "none")
    for technique, (tolerance, steps) in SAME_LOSS.items():
        losses = _losses(framework, technique)
        assert losses[:steps] == pytest.approx(baseline[:steps], rel=tolerance), (technique, losses, baseline)


@pytest.mark.parametrize(("framework", "technique"), [("keras-tensorflow", "inplace"), ("jax", "inplace"),
                                                      ("torch", "empty_cache")])
def test_missing_technique_is_recorded_with_its_reason(framework: str, technique: str) -> None:
    record = run_scenario(Scenario.create(framework, "plain-2", device="cpu", technique=technique))
    assert record["status"] == "unavailable" and record["phases"] == []
    assert len(record["failure"]["message"]) > 20  # the reason, in words


def test_estimate_covers_each_technique() -> None:
    spec, torch = get_model("plain-64"), RULES["torch"]
    plain = activations(spec, torch, 8, 4)
    # halved, all but max-pool's int64 indices
    assert activations(spec, torch, 8, 4, "none", activation_bytes=2).saved * 2 == pytest.approx(plain.saved, 1e-2)
    assert activations(spec, torch, 2, 4).saved * 4 == plain.saved  # accumulation runs a quarter of the batch
    checkpointed = [activations(get_model(f"plain-{n}"), torch, 8, 4, "checkpoint").backward_saved for n in (64, 256)]
    full = [activations(get_model(f"plain-{n}"), torch, 8, 4).backward_saved for n in (64, 256)]
    assert 1.5 < checkpointed[1] / checkpointed[0] < 2.6  # about sqrt(4)
    assert 3.8 < full[1] / full[0] < 4.2  # about 4
    weights = spec.weight_bytes()
    assert estimate(spec, "train", 8, "momentum", framework="torch").phase("train_step_2").items[
        "optimizer_state"] in (0, weights)
    tracked = estimate(spec, "infer", 8, framework="torch", technique="tracked").phase("inference")
    assert tracked.items["saved_activations"] == plain.saved - 8 * 10 * 4  # all but the loss's residual


def test_growth_fit_recovers_a_known_exponent_under_a_constant() -> None:
    exponent, slope, offset, *_ = across_records._fit([(n, int(9e7 + 3e6 * n**0.5)) for n in (8, 16, 32, 64, 128, 256)])
    assert exponent == pytest.approx(0.5, abs=0.011) and slope > 0 and offset == pytest.approx(9e7, rel=0.05)


@pytest.mark.parametrize(("text", "expected"), [("2GiB", 2 * 2**30), ("900MB", 900 * 10**6), ("1.5 GB", 1.5e9)])
def test_budget_units(text: str, expected: float) -> None:
    assert fit.parse_budget(text) == expected


def test_bad_budget_and_accumulate_batch_are_one_line_errors() -> None:
    with pytest.raises(SpecError):
        fit.parse_budget("-1GB")
    done = run_cli("fit", "--model", "heatmap68", "--framework", "torch", "--budget", "lots")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    with pytest.raises(SpecError, match="micro-batches"):
        Scenario.create("torch", "plain-2", batch=6, technique="accumulate")


def test_fit_answer_passes_and_the_next_batch_fails() -> None:
    """The budget is set from this machine's own batch-1 peak: its libraries set the fixed part (241 MiB here)."""
    scenario = Scenario.create("torch", "heatmap68", kind="infer", batch=1, device="cpu")
    budget = int(fit.process_peak(run_scenario(scenario)) * 1.15)  # room for a few samples and for VmHWM's jitter
    result = fit.find(scenario, budget, run_scenario)
    probes = {probe["batch"]: probe for probe in result["probes"]}
    largest = result["largest_batch"]
    assert largest and probes[largest]["fits"] and probes[largest]["peak_bytes"] <= budget, result["probes"]
    assert not probes[largest + 1]["fits"] and result["first_failing_batch"] == largest + 1


def test_a_failure_that_is_not_memory_makes_the_answer_unknown() -> None:
    """An error at batch 2 (a real raise in the worker) must not read as "batch 2 does not fit"."""
    scenario = Scenario.create("torch", "heatmap68", kind="infer", batch=1, device="cpu")
    result = fit.find(scenario, 64 * 2**30,
                      lambda probe: run_scenario(probe, fault="build:raise" if probe.batch >= 2 else None))
    assert result["answer"] == "unknown" and result["largest_batch"] == 1 and result["first_failing_batch"] is None
    assert "error in build" in result["unknown_reason"] and "injected fault" in result["unknown_reason"]
    assert [probe["fits"] for probe in result["probes"]] == [True, None]
    assert fit.describe(result).splitlines()[0].endswith("(batch 1 fits)")
    assert fit.EXIT_CODES[result["answer"]] not in (0, 1, 2)


def test_only_out_of_memory_or_a_peak_over_the_budget_does_not_fit(spec_file) -> None:  # noqa: ANN001
    from tests.test_failures import TOO_LARGE

    oom = run_scenario(Scenario.create("torch", model_file=str(spec_file(TOO_LARGE)), kind="infer", device="cpu"))
    assert oom["status"] == "oom"
    assert fit.judge(oom, 2**40).fits is False
    ok = run_scenario(Scenario.create("torch", "heatmap68", kind="infer", batch=1, device="cpu"))
    assert fit.judge(ok, 2**40).fits is True and fit.judge(ok, 2**20).fits is False
    hung = run_scenario(Scenario.create("torch", "heatmap68", kind="infer", batch=1, device="cpu"), timeout=20,
                        fault="build:hang")
    assert hung["status"] == "timeout" and fit.judge(hung, 2**40).fits is None
