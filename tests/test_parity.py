"""Every framework builds the same net: the same parameter count, and the same outputs for the same weights."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.catalogue import listed_models
from models.scenario import Scenario
from models.spec import Conv2D, Dense, Flatten, MaxPool2D, ModelSpec, ReLU
from tests.conftest import FRAMEWORKS, run_worker


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_counts_equal_the_spec_for_every_catalogue_model(framework: str) -> None:
    specs = listed_models()
    counts = json.loads(run_worker(framework, "params", framework, *(spec.name for spec in specs)))
    assert counts == {spec.name: spec.param_count for spec in specs}


# Small nets that exercise every layer: asymmetric 'same' padding (12 -> 6 with stride 2), valid
# padding, pooling with its own stride, flatten of an image into a dense layer, both losses.
CLASSIFIER = ModelSpec("parity-classifier", (12, 12, 3), (
    Conv2D(4, stride=2), ReLU(), Conv2D(6), MaxPool2D(2), Conv2D(5, kernel=2, padding="valid"),
    Flatten(), Dense(7), ReLU(), Dense(3, bias=False),
), "cross_entropy")
HEATMAP = ModelSpec("parity-heatmap", (16, 16, 3), (
    Conv2D(8, stride=2), ReLU(), MaxPool2D(3, stride=1), Conv2D(4, kernel=1),
), "mse")


def _arrays(spec: ModelSpec, batch: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(7)
    arrays = {"inputs": generator.standard_normal((batch, *spec.input_shape), dtype=np.float32)}
    for step in spec.walk():
        for name, shape in step.params.items():
            arrays[f"layer{step.index}_{name}"] = generator.standard_normal(shape, dtype=np.float32) * 0.3
    if spec.loss == "cross_entropy":
        arrays["targets"] = generator.integers(0, spec.output_shape[0], batch).astype(np.int32)
    else:
        arrays["targets"] = generator.standard_normal((batch, *spec.output_shape), dtype=np.float32)
    return arrays


@pytest.mark.parametrize("spec", [CLASSIFIER, HEATMAP], ids=lambda s: s.name)
def test_same_weights_give_the_same_outputs_and_loss(spec: ModelSpec, tmp_path: Path) -> None:
    arrays_path = tmp_path / "arrays.npz"
    np.savez(arrays_path, **_arrays(spec, batch=3))
    results = {}
    for framework in FRAMEWORKS:
        scenario = Scenario(framework=framework, model=spec.name, batch=3, spec_json=spec.to_dict())
        out = tmp_path / f"{framework}.npz"
        run_worker(framework, "forward", json.dumps(scenario.to_dict()), str(arrays_path), str(out))
        results[framework] = np.load(out)
    reference = results[FRAMEWORKS[0]]
    assert reference["output"].shape == (3, *spec.output_shape)
    assert np.abs(reference["output"]).max() > 0.1  # a net of zeros would agree trivially
    for framework, result in results.items():
        np.testing.assert_allclose(result["output"], reference["output"], rtol=1e-4, atol=1e-4, err_msg=framework)
        np.testing.assert_allclose(result["loss"], reference["loss"], rtol=1e-4, err_msg=framework)
