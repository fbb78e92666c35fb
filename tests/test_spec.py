"""The spec alone gives parameter counts, weight bytes and shapes; bad specs fail in one line."""

from __future__ import annotations

import pytest

from models.catalogue import KIND_COST_PROBES, get_model, listed_models
from models.layer_kinds import census, probe_kind
from models.spec import (
    Add,
    Concat,
    Conv2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    HardSwish,
    MaxPool2D,
    ModelSpec,
    ReLU,
    Sigmoid,
    SiLU,
    SpecError,
    same_padding,
    written_channels_last,
)


def test_keras200m_is_story_3s_net() -> None:
    spec = get_model("keras200m")
    assert spec.param_count == 206_538_153
    assert spec.weight_bytes() == 826_152_612
    assert sum(isinstance(layer, Conv2D) and layer.filters == 1024 for layer in spec.layers) == 22
    assert spec.output_shapes == ((1,),)


def test_vgg16_has_the_standard_count() -> None:
    spec = get_model("vgg16")
    assert spec.param_count == 138_357_544
    assert [s.output_shape for s in spec.walk() if isinstance(s.layer, Flatten)] == [(25088,)]


def test_keras_small_count_by_hand() -> None:
    # conv 1->100, 100->256, 256->32 (3x3, bias), pool to 8x8x32 = 2048, dense 4, dense 1
    by_hand = (9 * 1 * 100 + 100) + (9 * 100 * 256 + 256) + (9 * 256 * 32 + 32) + (2048 * 4 + 4) + (4 + 1)
    assert get_model("keras-small").param_count == by_hand == 313_617


def test_heatmap68_is_tiny_weights_big_maps() -> None:
    spec = get_model("heatmap68")
    assert spec.input_shape == (256, 256, 3)
    assert spec.output_shapes == ((64, 64, 68),)
    assert 1_000_000 <= spec.weight_bytes() <= 2_000_000
    largest_map = max(s.output_shape[0] * s.output_shape[1] * s.output_shape[2] for s in spec.walk()) * 4
    assert largest_map > spec.weight_bytes()


def test_each_kind_probe_holds_its_kind_and_the_probes_suite_runs_every_probe() -> None:
    """probe-conv has no dense layer (so cuDNN's workspace is not mixed with cuBLAS's) and probe-dense no conv; each
    stays at the probe's tiny size, and the probes suite runs every probe of the catalogue in both kinds."""
    from suites.bench.matrix import SUITES

    kinds = {name: {layer.kind for layer in get_model(name).layers}
             for name in ("probe-conv", "probe-dense", "probe-norm", "probe-pool")}
    assert kinds == {"probe-conv": {"conv2d"}, "probe-dense": {"dense"}, "probe-norm": {"batchnorm"},
                     "probe-pool": {"conv2d", "maxpool2d", "avgpool2d", "global_avg_pool"}}
    assert get_model("probe-conv").param_count == (9 * 1 * 2 + 2) + (1 * 2 * 1 + 1) == 23
    assert get_model("probe-dense").param_count == (64 * 2 + 2) + (2 * 1 + 1) == 133
    assert (get_model("probe-norm").param_count, get_model("probe-norm").statistics_count) == (2, 2)
    assert get_model("probe-pool").param_count == 2
    assert all(get_model(name).weight_bytes() < 1024 for name in kinds)
    probes = {spec.name for spec in listed_models() if spec.name.startswith("probe")}
    (every,), (by_kind,) = SUITES["probes"], SUITES["kinds"]
    assert set(every.models) == probes and every.without_pool and set(every.kinds) == {"train", "infer"}
    assert by_kind.models == KIND_COST_PROBES and by_kind.kinds == ("train",)


