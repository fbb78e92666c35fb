"""Every framework builds the same net: the same counts, and the same outputs, loss and running statistics for the
same weights, in inference mode (running statistics) and in training mode (batch statistics)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.catalogue import Graph, listed_models
from models.spec import (
    ELU,
    GELU,
    AdaptiveAvgPool2D,
    Add,
    AvgPool2D,
    BatchNorm,
    ChannelShuffle,
    ChannelSlice,
    Concat,
    Conv2D,
    ConvTranspose2D,
    Crop2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    GroupNorm,
    HardSigmoid,
    HardSwish,
    InstanceNorm,
    LayerNorm,
    LayerScale,
    LeakyReLU,
    MaxPool2D,
    Mish,
    ModelSpec,
    Multiply,
    Normalize,
    Pad2D,
    PReLU,
    ReLU,
    ReLU6,
    Rescale,
    Reshape,
    Resize2D,
    Sigmoid,
    SiLU,
    Softplus,
    SpaceToDepth,
    Subtract,
    Upsample2D,
    ZeroPad2D,
)
from tests.conftest import FRAMEWORKS, forward_all, run_worker

# The figures for the three real nets (torchvision's counts): trainable values and batch-norm statistics.
REAL_NETS = {"resnet50": (25_557_032, 53_120), "mobilenetv2": (3_504_872, 34_112), "densenet121": (7_978_856, 83_648)}


def test_real_nets_have_the_published_counts() -> None:
    counts = {spec.name: (spec.param_count, spec.statistics_count) for spec in listed_models()}
    assert {name: counts[name] for name in REAL_NETS} == REAL_NETS


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_framework_counts_equal_the_spec_for_every_catalogue_model(framework: str, tmp_path: Path) -> None:
    """Trainable and non-trainable apart, as each framework reports them (torch: parameters and buffers); the
    parity nets of the layers no catalogue model has yet go as spec files (normalize's count is a statistic)."""
    specs = {spec.name: spec for spec in listed_models()}
    for spec in (excite(0.5), layer_norms(), dense_prediction()):
        path = tmp_path / f"{spec.name}.json"
        path.write_text(json.dumps(spec.to_dict()))
        specs[str(path)] = spec
    counts = json.loads(run_worker(framework, "params", framework, *specs))
    assert counts == {name: {"trainable": spec.param_count, "statistics": spec.statistics_count}
                      for name, spec in specs.items()}


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
    """Every graph layer: explicit padding, padded max-pool rounding up (ceil_mode), a residual add around BN,
    ReLU6, a depthwise and a grouped conv, a concatenation, ShuffleNetV2's channel slices (uneven, joined swapped)
    and channel shuffle, average pools that leave their padding out of the mean (NASNet's, Inception's; one
    rounding up), global pooling, dropout (0 in training: see the dropout test)."""
    net = Graph()
    net.conv_bn(8, 3, 2)  # 16 -> 8, symmetric padding 1
    x = net.add(MaxPool2D(3, 2, padding=1, ceil_mode=True))  # 8 -> 5: padded, its last window over the far edge
    y = net.conv_bn(8, 3, source=x, activation=ReLU6)
    y = net.conv_bn(8, 3, groups=8, source=y, activation=None)  # depthwise
    x = net.add(ReLU(), net.add(Add(), x, y))
    z = net.add(Conv2D(6, 3, padding="same", groups=2), x)
    x = net.add(Concat(), x, z)
    net.add(Concat(), net.add(ChannelSlice(4, 14), x), net.add(ChannelSlice(0, 4), x))
    net.add(ChannelShuffle(2))
    net.add(BatchNorm(epsilon=1e-3, momentum=0.3, scale=False))  # InceptionV3's: no scale learned
    net.add(AvgPool2D(3, 1, padding=1, count_include_pad=False))  # 5 -> 5, the padding left out: Keras's 'same'
    net.add(AvgPool2D(2, 2, ceil_mode=True, count_include_pad=False))  # 5 -> 3, the overhang left out: 'same' too
    net.add(AvgPool2D(2, 1, padding=1, count_include_pad=False))  # 3 -> 4: no Keras pool's, the mean over the inside
    net.add(GlobalAvgPool())
    net.add(Dropout(dropout))
    net.add(Dense(5))
    return net.spec("parity-residual", (16, 16, 3), "cross_entropy", "", batch=4)


def dense_heatmap(dropout: float) -> ModelSpec:
    """Batch norm without an offset, kernels of another height than width, and an mse head over an image."""
    net = Graph()
    a = net.conv_bn(6, 3, activation=ReLU6)
    b = net.add(Conv2D(6, 1, padding="valid"), a)
    net.add(Concat(), a, b, a)
    net.add(BatchNorm(center=False))  # no offset learned
    net.add(Dropout(dropout))
    net.add(Conv2D(6, (1, 3)))  # Inception's kernels of another height than width: 'same'
    net.add(Conv2D(6, (3, 1), padding=(1, 0)))  # and torch's padding per axis
    net.add(Conv2D(3, 3, padding=1))
    return net.spec("parity-dense", (8, 8, 2), "mse", "", batch=4)


def excite(dropout: float) -> ModelSpec:
    """EfficientNet's layers: rescale and normalize of the input (by state, then by constants), uneven zero padding
    and a crop of every side before a stride-2 valid conv, SiLU, two squeeze-and-excite gates (global pooling kept
    as (1, 1, C), and flat then reshaped; a sigmoid; the multiply broadcasting either way round, once of three
    inputs), dropout per example on a residual branch (0 in training), average pooling with padding, nearest and
    bilinear upsampling (and their difference: PoolFormer's subtract), an adaptive average pool of uneven windows
    (shrinking one axis, growing the other)."""
    net = Graph()
    net.add(Rescale(0.5, -0.1))
    net.add(Normalize())
    net.add(Normalize(mean=(0.1, -0.2, 0.3), variance=(0.5, 2.0, 1.5)))  # constants, no state
    net.add(ZeroPad2D(bottom=1, right=1))  # 16 -> 17
    net.add(Crop2D(top=1, bottom=2, left=3, right=1))  # 17 -> 14 by 13, then 6 by 6 by the stride-2 valid conv
    net.add(Conv2D(8, 3, 2, "valid"))
    net.add(BatchNorm())
    x = net.add(SiLU())
    net.add(GlobalAvgPool(keepdims=True), x)
    net.add(Conv2D(4, 1))
    net.add(SiLU())
    net.add(Conv2D(8, 1))
    y = net.add(Multiply(), x, net.add(Sigmoid()))
    net.add(GlobalAvgPool(), y)
    net.add(Dense(8))
    net.add(Sigmoid())
    gate = net.add(Reshape((1, 1, 8)))
    net.add(Multiply(), gate, y, gate)
    net.add(Dropout(dropout, per_example=True))
    net.add(Add(), x, len(net.layers) - 1)
    pooled = net.add(AvgPool2D(3, 2, padding=1))  # 6 -> 3, the padding's zeros counted
    nearest = net.add(Upsample2D(2), pooled)
    bilinear = net.add(Upsample2D(2, "bilinear"), pooled)
    net.add(Concat(), nearest, bilinear, net.add(Subtract(), bilinear, nearest))
    net.add(AdaptiveAvgPool2D((4, 9)))  # 6 -> 4 by overlapping windows, 6 -> 9 by windows of 1 and 2 pixels
    net.add(Conv2D(4, 3, 2))
    net.add(Flatten())
    net.add(Dense(5))
    return net.spec("parity-excite", (16, 16, 3), "cross_entropy", "", batch=4)


def layer_norms() -> ModelSpec:
    """A transformer's layers: layer norm over an image's channels and over flat features, exact and tanh GELU, layer
    scales on an image's channels (ConvNeXt's) and on flat features, reshapes image to image, image to flat (a dense
    after it reads channels-last rows) and flat to image."""
    return ModelSpec("parity-layernorm", (8, 8, 4), (
        Conv2D(6), LayerNorm(), GELU(), LayerScale(), Reshape((4, 4, 24)), LayerNorm(epsilon=1e-3),
        GELU(approximate=True), BatchNorm(), Reshape((384,)), Dense(16), LayerNorm(), LayerScale(),
        GELU(approximate=True), Reshape((2, 2, 4)), Conv2D(3, 1),
    ), "mse")


# The activations of `activations()`, in the order its output holds them (two channels each)
ACTIVATIONS = (GELU(), GELU(approximate=True), HardSwish(), HardSigmoid(), LeakyReLU(0.2), ELU(0.5), Softplus(),
               Mish())


def activations() -> ModelSpec:
    """Exact and tanh GELU, hard swish and hard sigmoid, leaky ReLU and ELU at slopes other than their defaults,
    softplus and mish, side by side as the output, on inputs spread to where they differ most (the GELUs about 5e-4
    near -2.7, where GELU is about -0.01) and across the hard ones' corners at -3 and 3: deeper in a net the
    difference is lost within the tolerance."""
    net = Graph()
    spread = net.add(Rescale(3.0))
    net.add(Concat(), *(net.add(layer, spread) for layer in ACTIVATIONS))
    return net.spec("parity-activations", (8, 8, 2), "mse", "", batch=4)


def dilated() -> ModelSpec:
    """The segmentation nets' atrous convs: dilated by 2 with its pixels of padding (torchvision's), a depthwise one
    'same' and a valid one by 3; 'same' over an even window (a 2x2 kernel dilated by 3 spans 4 pixels: one pixel
    before, two after, torch's copy padded unevenly)."""
    return ModelSpec("parity-dilated", (12, 12, 3), (
        Conv2D(6, 3, padding=2, dilation=2), Conv2D(6, 3, groups=6, dilation=2), ReLU(), Conv2D(4, 2, dilation=3),
        Conv2D(4, 3, padding="valid", dilation=3), Flatten(), Dense(5),
    ), "cross_entropy")


def dense_prediction() -> ModelSpec:
    """The segmentation and medical nets' layers: reflect and replicate padding, uneven, before valid convs (timm's
    blur pools), group norm in two groups and in one (PoolFormer's), instance norm with and without its scale and
    offset (MONAI's, torch's default), PReLU per channel and shared (MONAI's default), and per feature after a
    flatten (its slopes loaded in torch's channels-first order), transposed convs (the decoders' upsampling):
    grouped with padding and output_padding, depthwise of a kernel of another height than width, at stride 1, and
    Keras's 'same' (an odd kernel less stride cutting a pixel more after, and a kernel under the stride adding);
    resizes by a scale that is no integer (nearest, down; bilinear, up and down) and to a size with the corners
    aligned (DeepLabV3+'s); space-to-depth in ONNX's order and in torch's pixel_unshuffle's."""
    return ModelSpec("parity-dense-prediction", (9, 9, 3), (
        Pad2D(2, 1, 0, 3), Conv2D(8, 3, padding="valid"), GroupNorm(2), PReLU(),
        Pad2D(1, 0, 2, 1, mode="replicate"), Conv2D(8, 3, padding="valid"), InstanceNorm(affine=True),
        PReLU(shared=True), GroupNorm(1, epsilon=1e-3), InstanceNorm(epsilon=1e-3),
        ConvTranspose2D(6, 3, 2, padding=1, output_padding=1, groups=2),
        ConvTranspose2D(6, (2, 3), 2, groups=6, bias=False), ConvTranspose2D(4, 3, 1, padding=(1, 0)),
        ConvTranspose2D(4, (3, 4), 2, "same"), ConvTranspose2D(4, 1, 2, "same"),
        Resize2D(scale=0.7), Resize2D(size=(9, 7), interpolation="bilinear", align_corners=True),
        Resize2D(scale=(1.8, 1.2), interpolation="bilinear"), SpaceToDepth(2), SpaceToDepth(2, "channel_major"),
        Conv2D(2, 3), Flatten(), PReLU(), Dense(5),
    ), "cross_entropy")


def pyramid() -> ModelSpec:
    """Several outputs, as an FPN's levels and deep supervision have them: the coarse level is an output that the
    fine one reads too (upsampled and added to a lateral conv), a batch norm on each path; one mse per output,
    summed."""
    net = Graph()
    net.add(Conv2D(4, 3))
    net.add(BatchNorm())
    fine = net.add(ReLU())
    net.add(Conv2D(6, 3, 2), fine)
    coarse = net.add(BatchNorm())
    up = net.add(Upsample2D(2), coarse)
    net.add(Add(), up, net.add(Conv2D(6, 1), fine))
    net.add(BatchNorm())
    level = net.add(Conv2D(3, 3))
    return net.spec("parity-pyramid", (8, 8, 3), "mse", "an FPN's two levels", batch=4, outputs=(level, coarse))


def auxiliary() -> ModelSpec:
    """GoogLeNet's and Inception v3's auxiliary classifier as they train: logits from the middle of the trunk
    beside the main ones, one cross-entropy each, summed."""
    net = Graph()
    net.add(Conv2D(4, 3))
    middle = net.add(ReLU())
    net.add(GlobalAvgPool(), middle)
    aside = net.add(Dense(5))
    net.add(Conv2D(8, 3, 2), middle)
    net.add(ReLU())
    net.add(GlobalAvgPool())
    main = net.add(Dense(5))
    return net.spec("parity-auxiliary", (6, 6, 3), "cross_entropy", "main and auxiliary logits", batch=4,
                    outputs=(main, aside))


def flat_after_image(dropout: float) -> ModelSpec:
    """Per-feature weights after a flattened image, through layers that keep the values' order: torch flattens
    channels-first, so each of them loads (and reports) its weights permuted."""
    return ModelSpec("parity-flat", (4, 3, 2), (
        Conv2D(3), Flatten(), Dropout(dropout), BatchNorm(), LayerNorm(), Normalize(), LayerScale(), ReLU(), Dense(5),
    ), "cross_entropy")


def _arrays(spec: ModelSpec, batch: int) -> dict[str, np.ndarray]:
    generator = np.random.default_rng(7)
    arrays = {"inputs": generator.standard_normal((batch, *spec.input_shape), dtype=np.float32)}
    for step in spec.walk():
        for name, shape in step.weights.items():
            if name == "variance":  # running statistics a past training left: positive variances
                value = generator.uniform(0.5, 2.0, shape).astype(np.float32)
            elif name == "count":  # the examples normalize's statistics came from
                value = np.float32(1000)
            else:
                value = generator.standard_normal(shape, dtype=np.float32) * 0.3
            arrays[f"layer{step.index}_{name}"] = value
    for output, shape in enumerate(spec.output_shapes):
        arrays[f"targets{output}"] = (generator.integers(0, shape[0], batch).astype(np.int32)
                                      if spec.loss == "cross_entropy"
                                      else generator.standard_normal((batch, *shape), dtype=np.float32))
    return arrays


Results = dict[str, dict[str, np.ndarray]]  # per framework, what its forward job wrote
INFERENCE = [CLASSIFIER, HEATMAP, residual(0.5), dense_heatmap(0.25), excite(0.5), layer_norms(), activations(),
             dilated(), flat_after_image(0.5), dense_prediction(), auxiliary()]
TRAINING = [residual(0.0), dense_heatmap(0.0), excite(0.0), layer_norms(), flat_after_image(0.0), pyramid()]


def _dropout_net(per_example: bool) -> tuple[ModelSpec, dict[str, np.ndarray]]:
    shape, batch = ((2, 2, 2), 10_000) if per_example else ((20_000,), 4)
    name = "parity-dropout-per-example" if per_example else "parity-dropout"
    spec = ModelSpec(name, shape, (Dropout(0.3, per_example=per_example),), "mse")
    return spec, _arrays(spec, batch)


@pytest.fixture(scope="module")
def forwarded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Results]]:
    """Every net of this module in one worker per framework, each in its own mode (its arrays' `training`): per
    group (inference, training, dropout), per net, the results; a framework's import paid once for them all."""
    groups = {"inference": [(spec, _arrays(spec, batch=4)) for spec in INFERENCE],
              "training": [(spec, _arrays(spec, batch=4)) for spec in TRAINING],
              "dropout": [_dropout_net(False), _dropout_net(True)]}
    nets = [(spec, arrays | {"training": np.array(group != "inference")})
            for group, members in groups.items() for spec, arrays in members]
    results = iter(forward_all(nets, tmp_path_factory.mktemp("forward")))
    return {group: {spec.name: next(results) for spec, _ in members} for group, members in groups.items()}


