"""The recomputing techniques on a graph (checkpoint per block, bnrelu, efficient) keep the baseline's arithmetic.

Dropout draws the same mask in the recomputation as in the forward pass (torch preserves the RNG state, the JAX
adapter folds the layer into its key, Keras collects its seed updates inside the recomputed run), so two SGD steps
give the baseline's losses in every framework."""

from __future__ import annotations

from pathlib import Path

import pytest

from models import techniques
from models.catalogue import Graph
from models.scenario import Scenario
from models.spec import BatchNorm, Concat, Conv2D, Dense, Dropout, GlobalAvgPool, ModelSpec, ReLU
from tests.conftest import FRAMEWORKS, steps_in_one_worker


def small_densenet() -> ModelSpec:
    """Dense layers (concat, BN, ReLU, conv) in named blocks, and a head block that ends the net with dropout in it:
    every recomputing technique has runs, one of them holding the output layer."""
    net = Graph()
    features = [net.conv_bn(8, 3)]
    for layer in range(3):
        net.block = f"dense{layer}"
        joined = net.add(Concat(), *features) if len(features) > 1 else features[0]
        net.add(BatchNorm(momentum=0.3), joined)
        net.add(ReLU())
        net.add(Conv2D(8, 1, padding=0, bias=False))
        net.add(BatchNorm())
        net.add(ReLU())
        features.append(net.add(Conv2D(4, 3, padding=1, bias=False)))
    net.block = "head"
    net.add(Concat(), *features)
    net.add(GlobalAvgPool())
    net.add(Dropout(0.5))
    net.add(Dense(5))
    return net.spec("small-densenet", (8, 8, 3), "cross_entropy", "", batch=4)


def test_the_net_has_runs_for_every_recomputing_technique() -> None:
    spec = small_densenet()
    assert {technique: len(techniques.segments(spec, technique)) for technique in techniques.RECOMPUTING} == \
        {"checkpoint": 4, "bnrelu": 6, "efficient": 2}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_recomputing_techniques_compute_the_baselines_losses(framework: str, spec_file, tmp_path: Path) -> None:  # noqa: ANN001
    """Arithmetic, not memory: every technique's steps in one worker (its steps job), as their scenario's phases
    run them."""
    path = spec_file(small_densenet().to_dict())
    scenarios = [Scenario.create(framework, model_file=str(path), device="cpu", batch=4, technique=technique,
                                 optimizer="sgd") for technique in ("none", *techniques.RECOMPUTING)]
    stepped = steps_in_one_worker(scenarios, tmp_path / "workers")
    baseline, *others = ([step["loss"] for step in steps] for steps in stepped)
    for technique, losses in zip(techniques.RECOMPUTING, others, strict=True):
        assert losses == pytest.approx(baseline, rel=1e-5), technique