def test_a_kind_probe_holds_its_kind_distinct_or_repeating_and_every_spec_kind_is_costed_by_a_probed_one() -> None:
    """probe-kind-K: 16 blocks of a 3x3 conv and one layer of K, all distinct (widths 8 to 23) or, with -sameN, N
    identical blocks of which all but the first repeat (the second conv too: the first reads the 4-channel image);
    the global pool and the dense head are one distinct elementwise layer and one conv-like one."""
    assert census(get_model("probe-kind-batchnorm")) == {"conv": [17, 0], "batchnorm": [16, 0], "elementwise": [1, 0]}
    assert census(get_model("probe-kind-depthwise-same16")) == {"conv": [3, 14], "depthwise": [1, 15],
                                                               "elementwise": [1, 0]}
    assert census(get_model("probe-kind-elementwise-same16")) == {"conv": [3, 14], "elementwise": [2, 15]}
    assert census(get_model("probe-kind-conv-same8")) == {"conv": [3, 6], "elementwise": [1, 0]}
    assert {probe_kind(layer) for layer in (ReLU(), Add(), Concat(), MaxPool2D(2), Flatten())} == {"elementwise"}
    assert {probe_kind(cls()) for cls in (SiLU, Sigmoid, HardSwish)} == {"silu"}
    assert probe_kind(Conv2D(8, groups=8)) == "depthwise" and probe_kind(Dense(4)) == "conv"
    for bad in ("probe-kind-softmax", "probe-kind-conv-same0"):
        with pytest.raises(SpecError, match="valid"):
            get_model(bad)


def test_dropouts_that_differ_only_in_their_rate_are_compiled_alike() -> None:
    """EfficientNet's stochastic depth raises its per-example dropout's rate block by block: XLA's code takes the
    rate as a number, so each such dropout counts as a repeat of the first (on JAX's CPU 4.4 MiB each against 14 for
    a new layer, docs/estimate.md); a dropout of another shape or mask is another layer's code."""
    rising = tuple(layer for rate in (0.1, 0.2, 0.3) for layer in (Conv2D(8, padding=1), Dropout(rate, True)))
    spec = ModelSpec("stochastic-depth", (4, 4, 8), (*rising, Dropout(0.3), GlobalAvgPool(), Dropout(0.3, True)),
                     "mse")
    assert census(spec) == {"conv": [1, 2], "dropout": [3, 2], "elementwise": [1, 0]}
    assert spec.distinct_layers == 5


def test_plain_family_grows_by_one_conv_per_depth() -> None:
    per_conv = 9 * 64 * 64 + 64
    assert get_model("plain-16").param_count - get_model("plain-8").param_count == 8 * per_conv
    assert get_model("plain-3").name == "plain-3"
    for bad in ("plain-0", "plain-x", "plain"):
        with pytest.raises(SpecError, match="valid: keras200m"):
            get_model(bad)


def test_same_padding_puts_the_odd_pixel_after() -> None:
    assert same_padding(256, 3, 2) == (0, 1)
    assert same_padding(16, 3, 1) == (1, 1)
    assert same_padding(9, 3, 2) == (1, 1)


@pytest.mark.parametrize("spec", listed_models(), ids=lambda s: s.name)
def test_json_round_trip(spec: ModelSpec) -> None:
    assert ModelSpec.from_dict(spec.to_dict()) == spec