@pytest.fixture(scope="module")
def inference(forwarded: dict[str, dict[str, Results]]) -> dict[str, Results]:
    return forwarded["inference"]


@pytest.fixture(scope="module")
def training(forwarded: dict[str, dict[str, Results]]) -> dict[str, Results]:
    return forwarded["training"]


def _assert_agree(results: dict[str, dict[str, np.ndarray]], spec: ModelSpec, keys: list[str]) -> None:
    """Every framework wrote the same keys, and the same values under `keys` ("outputs": each output)."""
    reference = next(iter(results.values()))
    outputs = [f"output{index}" for index in range(len(spec.output_shapes))]
    assert [reference[key].shape for key in outputs] == [(4, *shape) for shape in spec.output_shapes]
    assert all(np.abs(reference[key]).max() > 0.1 for key in outputs)  # a net of zeros would agree trivially
    keys = [name for key in keys for name in (outputs if key == "outputs" else [key])]
    for framework, result in results.items():
        assert sorted(result) == sorted(reference), framework
        for key in keys:
            np.testing.assert_allclose(result[key], reference[key], rtol=1e-4, atol=1e-4, err_msg=f"{framework} {key}")


@pytest.mark.parametrize("spec", INFERENCE, ids=lambda s: s.name)
def test_same_weights_give_the_same_outputs_and_loss_in_inference(spec: ModelSpec,
                                                                  inference: dict[str, Results]) -> None:
    """Running statistics normalize; dropout is the identity; the statistics do not move."""
    results = inference[spec.name]
    _assert_agree(results, spec, ["outputs", "loss"])
    given = _arrays(spec, batch=4)
    for key, value in results[FRAMEWORKS[0]].items():
        if key.startswith("statistics"):
            np.testing.assert_array_equal(value, given[key.replace("statistics", "layer")])


