"""Every framework builds the same net: the same counts, and the same outputs, loss and running statistics for the
same weights, in inference mode (running statistics) and in training mode (batch statistics)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.catalogue import Graph, listed_models
from models.protocol import write_scenario
from models.scenario import Scenario
from models.spec import (
    Add,
    AvgPool2D,
    BatchNorm,
    Concat,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    MaxPool2D,
    ModelSpec,
    ReLU,
    ReLU6,
)
from tests.conftest import FRAMEWORKS, run_worker

# The figures for the three real nets (torchvision's counts): trainable values and batch-norm statistics.
REAL_NETS = {"resnet50": (25_557_032, 53_120), "mobilenetv2": (3_504_872, 34_112), "densenet121": (7_978_856, 83_648)}


def test_real_nets_have_the_published_counts() -> None:
    counts = {spec.name: (spec.param_count, spec.statistics_count) for spec in listed_models()}
    assert {name: counts[name] for name in REAL_NETS} == REAL_NETS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_counts_equal_the_spec_for_every_catalogue_model(framework: str) -> None:
    """Trainable and non-trainable apart, as each framework reports them (torch: parameters and buffers)."""
    specs = listed_models()
    counts = json.loads(run_worker(framework, "params", framework, *(spec.name for spec in specs)))
    assert counts == {spec.name: {"trainable": spec.param_count, "statistics": spec.statistics_count}
                      for spec in specs}


# Small nets that exercise every layer: asymmetric 'same' padding (12 -> 6 with stride 2), valid
# padding, pooling with its own stride, flatten of an image into a dense layer, both losses.
CLASSIFIER = ModelSpec("parity-classifier", (12, 12, 3), (
    Conv2D(4, stride=2), ReLU(), Conv2D(6), MaxPool2D(2), Conv2D(5, kernel=2, padding="valid"),
    Flatten(), Dense(7), ReLU(), Dense(3, bias=False),
), "cross_entropy")
HEATMAP = ModelSpec("parity-heatmap", (16, 16, 3), (
    Conv2D(8, stride=2), ReLU(), MaxPool2D(3, stride=1), Conv2D(4, kernel=1),
), "mse")


def residual(dropout: float) -> ModelSpec:
    """Every graph layer: explicit padding, padded max-pool, a residual add around BN, ReLU6, a depthwise and a
    grouped conv, a concatenation, average and global pooling, dropout (0 in training: see the dropout test)."""
    net = Graph()
    net.conv_bn(8, 3, 2)  # 16 -> 8, symmetric padding 1
    x = net.add(MaxPool2D(3, 2, padding=1))  # 8 -> 4
    y = net.conv_bn(8, 3, source=x, activation=ReLU6)
    y = net.conv_bn(8, 3, groups=8, source=y, activation=None)  # depthwise
    x = net.add(ReLU(), net.add(Add(), x, y))
    z = net.add(Conv2D(6, 3, padding="same", groups=2), x)
    x = net.add(Concat(), x, z)
    net.add(BatchNorm(epsilon=1e-3, momentum=0.3))
    net.add(AvgPool2D(2))
    net.add(GlobalAvgPool())
    net.add(Dropout(dropout))
    net.add(Dense(5))
    return net.spec("parity-residual", (16, 16, 3), "cross_entropy", "", batch=4)


def dense_heatmap(dropout: float) -> ModelSpec:
    """Batch norm on flat features too, and an mse head over an image."""
    net = Graph()
    a = net.conv_bn(6, 3, activation=ReLU6)
    b = net.add(Conv2D(6, 1, padding="valid"), a)
    net.add(Concat(), a, b, a)
    net.add(BatchNorm())
    net.add(Dropout(dropout))
    net.add(Conv2D(3, 3, padding=1))
    return net.spec("parity-dense", (8, 8, 2), "mse", "", batch=4)


def _arrays(spec: ModelSpec, batch: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(7)
    arrays = {"inputs": generator.standard_normal((batch, *spec.input_shape), dtype=np.float32)}
    for step in spec.walk():
        for name, shape in step.weights.items():
            if name == "variance":  # running statistics a past training left: positive variances
                value = generator.uniform(0.5, 2.0, shape).astype(np.float32)
            else:
                value = generator.standard_normal(shape, dtype=np.float32) * 0.3
            arrays[f"layer{step.index}_{name}"] = value
    if spec.loss == "cross_entropy":
        arrays["targets"] = generator.integers(0, spec.output_shape[0], batch).astype(np.int32)
    else:
        arrays["targets"] = generator.standard_normal((batch, *spec.output_shape), dtype=np.float32)
    return arrays


def _run_everywhere(spec: ModelSpec, tmp_path: Path, training: bool) -> dict[str, dict[str, np.ndarray]]:
    arrays_path = tmp_path / "arrays.npz"
    np.savez(arrays_path, **_arrays(spec, batch=4))
    results = {}
    for framework in FRAMEWORKS:
        scenario = Scenario(framework=framework, model=spec.name, batch=4, spec_json=spec.to_dict())
        out = tmp_path / f"{framework}.npz"
        run_worker(framework, "forward", write_scenario(scenario.to_dict(), tmp_path), str(arrays_path), str(out),
                   *(["--training"] if training else []))
        results[framework] = dict(np.load(out))
    return results


def _assert_agree(results: dict[str, dict[str, np.ndarray]], spec: ModelSpec, keys: list[str]) -> None:
    reference = next(iter(results.values()))
    assert reference["output"].shape == (4, *spec.output_shape)
    assert np.abs(reference["output"]).max() > 0.1  # a net of zeros would agree trivially
    for framework, result in results.items():
        assert sorted(result) == sorted(reference), framework
        for key in keys:
            np.testing.assert_allclose(result[key], reference[key], rtol=1e-4, atol=1e-4, err_msg=f"{framework} {key}")


@pytest.mark.parametrize("spec", [CLASSIFIER, HEATMAP, residual(0.5), dense_heatmap(0.25)], ids=lambda s: s.name)
def test_same_weights_give_the_same_outputs_and_loss_in_inference(spec: ModelSpec, tmp_path: Path) -> None:
    """Running statistics normalize; dropout is the identity; the statistics do not move."""
    results = _run_everywhere(spec, tmp_path, training=False)
    _assert_agree(results, spec, ["output", "loss"])
    given = _arrays(spec, batch=4)
    for key, value in results[FRAMEWORKS[0]].items():
        if key.startswith("statistics"):
            np.testing.assert_array_equal(value, given[key.replace("statistics", "layer")])


@pytest.mark.parametrize("spec", [residual(0.0), dense_heatmap(0.0)], ids=lambda s: s.name)
def test_training_mode_agrees_and_updates_the_same_statistics(spec: ModelSpec, tmp_path: Path) -> None:
    """Batch statistics normalize; the running mean moves by `momentum` toward the batch's in every framework. The
    running variance too, except torch's: it takes the batch's unbiased variance (n / (n - 1) times the biased one
    that Keras and the jax adapter take, as flax does), which this test pins."""
    results = _run_everywhere(spec, tmp_path, training=True)
    means = [key for key in results[FRAMEWORKS[0]] if key.startswith("statistics") and key.endswith("_mean")]
    assert means, "the net has batch norm"
    _assert_agree(results, spec, ["output", "loss", *means])
    given = _arrays(spec, batch=4)
    biased = {framework: result for framework, result in results.items() if framework != "torch"}
    for key in (mean.replace("_mean", "_variance") for mean in means):
        _assert_agree(biased, spec, [key])
        if "torch" in results and biased:
            index = int(key.removeprefix("statistics").split("_")[0])
            layer = spec.walk()[index]
            count = 4 * (np.prod(layer.input_shape[:-1]) if len(layer.input_shape) == 3 else 1)
            momentum = layer.layer.momentum
            old = given[key.replace("statistics", "layer")]
            batch_biased = (next(iter(biased.values()))[key] - (1 - momentum) * old) / momentum
            unbiased = (1 - momentum) * old + momentum * batch_biased * count / (count - 1)
            np.testing.assert_allclose(results["torch"][key], unbiased, rtol=1e-4, atol=1e-5)
            assert not np.allclose(results["torch"][key], next(iter(biased.values()))[key], rtol=1e-6, atol=0)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dropout_in_training_drops_its_rate_and_scales_the_rest(framework: str, tmp_path: Path) -> None:
    """Dropout's mask is each framework's own random draw, so training-mode parity runs at rate 0; here each
    framework's training-mode dropout is checked for what it must do: drop about `rate`, scale the rest by
    1 / (1 - rate)."""
    spec = ModelSpec("parity-dropout", (20_000,), (Dropout(0.3),), "mse")
    arrays = _arrays(spec, batch=4)
    np.savez(tmp_path / "arrays.npz", **arrays)
    scenario = Scenario(framework=framework, model=spec.name, batch=4, spec_json=spec.to_dict())
    run_worker(framework, "forward", write_scenario(scenario.to_dict(), tmp_path), str(tmp_path / "arrays.npz"),
               str(tmp_path / "out.npz"), "--training")
    output, inputs = np.load(tmp_path / "out.npz")["output"], arrays["inputs"]
    dropped = output == 0
    assert abs(dropped.mean() - 0.3) < 0.01
    np.testing.assert_allclose(output[~dropped], inputs[~dropped] / 0.7, rtol=1e-5)