@pytest.mark.parametrize("data, message", [
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": [{"type": "conv3d"}]}, "unknown layer type"),
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": [{"type": "dense", "units": 2}]},
     "add a flatten layer"),
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "hinge", "layers": [{"type": "flatten"}]}, "loss must be"),
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "cross_entropy", "layers": [{"type": "relu"}]},
     "flat output"),
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": [{"type": "conv2d", "filters": 0}]},
     "positive integer"),
    ({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": [{"type": "flatten", "size": 3}]},
     "unknown flatten key"),
    ({"input_shape": [4], "loss": "mse", "layers": []}, "missing name"),
])
def test_bad_specs_fail_in_one_line(data: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        ModelSpec.from_dict(data)
    assert "\n" not in str(caught.value)


def _net(*layers: dict) -> dict:
    return {"name": "x", "input_shape": [4, 4, 2], "loss": "mse", "layers": list(layers)}


@pytest.mark.parametrize("data, message", [
    (_net({"type": "reshape", "shape": [5]}), r"layer 'layer0': reshape of \(4, 4, 2\) to \(5,\) changes the number"),
    (_net({"type": "reshape", "shape": [4, 8]}), "reshape.shape must be a list of 1 or 3 sizes"),
    (_net({"type": "conv2d", "filters": 3, "name": "a"}, {"type": "multiply", "inputs": ["input", "a"]}),
     r"multiply needs inputs of one rank whose sizes agree or are 1, got \(4, 4, 2\), \(4, 4, 3\)"),
    (_net({"type": "flatten", "name": "f"}, {"type": "multiply", "inputs": ["input", "f"]}), "multiply needs"),
    (_net({"type": "upsample2d", "interpolation": "bicubic"}), "upsample2d.interpolation must be one of nearest"),
    (_net({"type": "upsample2d", "scale": 0}), "upsample2d.scale must be a positive integer"),
    (_net({"type": "zeropad2d", "top": -1}), "zeropad2d.top must be pixels >= 0"),
    (_net({"type": "crop2d", "left": 1.5}), "crop2d.left must be pixels >= 0"),
    (_net({"type": "crop2d", "top": 3, "bottom": 1}), "crop2d removes 3 \\+ 1 of 4 rows or 0 \\+ 0 of 4 columns"),
    (_net({"type": "adaptive_avgpool2d", "size": [7, 0]}), "adaptive_avgpool2d.size must be an integer >= 1"),
    (_net({"type": "adaptive_avgpool2d"}), "adaptive_avgpool2d: .*missing 1 required .*'size'"),
    (_net({"type": "channel_slice", "start": 1, "stop": 3}), "channel_slice stops at channel 3 of an image of 2"),
    (_net({"type": "channel_slice", "start": 1, "stop": 1}), "channel_slice.stop must be past its start 1, got 1"),
    (_net({"type": "channel_slice", "start": -1, "stop": 1}), "channel_slice.start must be a channel >= 0"),
    (_net({"type": "channel_slice", "stop": 1}), "channel_slice: .* missing 1 required positional argument: 'start'"),
    (_net({"type": "channel_shuffle", "groups": 3}), "channel_shuffle of 2 channels into 3 groups: they do not"),
    (_net({"type": "channel_shuffle", "groups": 0}), "channel_shuffle.groups must be a positive integer"),
    (_net({"type": "gelu", "approximate": "yes"}), "gelu.approximate must be true or false"),
    (_net({"type": "leaky_relu", "negative_slope": -0.1}), "leaky_relu.negative_slope must be a number >= 0"),
    (_net({"type": "leaky_relu", "negative_slope": True}), "leaky_relu.negative_slope must be a number >= 0"),
    (_net({"type": "elu", "alpha": 0}), "elu.alpha must be a positive number"),
    (_net({"type": "conv2d", "filters": 2, "dilation": 0}), "conv2d.dilation must be a positive integer"),
    (_net({"type": "conv2d", "filters": 2, "stride": 2, "dilation": 2}), "conv2d.dilation 2 needs stride 1"),
    (_net({"type": "conv2d", "filters": 2, "kernel": 3, "dilation": 3, "padding": "valid"}),
     r"conv2d with window \(7, 7\) does not fit input \(4, 4, 2\)"),
    (_net({"type": "mish", "alpha": 1}), "unknown mish key"),
    (_net({"type": "layernorm", "epsilon": float("nan")}), "layernorm.epsilon must be a positive number"),
    (_net({"type": "batchnorm", "epsilon": float("inf")}), "batchnorm.epsilon must be a positive number"),
    (_net({"type": "avgpool2d", "pool": 3, "padding": 2}), "avgpool2d.padding must be pixels from 0 to half"),
    (_net({"type": "global_avg_pool", "keepdims": 1}), "global_avg_pool.keepdims must be true or false"),
    (_net({"type": "dropout", "per_example": "no"}), "dropout.per_example must be true or false"),
    (_net({"type": "rescale", "scale": float("inf")}), "rescale.scale must be a finite number"),
    (_net({"type": "normalize", "mean": [0, 0]}), "normalize.mean and normalize.variance must be given together"),
    (_net({"type": "normalize", "mean": ["a"], "variance": [1]}), "normalize.mean must be a list of numbers"),
    (_net({"type": "normalize", "count": 3}), "unknown normalize key"),
])
def test_bad_options_of_the_newer_layers_fail_in_one_line(data: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message) as caught:
        ModelSpec.from_dict(data)
    assert "\n" not in str(caught.value)


def test_an_unknown_key_names_its_layer_and_the_valid_keys() -> None:
    """The message alone must say where the mistake is and what to write instead, even for a layer with no options."""
    layers = [{"type": "conv2d", "filters": 2}, {"type": "flatten", "name": "flat", "rate": 0.5},
              {"type": "dense", "units": 1}]
    with pytest.raises(SpecError) as caught:
        ModelSpec.from_dict({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": layers})
    assert str(caught.value) == "layer 'flat': unknown flatten key(s) rate; valid: none"
    layers = [{"type": "conv2d", "filters": 2, "kernal": 3}]
    with pytest.raises(SpecError) as caught:
        ModelSpec.from_dict({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": layers})
    assert str(caught.value) == ("layer 0: unknown conv2d key(s) kernal; valid: bias, dilation, filters, groups, "
                                 "kernel, padding, stride")


def test_a_channels_first_image_is_refused_in_one_line() -> None:
    """[3, 32, 32] written by a person would otherwise run as a 3-pixel-high image of 32 channels, measuring another
    net; the same shape from an importer (which converted the file's layout) is what the file says."""
    spec = {"name": "x", "input_shape": [3, 32, 32], "loss": "mse",
            "layers": [{"type": "conv2d", "filters": 2}, {"type": "flatten"}, {"type": "dense", "units": 1}]}
    with pytest.raises(SpecError) as caught:
        written_channels_last(ModelSpec.from_dict(spec))
    assert str(caught.value) == ("input_shape is height, width, channels (channels last); [3, 32, 32] looks "
                                 "channels-first: give [32, 32, 3]")
    assert ModelSpec.from_dict(spec).input_shape == (3, 32, 32)  # what an importer builds: not second-guessed
    assert written_channels_last(ModelSpec.from_dict(spec | {"input_shape": [32, 32, 3]})).output_shapes == ((1,),)
    dense_only = {"name": "x", "input_shape": [3, 32, 32], "loss": "mse", "layers": [{"type": "flatten"}]}
    assert written_channels_last(ModelSpec.from_dict(dense_only)).output_shapes == ((3072,),)  # no conv: no order

def test_shapes_follow_the_layers() -> None:
    spec = ModelSpec("t", (12, 12, 3), (Conv2D(4, stride=2), MaxPool2D(3, stride=1), Flatten(), Dense(5)), "mse")
    assert [s.output_shape for s in spec.walk()] == [(6, 6, 4), (4, 4, 4), (64,), (5,)]
    assert spec.walk()[0].params == {"kernel": (3, 3, 3, 4), "bias": (4,)}


def test_an_adaptive_pool_tiles_uneven_windows_and_repeats_rows_to_upsample() -> None:
    """torch's windows: rows floor(i H / oh) to ceil((i + 1) H / oh), overlapping where oh does not divide H."""
    spec = ModelSpec.from_dict(_net({"type": "adaptive_avgpool2d", "size": [3, 6], "name": "pool"}))
    assert spec.walk()[0].output_shape == (3, 6, 2) and spec.walk()[0].params == {}
    rows, columns = spec.layers[0].averaging((7, 4, 2))
    third = 1 / 3
    assert rows == ((third,) * 3 + (0,) * 4, (0, 0) + (third,) * 3 + (0, 0), (0,) * 4 + (third,) * 3)
    assert columns == ((1, 0, 0, 0), (0.5, 0.5, 0, 0), (0, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0.5, 0.5), (0, 0, 0, 1))
    assert ModelSpec.from_dict(spec.to_dict()) == spec and spec.to_dict()["layers"][0]["size"] == (3, 6)