def test_hard_sigmoid_is_relu6_of_x_plus_3_over_6_in_every_framework(inference: dict[str, Results]) -> None:
    """The spec's hard sigmoid is relu6(x + 3) / 6 and hard swish x times it (Keras 3's, torch's, JAX's), not Keras
    2's or ONNX's default 0.2 x + 0.5: frameworks agreeing with each other would not show which."""
    spec = activations()
    x = 3.0 * _arrays(spec, batch=4)["inputs"]  # the net's Rescale(3.0)
    gate = np.clip(x + 3, 0, 6) / 6
    for framework, result in inference[spec.name].items():
        np.testing.assert_allclose(result["output0"][..., 4:8], np.concatenate([x * gate, gate], axis=-1), rtol=1e-6,
                                   atol=1e-6, err_msg=framework)


def test_leaky_relu_elu_softplus_and_mish_compute_their_formulas_in_every_framework(
        inference: dict[str, Results]) -> None:
    """Each framework's leaky ReLU takes the spec's slope and its ELU the spec's alpha (neither at its default:
    Keras's slope is 0.3, torch's 0.01), softplus is log(1 + exp(x)) (torch's threshold past 20 left unseen) and
    mish x * tanh(softplus(x)): frameworks agreeing with each other would not show a slope dropped by all."""
    spec = activations()
    x = 3.0 * _arrays(spec, batch=4)["inputs"].astype(np.float64)  # the net's Rescale(3.0)
    softplus = np.logaddexp(x, 0)
    expected = [np.where(x >= 0, x, 0.2 * x), np.where(x > 0, x, 0.5 * np.expm1(x)), softplus, x * np.tanh(softplus)]
    for framework, result in inference[spec.name].items():
        np.testing.assert_allclose(result["output0"][..., 8:], np.concatenate(expected, axis=-1), rtol=1e-5, atol=1e-6,
                                   err_msg=framework)


