"""Techniques compute the same thing as the baseline, are recorded where a framework lacks them, and are estimated."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.catalogue import get_model
from models.estimate import RULES, activations, estimate
from models.scenario import Scenario
from models.spec import SpecError
from suites.analysis import across_records, fit
from suites.run.orchestrator import run_scenario
from tests.conftest import FRAMEWORKS, run_cli, steps_in_one_worker

# (relative tolerance, steps compared): mixed precision only the first step, since fp16's dynamic loss
# scaling may skip a step whose scaled gradients overflow (torch's GradScaler starts at 65536)
SAME_LOSS = {"checkpoint": (1e-5, 2), "accumulate": (1e-5, 2), "bf16": (3e-2, 1), "fp16": (1e-2, 1)}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_techniques_compute_the_baselines_loss(framework: str, tmp_path: Path) -> None:
    """Checkpointing and accumulation change memory, not arithmetic; mixed precision only rounding. Arithmetic, not
    memory: every technique's steps in one worker (its steps job), as their scenario's phases run them."""
    scenarios = [Scenario.create(framework, "plain-2", device="cpu", batch=8, technique=technique, optimizer="sgd")
                 for technique in ("none", *SAME_LOSS)]
    baseline, *others = ([step["loss"] for step in steps] for steps in steps_in_one_worker(scenarios, tmp_path))
    for (technique, (tolerance, steps)), losses in zip(SAME_LOSS.items(), others, strict=True):
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


FIT_SCENARIO = Scenario.create("torch", "heatmap68", kind="infer", batch=1, device="cpu")


@pytest.fixture(scope="module")
def fit_batch_1() -> dict:
    """FIT_SCENARIO's record, run once for the tests that need a batch-1 run that fits (a budget, a probe)."""
    return run_scenario(FIT_SCENARIO)


def test_fit_answer_passes_and_the_next_batch_fails(fit_batch_1: dict) -> None:
    """The budget is set from this machine's own batch-1 peak: its libraries set the fixed part (241 MiB here).
    The search runs its own batch-1 probe: the budget's room is for that run's jitter."""
    budget = int(fit.process_peak(fit_batch_1) * 1.15)  # room for a few samples and for VmHWM's jitter
    result = fit.find(FIT_SCENARIO, budget, run_scenario)
    probes = {probe["batch"]: probe for probe in result["probes"]}
    largest = result["largest_batch"]
    assert largest and probes[largest]["fits"] and probes[largest]["peak_bytes"] <= budget, result["probes"]
    assert not probes[largest + 1]["fits"] and result["first_failing_batch"] == largest + 1


def test_a_failure_that_is_not_memory_makes_the_answer_unknown(fit_batch_1: dict) -> None:
    """An error at batch 2 (a real raise in the worker) must not read as "batch 2 does not fit". Batch 1's probe is
    the module's batch-1 record: the search judges it as it would its own run's."""
    result = fit.find(FIT_SCENARIO, 64 * 2**30,
                      lambda probe: fit_batch_1 if probe == FIT_SCENARIO else run_scenario(probe, fault="build:raise"))
    assert result["answer"] == "unknown" and result["largest_batch"] == 1 and result["first_failing_batch"] is None
    assert "error in build" in result["unknown_reason"] and "injected fault" in result["unknown_reason"]
    assert [probe["fits"] for probe in result["probes"]] == [True, None]
    assert fit.describe(result).splitlines()[0].endswith("(batch 1 fits)")
    assert fit.EXIT_CODES[result["answer"]] not in (0, 1, 2)


def test_only_out_of_memory_or_a_peak_over_the_budget_does_not_fit(spec_file, fit_batch_1: dict) -> None:  # noqa: ANN001
    from tests.test_failures import TOO_LARGE

    oom = run_scenario(Scenario.create("torch", model_file=str(spec_file(TOO_LARGE)), kind="infer", device="cpu"))
    assert oom["status"] == "oom"
    assert fit.judge(oom, 2**40).fits is False
    assert fit.judge(fit_batch_1, 2**40).fits is True and fit.judge(fit_batch_1, 2**20).fits is False
    hung = run_scenario(FIT_SCENARIO, timeout=5, fault="import:hang")  # hangs before torch's import: any timeout
    assert hung["status"] == "timeout" and fit.judge(hung, 2**40).fits is None