@pytest.mark.parametrize("spec", TRAINING, ids=lambda s: s.name)
def test_training_mode_agrees_and_updates_the_same_statistics(spec: ModelSpec, training: dict[str, Results]) -> None:
    """Batch statistics normalize; the running mean moves by `momentum` toward the batch's in every framework. The
    running variance too, except torch's: it takes the batch's unbiased variance (n / (n - 1) times the biased one
    that Keras and the jax adapter take, as flax does), which this test pins."""
    results = training[spec.name]
    means = [key for key in results[FRAMEWORKS[0]] if key.startswith("statistics") and key.endswith("_mean")]
    assert means, "the net has batch norm"
    _assert_agree(results, spec, ["outputs", "loss", *means])
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


@pytest.fixture(scope="module")
def dropped(forwarded: dict[str, dict[str, Results]]) -> dict[bool, Results]:
    """Both dropout nets (per value, per example), run in training mode."""
    return {per_example: forwarded["dropout"][_dropout_net(per_example)[0].name] for per_example in (False, True)}


@pytest.mark.parametrize("per_example", [False, True], ids=["per-value", "per-example"])
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_dropout_in_training_drops_its_rate_and_scales_the_rest(framework: str, per_example: bool,
                                                                 dropped: dict[bool, Results]) -> None:
    """Dropout's mask is each framework's own random draw, so training-mode parity runs at rate 0; here each
    framework's training-mode dropout is checked for what it must do: drop about `rate`, scale the rest by
    1 / (1 - rate); per example, each example's values all dropped or all kept (many examples, to count them)."""
    _, arrays = _dropout_net(per_example)
    batch = len(arrays["inputs"])
    output = dropped[per_example][framework]["output0"]
    inputs = arrays["inputs"]
    dropped_values = output == 0
    assert abs(dropped_values.mean() - 0.3) < 0.02
    np.testing.assert_allclose(output[~dropped_values], inputs[~dropped_values] / 0.7, rtol=1e-5)
    if per_example:
        by_example = dropped_values.reshape(batch, -1)
        assert (by_example.all(axis=1) | ~by_example.any(axis=1)).all()


def test_several_outputs_sum_one_loss_each(training: dict[str, Results], inference: dict[str, Results]) -> None:
    """A net of several outputs trains on the sum of one loss per output, equally weighted, in every framework: the
    loss each reports is the sum of the spec's loss of each output it returned against that output's targets."""
    for spec, results in ((pyramid(), training), (auxiliary(), inference)):
        given = _arrays(spec, batch=4)
        for framework, result in results[spec.name].items():
            outputs = [result[f"output{index}"].astype(np.float64) for index in range(len(spec.output_shapes))]
            targets = [given[f"targets{index}"] for index in range(len(spec.output_shapes))]
            if spec.loss == "mse":
                losses = [np.mean((out - target) ** 2) for out, target in zip(outputs, targets, strict=True)]
            else:
                shifted = [out - out.max(axis=1, keepdims=True) for out in outputs]
                losses = [np.mean(np.log(np.exp(out).sum(axis=1)) - out[np.arange(4), target])
                          for out, target in zip(shifted, targets, strict=True)]
            assert len(losses) == 2 and min(losses) > 0.01  # both outputs count, neither trivially
            np.testing.assert_allclose(result["loss"], sum(losses), rtol=1e-4, err_msg=framework)
