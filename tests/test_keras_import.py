"""Keras models imported as specs: weights counted exactly as Keras counts them, Keras's own weights computing in
torch and JAX what they compute in Keras, and what has no counterpart refused."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from models.importers.files import load_spec_file
from models.importers.fixes import Fix
from models.importers.keras_file import canonical_weights, spec_from_keras
from models.spec import SpecError
from suites.run.registry import ROOT, interpreter
from tests.conftest import forward_all, run_cli

# One Keras process writes every file: nets of each mapped layer (as .keras and as to_json()), and nets the importer
# must refuse. For the nets compared (`reference`) it writes an npz of Keras's weights (`get_weights()` by layer), a
# batch, Keras's output (before the output's softmax, which the spec's cross-entropy applies) and Keras's loss. It
# prints Keras's own trainable and non-trainable counts.
BUILD = """
import json, sys
import numpy as np
import keras
from keras import layers
from keras.src.applications.convnext import LayerScale
from frameworks.keras_reference import layer_weights

out = sys.argv[1]
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
counts = {}


def saved(net, name):
    net.save(f"{out}/{name}.keras")
    open(f"{out}/{name}.json", "w").write(net.to_json())
    counts[name] = {"trainable": sum(int(np.prod(w.shape)) for w in net.trainable_weights),
                    "non_trainable": sum(int(np.prod(w.shape)) for w in net.non_trainable_weights),
                    "total": net.count_params()}
    return net


def reference(net, name, x, loss):
    # Keras's random kernels kept; every other array drawn (variances positive), so no scale or offset is trivial
    for layer in net.layers:
        values = []
        for variable in layer.weights:
            value, kind = keras.ops.convert_to_numpy(variable), variable.path.rsplit("/", 1)[-1]
            if "variance" in kind:
                value = rng.uniform(0.5, 2.0, value.shape).astype(value.dtype)
            elif "kernel" not in kind and kind != "count":
                value = (value + rng.normal(0.0, 0.2, value.shape)).astype(value.dtype)
            values.append(value)
        if values:
            layer.set_weights(values)
    if loss == "cross_entropy":
        net.layers[-1].activation = keras.activations.linear  # the scores the spec's output is; the loss's softmax
    result = net(x, training=False)
    results = [keras.ops.convert_to_numpy(each) for each in (result if isinstance(result, list) else [result])]
    if loss == "cross_entropy":
        targets = [rng.integers(0, each.shape[-1], len(x)).astype("int32") for each in results]
        function = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    else:
        targets = [rng.standard_normal(each.shape).astype("float32") for each in results]
        function = keras.losses.MeanSquaredError()
    value = sum(float(function(target, each)) for target, each in zip(targets, results))  # one loss per output
    np.savez(f"{out}/{name}.npz", inputs=x, **{f"targets{i}": target for i, target in enumerate(targets)},
             **{f"output{i}": each for i, each in enumerate(results)}, loss=value, **layer_weights(net))


x_in = keras.Input((17, 17, 3), name="image")
x = layers.ZeroPadding2D(1, name="pad")(x_in)
x = layers.Conv2D(8, 3, strides=2, padding="valid", use_bias=True, name="stem")(x)
x = layers.BatchNormalization(name="stem_bn")(x)
x = layers.ReLU(max_value=6.0, name="stem_relu6")(x)
y = layers.DepthwiseConv2D(3, padding="same", use_bias=False, name="dw")(x)
y = layers.BatchNormalization(momentum=0.9, epsilon=1e-3, name="dw_bn")(y)
y = layers.Activation("relu6", name="dw_relu6")(y)
y = layers.Conv2D(8, 1, activation="relu", name="pw")(y)
s = layers.Add(name="residual")([x, y])
c = layers.Concatenate(name="cat")([s, x])
c = layers.MaxPooling2D(2, name="pool")(c)
g = layers.GlobalAveragePooling2D(name="gap")(c)
g = layers.Dropout(0.2, name="drop")(g)
o = layers.Dense(10, activation="softmax", name="probs")(g)
net = keras.Model(x_in, o, name="net")
net.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
saved(net, "net")

net = saved(keras.applications.EfficientNetB0(weights=None, input_shape=(64, 64, 3), classes=10), "efficientnet")
reference(net, "efficientnet", rng.uniform(0, 255, (2, 64, 64, 3)).astype("float32"), "cross_entropy")

saved(keras.applications.MobileNetV3Small(weights=None, input_shape=(32, 32, 3), classes=10), "mobilenetv3")

x_in = keras.Input((16, 16, 3), name="image")  # ConvNeXt's: a Sequential stem, a block, keras.ops' residual add
stem = keras.Sequential([keras.Input((16, 16, 3)), layers.Conv2D(8, 2, strides=2, name="stem_conv"),
                         layers.LayerNormalization(epsilon=1e-6, name="stem_norm")], name="stem")
s = stem(x_in)
x = layers.Conv2D(8, 7, padding="same", groups=8, name="dwconv")(s)
x = layers.LayerNormalization(epsilon=1e-6, name="norm")(x)
x = layers.Dense(32, name="pwconv1")(x)
x = layers.Activation("gelu", name="gelu")(x)
x = LayerScale(1e-6, 8, name="scale")(layers.Dense(8, name="pwconv2")(x))
h_in = keras.Input((8, 8, 8))  # a functional head, nested too
head = keras.Model(h_in, layers.Dense(4, name="head_dense")(layers.GlobalAveragePooling2D(name="head_gap")(h_in)),
                   name="head")
net = saved(keras.Model(x_in, head(s + x), name="convnext_block"), "convnext")
reference(net, "convnext", rng.standard_normal((2, 16, 16, 3)).astype("float32"), "mse")

x_in = keras.Input((12, 12, 4), name="pixels")
a = layers.Rescaling(0.5, offset=-1.0, name="scale")(x_in)
a = layers.Normalization(mean=[0.1, -0.2, 0.3, 0.0], variance=[0.5, 2.0, 1.5, 1.0], name="fixed")(a)  # constants
a = layers.SeparableConv2D(6, 3, padding="same", depth_multiplier=2, activation="relu", name="sep")(a)
a = layers.ZeroPadding2D(1, name="max_pad")(a)
a = layers.MaxPooling2D(3, strides=2, name="max")(a)
b = layers.MaxPooling2D(3, strides=1, padding="same", name="max_same")(a)
b = layers.ZeroPadding2D(1, name="avg_pad")(b)
b = layers.AveragePooling2D(3, strides=1, name="avg")(b)
b = layers.AveragePooling2D(2, padding="same", name="avg_same")(b)
b = layers.UpSampling2D(2, interpolation="bilinear", name="up")(b)
b = layers.ReLU(6.0, name="gate_relu6")(layers.Conv2D(6, 1, name="gate_conv")(b) + 3.0) * (1.0 / 6.0)  # MobileNetV3's
c = layers.Dense(6, activation="swish", name="pixelwise")(a)
c = layers.Conv2D(6, 1, activation="hard_sigmoid", name="hard")(layers.Activation("hard_swish", name="hswish")(c))
g = layers.GlobalAveragePooling2D(keepdims=True, name="gap")(layers.Multiply(name="gate")([b, c]))
d = layers.MaxPooling2D(3, strides=2, padding="same", name="max_uneven")(c)  # 6x6 to 3x3, 1 pixel after
e = layers.AveragePooling2D(3, strides=2, padding="same", name="avg_uneven")(c)  # the same, left out of the mean
e = layers.AveragePooling2D(3, strides=1, padding="same", name="avg_inside")(e)  # NASNet's, Inception's
f = layers.Cropping2D(((1, 0), (1, 0)), name="shift")(layers.ZeroPadding2D(((0, 1), (0, 1)), name="shift_pad")(c))
f = layers.AveragePooling2D(1, strides=2, name="avg_shifted")(f)  # NASNet's reduction cell: the odd pixels, 3x3
h = layers.AdaptiveAveragePooling2D((8, 4), name="adaptive_grow")(c)  # 6 to 8 (windows of 1 and 2), 6 to 4
h = layers.AdaptiveAveragePooling2D(3, name="adaptive")(h)  # 8 to 3 (windows of 3, 4, 3), 4 to 3 (overlapping)
h = layers.Conv2D(6, 3, padding="same", dilation_rate=2, name="atrous")(h)  # the segmentation nets' dilated convs
h = layers.DepthwiseConv2D(3, padding="same", dilation_rate=2, name="atrous_dw")(h)  # both signs, for the activations
h = layers.ELU(0.5, name="elu")(layers.LeakyReLU(0.2, name="leaky")(h))
h = layers.Activation("leaky_relu", name="leaky_fn")(layers.ReLU(negative_slope=0.1, name="relu_leaky")(h))
h = layers.Activation("softplus", name="softplus")(layers.Activation("mish", name="mish")(h))
g = layers.Add(name="both")([g, layers.GlobalAveragePooling2D(keepdims=True, name="gap_uneven")(
    layers.Add(name="pools")([d, e, f, h]))])
g = layers.Dropout(0.3, noise_shape=(None, 1), name="drop")(layers.Reshape((-1,), name="flat")(g))
net = saved(keras.Model(x_in, layers.Dense(3, activation="sigmoid", name="out")(g), name="assorted"), "assorted")
reference(net, "assorted", rng.standard_normal((2, 12, 12, 4)).astype("float32"), "mse")

x_in = keras.Input((8, 8, 3), name="image")  # the dense-prediction nets' norms and activations
x = layers.Conv2D(8, 3, name="conv")(x_in)
x = layers.GroupNormalization(2, epsilon=1e-5, name="group")(x)
x = layers.PReLU(shared_axes=[1, 2], name="prelu")(x)
x = layers.GroupNormalization(-1, name="instance")(layers.Conv2D(8, 3, padding="same", name="conv2")(x))
x = layers.GroupNormalization(8, center=False, scale=False, name="instance_plain")(x)
x = aside = layers.PReLU(shared_axes=[1, 2, 3], name="prelu_shared")(x)  # an output read on (deep supervision's)
x = layers.Conv2DTranspose(4, 3, strides=2, padding="same", name="up_same")(x)  # an odd kernel less stride
x = layers.Conv2DTranspose(4, 2, strides=2, name="up")(x)  # U-Net's
x = layers.Resizing(9, 14, name="resize")(x)  # bilinear, down and up by no whole factor
x = layers.Resizing(18, 28, interpolation="nearest", name="twice")(x)
net = saved(keras.Model(x_in, [layers.Conv2D(2, 1, name="head")(x), aside], name="dense"), "dense")
reference(net, "dense", rng.standard_normal((2, 8, 8, 3)).astype("float32"), "mse")

@keras.saving.register_keras_serializable(package="user_nets")
class Backbone(keras.Model):  # a functional subclass, saved as its class: its config is its arguments
    def __init__(self, width=4, **kwargs):
        inputs = keras.Input((8, 8, 3))
        super().__init__(inputs, layers.Conv2D(width, 3)(inputs), **kwargs)
        self.width = width

    def get_config(self):
        return {"width": self.width, "name": self.name}


Backbone().save(f"{out}/registered.keras")

refused = {
    "prelu_rows": [keras.Input((4, 4, 2)), layers.PReLU(shared_axes=[1], name="rows")],
    "lstm": [keras.Input((5, 4)), layers.LSTM(3, name="lstm"), layers.Dense(1)],
    "softmax": [keras.Input((4,)), layers.Dense(3, activation="softmax", name="gate"), layers.Dense(2)],
    "max_same": [keras.Input((7, 8, 1)), layers.MaxPooling2D(2, padding="same", name="max")],  # H, W pad unlike
    "rescale": [keras.Input((4, 4, 3)), layers.Rescaling([0.5, 0.25, 1.0], name="per_channel")],
    "noise": [keras.Input((4, 4, 2)), layers.Dropout(0.5, noise_shape=(None, 1, 1, 2), name="channels")],
    "rms": [keras.Input((4,)), layers.LayerNormalization(rms_scaling=True, name="rms")],
    "first": [keras.Input((2, 6, 6)), layers.AdaptiveAveragePooling2D(4, "channels_first", name="first")],
}
for name, stack in refused.items():
    keras.Sequential(stack).save(f"{out}/{name}.keras")
shared = keras.Input((4, 4, 2))
block = keras.Sequential([layers.Conv2D(2, 1, name="inner")], name="block")  # one nested model called twice
keras.Model(shared, block(block(shared))).save(f"{out}/shared.keras")
query = keras.Input((5, 4))
keras.Model(query, layers.MultiHeadAttention(2, 4, name="attention")(query, query)).save(f"{out}/attention.keras")
keras.backend.clear_session()  # a keras.ops call takes no name: this one is the first Subtract, "subtract"
square = keras.Input((4,))
keras.Model(square, square - square).save(f"{out}/ops.keras")
print(json.dumps(counts))
"""
COMPARED = ("efficientnet", "convnext", "assorted", "dense")
COUNTED = ("net", "mobilenetv3", *COMPARED)  # MobileNetV3Small's layers compared through assorted's (its own forward
# in torch and JAX cost the tests about 10 s of CPU)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The folder of saved models and references, and Keras's counts per net, written once per module by Keras on
    TensorFlow: its eager initialisers compile nothing, where Keras on JAX compiles one program per weight shape
    (EfficientNetB0 took it ~12 s more). A .keras file holds no backend."""
    out = tmp_path_factory.mktemp("keras_models")
    quiet = {"KERAS_BACKEND": "tensorflow", "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([interpreter("keras-tensorflow"), "-c", BUILD, str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=os.environ | quiet)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def _layers(path: Path) -> dict[str, dict]:
    """Each spec layer's type and options (those not at their default), by name."""
    return {entry["name"]: {key: value for key, value in entry.items() if key not in ("name", "inputs")}
            for entry in load_spec_file(path).to_dict()["layers"]}


@pytest.mark.parametrize("name", COUNTED)
def test_counts_match_keras_exactly(built: tuple[Path, dict], name: str) -> None:
    out, counts = built
    spec = load_spec_file(out / f"{name}.keras")
    assert spec.param_count == counts[name]["trainable"]
    assert spec.statistics_count == counts[name]["non_trainable"]
    assert spec.param_count + spec.statistics_count == counts[name]["total"]


def test_efficientnet_b0_has_keras_counts(built: tuple[Path, dict]) -> None:
    """The numbers the issue gives, so the test's own Keras cannot drift them unseen."""
    spec = load_spec_file(built[0] / "efficientnet.keras")
    assert (spec.param_count + spec.statistics_count, spec.statistics_count) == (4_062_381, 42_023)


@pytest.mark.parametrize("name", COUNTED)
def test_saved_file_and_json_give_one_spec(built: tuple[Path, dict], name: str) -> None:
    out, _ = built
    assert load_spec_file(out / f"{name}.json") == load_spec_file(out / f"{name}.keras")


def test_mapping(built: tuple[Path, dict]) -> None:
    layers = _layers(built[0] / "net.keras")
    assert load_spec_file(built[0] / "net.keras").loss == "cross_entropy"  # compiled so; the softmax is the loss's
    assert layers["stem"]["padding"] == 1  # the ZeroPadding2D, folded in
    assert layers["dw"]["groups"] == 8 and layers["dw"]["filters"] == 8  # depthwise
    assert layers["stem_bn"]["momentum"] == 0.01  # torch's convention: 1 - Keras's 0.99
    assert layers["pw/relu"]["type"] == "relu"  # the conv's activation, as its own layer
    cat = next(entry for entry in load_spec_file(built[0] / "net.keras").to_dict()["layers"] if entry["name"] == "cat")
    assert cat["inputs"] == ["residual", "stem_relu6"]


def test_efficientnet_mapping(built: tuple[Path, dict]) -> None:
    spec, layers = load_spec_file(built[0] / "efficientnet.keras"), _layers(built[0] / "efficientnet.keras")
    assert spec.loss == "cross_entropy" and "predictions/softmax" not in layers  # uncompiled, a softmax output
    assert layers["stem_conv_pad"] == {"type": "zeropad2d", "bottom": 1, "right": 1}
    assert layers["stem_conv"]["padding"] == "valid"  # the uneven padding stays its own layer
    assert layers["normalization"]["type"] == "normalize" and layers["rescaling"]["type"] == "rescale"
    assert layers["stem_activation"]["type"] == "silu" and layers["block1a_se_expand/sigmoid"]["type"] == "sigmoid"
    assert layers["block1a_se_reshape"]["shape"] == (1, 1, 32)
    assert layers["block1a_se_excite"]["type"] == "multiply"
    assert layers["block2b_drop"]["per_example"] is True and "per_example" not in layers["top_dropout"]


# MobileNetV3's hard sigmoid, layers.ReLU(6.0)(x + 3.0) * (1.0 / 6.0): keras.ops' Add and Multiply of a number
KERAS_HARD_SIGMOID = [{"type": "rescale", "offset": 3.0}, {"type": "relu6"}, {"type": "rescale", "scale": 1 / 6}]


def _readers(path: Path, layer: str, count: int) -> list[dict]:
    """The type and options of the `count` spec layers from a named one on, each the first reader of the one before:
    Keras numbers the layers it names itself (a keras.ops call) per process, so they are found by what they read."""
    spec = load_spec_file(path)
    steps, entries = spec.walk(), spec.to_dict()["layers"]
    at, found = next(step.index for step in steps if step.name == layer), []
    for _ in range(count):
        at = next(step.index for step in steps if at in step.inputs)
        found.append({key: value for key, value in entries[at].items() if key not in ("name", "inputs")})
    return found


def test_mobilenetv3_mapping(built: tuple[Path, dict]) -> None:
    """hard_silu as an Activation layer; the squeeze-and-excite's hard sigmoid, relu6(x + 3.0) * (1 / 6), as keras.ops
    Add and Multiply of a number around a ReLU(6.0): rescales, exactly what Keras computes."""
    path = built[0] / "mobilenetv3.keras"
    first = load_spec_file(path).layers[0]
    assert (first.kind, first.scale, first.offset) == ("rescale", 1 / 127.5, -1.0)
    assert _readers(path, "conv_bn", 1) == [{"type": "hard_swish"}]
    assert _readers(path, "expanded_conv_squeeze_excite_conv_1", 4) == [*KERAS_HARD_SIGMOID, {"type": "multiply"}]


def test_keras_2_hard_sigmoid_is_refused(built: tuple[Path, dict]) -> None:
    """Keras 2's hard_sigmoid is 0.2 x + 0.5 clipped, not Keras 3's relu6(x + 3) / 6: its to_json() says which."""
    data = json.loads((built[0] / "assorted.json").read_text()) | {"keras_version": "2.15.0"}
    with pytest.raises(SpecError, match=r"layer 'hard' \(Conv2D\) uses Keras 2.15.0's hard_sigmoid, max\(0, min\(1, "
                                        r"0.2 x \+ 0.5\)\)"):
        spec_from_keras(data, "assorted.json")


def test_convnext_mapping(built: tuple[Path, dict]) -> None:
    """keras.applications' ConvNeXt's own pieces: its Sequential stem and a functional head flattened into the graph
    (their layers named `model/layer`), its LayerScale, its residual `inputs + x` (keras.ops' Add of two tensors)."""
    layers = _layers(built[0] / "convnext.keras")
    assert layers["stem/stem_conv"] == {"type": "conv2d", "filters": 8, "kernel": 2, "stride": 2, "padding": "valid"}
    assert layers["stem/stem_norm"] == {"type": "layernorm", "epsilon": 1e-6} and "stem" not in layers
    assert layers["dwconv"]["groups"] == layers["dwconv"]["filters"] == 8 and layers["dwconv"]["kernel"] == 7
    assert layers["norm"] == {"type": "layernorm", "epsilon": 1e-6}
    assert layers["pwconv1"] == {"type": "conv2d", "filters": 32, "kernel": 1, "padding": "valid"}  # Dense per pixel
    assert layers["gelu"] == {"type": "gelu"}  # Keras's gelu is the exact one
    assert layers["scale"] == {"type": "layerscale"}
    entries = load_spec_file(built[0] / "convnext.keras").to_dict()["layers"]
    (residual,) = (entry for entry in entries if entry["type"] == "add")
    assert residual["inputs"] == ["stem/stem_norm", "scale"]
    assert [entry["name"] for entry in entries[-2:]] == ["head/head_gap", "head/head_dense"]  # the head: the output


def test_assorted_mapping(built: tuple[Path, dict]) -> None:
    layers = _layers(built[0] / "assorted.keras")
    assert layers["scale"] == {"type": "rescale", "scale": 0.5, "offset": -1.0}
    assert layers["fixed"] == {"type": "normalize", "mean": (0.1, -0.2, 0.3, 0.0), "variance": (0.5, 2.0, 1.5, 1.0)}
    assert layers["sep/depthwise"] == {"type": "conv2d", "filters": 8, "groups": 4, "bias": False}
    assert layers["sep/pointwise"]["kernel"] == 1 and "bias" not in layers["sep/pointwise"]
    assert layers["max"]["padding"] == 1  # a zero pad of a ReLU's output: minus infinity would give the same
    assert layers["max_same"]["padding"] == 1 and layers["max_same"]["stride"] == 1
    assert layers["avg"]["padding"] == 1 and "padding" not in layers["avg_same"]  # 'same' that pads nothing
    assert layers["max_uneven"] == {"type": "maxpool2d", "pool": 3, "stride": 2, "ceil_mode": True}  # 0 + 1 after
    assert layers["avg_uneven"] == {"type": "avgpool2d", "pool": 3, "stride": 2, "ceil_mode": True,
                                    "count_include_pad": False}
    assert layers["avg_inside"] == {"type": "avgpool2d", "pool": 3, "stride": 1, "padding": 1,
                                    "count_include_pad": False}
    assert layers["shift_pad"] == {"type": "zeropad2d", "bottom": 1, "right": 1}  # NASNet's one-pixel shift
    assert layers["shift"] == {"type": "crop2d", "top": 1, "left": 1}
    assert layers["adaptive_grow"] == {"type": "adaptive_avgpool2d", "size": (8, 4)}
    assert layers["adaptive"] == {"type": "adaptive_avgpool2d", "size": 3}
    assert layers["atrous"] == {"type": "conv2d", "filters": 6, "dilation": 2}
    assert layers["atrous_dw"] == {"type": "conv2d", "filters": 6, "groups": 6, "dilation": 2}
    assert layers["leaky"] == {"type": "leaky_relu", "negative_slope": 0.2} and layers["elu"] == {"type": "elu",
                                                                                                   "alpha": 0.5}
    assert layers["relu_leaky"] == {"type": "leaky_relu", "negative_slope": 0.1}  # Keras's ReLU with a slope
    assert layers["leaky_fn"] == {"type": "leaky_relu", "negative_slope": 0.2}  # the activation's own default
    assert layers["mish"] == {"type": "mish"} and layers["softplus"] == {"type": "softplus"}
    assert layers["up"]["interpolation"] == "bilinear" and layers["hard/hard_sigmoid"] == {"type": "hard_sigmoid"}
    assert layers["hswish"] == {"type": "hard_swish"} and layers["gate_relu6"] == {"type": "relu6"}
    assert _readers(built[0] / "assorted.keras", "gate_conv", 3) == KERAS_HARD_SIGMOID
    assert layers["pixelwise"]["type"] == "conv2d" and layers["pixelwise/silu"]["type"] == "silu"
    assert layers["gap"]["keepdims"] is True and layers["flat"]["shape"] == (6,)
    assert layers["drop"]["per_example"] is True and "max_pad" not in layers and "avg_pad" not in layers


def test_group_normalization_prelu_and_conv2d_transpose_mapping(built: tuple[Path, dict]) -> None:
    """Keras's GroupNormalization is a group norm, or at a channel a group (groups -1 or the channels) an instance
    norm, learning its scale and offset or neither; PReLU shared over the pixels has a slope per channel;
    Conv2DTranspose 'same' is the spec's, 'valid' torch's padding 0 and Keras's output_padding; Resizing bilinear is
    resize2d, nearest by a whole factor upsample2d."""
    layers = _layers(built[0] / "dense.keras")
    assert layers["group"] == {"type": "groupnorm", "groups": 2}
    assert layers["instance"] == {"type": "instancenorm", "epsilon": 1e-3, "affine": True}
    assert layers["instance_plain"] == {"type": "instancenorm", "epsilon": 1e-3}
    assert layers["prelu"] == {"type": "prelu"} and layers["prelu_shared"] == {"type": "prelu", "shared": True}
    assert layers["up_same"] == {"type": "conv_transpose2d", "filters": 4, "kernel": 3, "padding": "same"}
    assert layers["up"] == {"type": "conv_transpose2d", "filters": 4}  # kernel 2, stride 2, Keras's defaults
    assert layers["resize"] == {"type": "resize2d", "size": (9, 14), "interpolation": "bilinear"}
    assert layers["twice"] == {"type": "upsample2d"}  # nearest by a whole factor: each pixel repeated


def test_a_zero_pad_folds_into_a_max_pool_only_over_values_never_negative(built: tuple[Path, dict]) -> None:
    """Keras's zeros can win a max where the spec's padding (minus infinity) would not: over a linear conv's output
    the padding stays a layer of its own."""
    data = json.loads((built[0] / "assorted.json").read_text())
    next(layer for layer in data["config"]["layers"] if layer["config"]["name"] == "sep")["config"]["activation"] = \
        "linear"
    layers = {entry["name"]: entry for entry in spec_from_keras(data, "assorted.json").to_dict()["layers"]}
    assert layers["max_pad"]["type"] == "zeropad2d" and "padding" not in layers["max"]


def _keras_reference(path: Path) -> tuple[dict[str, np.ndarray], dict[str, list[np.ndarray]]]:
    """The reference's batch, output and loss, and Keras's weights by layer in get_weights() order."""
    stored = np.load(path)
    weights: dict[str, dict[int, np.ndarray]] = {}
    for key in stored.files:
        if key.startswith("weights:"):
            layer, index = key.removeprefix("weights:").rsplit(":", 1)
            weights.setdefault(layer, {})[int(index)] = stored[key]
    given = {key: stored[key] for key in stored.files if not key.startswith("weights:")}
    return given, {layer: [values[i] for i in sorted(values)] for layer, values in weights.items()}


@pytest.fixture(scope="module")
def compared(built: tuple[Path, dict], tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[dict, dict]]:
    """Each compared net with Keras's own weights (canonical_weights) run forward in torch and JAX, every net in one
    worker per framework: per net, Keras's reference and each framework's results."""
    nets, references = [], []
    for name in COMPARED:
        spec = load_spec_file(built[0] / f"{name}.keras")
        given, weights = _keras_reference(built[0] / f"{name}.npz")
        targets = {key: value for key, value in given.items() if key.startswith("targets")}
        arrays = {"inputs": given["inputs"], **targets, **canonical_weights(spec, weights)}
        assert len(targets) == len(spec.output_layers), name
        assert len(arrays) - 1 - len(targets) == sum(len(step.weights) for step in spec.walk()), name  # every array
        # the spec holds
        nets.append((spec, arrays))
        references.append(given)
    results = forward_all(nets, tmp_path_factory.mktemp("compared"), frameworks_run=("torch", "jax"))
    return dict(zip(COMPARED, zip(references, results, strict=True), strict=True))


@pytest.mark.parametrize("name", COMPARED)
def test_keras_weights_compute_what_keras_computes(compared: dict[str, tuple[dict, dict]], name: str) -> None:
    """Keras's own weights, loaded through canonical_weights into torch and JAX, give Keras's outputs (the dense
    net's two, one read on) and loss (one per output, summed)."""
    given, results = compared[name]
    outputs = [key for key in given if key.startswith("output")]
    assert len(outputs) == (2 if name == "dense" else 1)
    for framework, result in results.items():
        for key in outputs:
            assert np.abs(given[key]).max() > 0.1  # a net of zeros would agree trivially
            np.testing.assert_allclose(result[key], given[key], rtol=1e-4, atol=1e-4, err_msg=f"{framework} {key}")
        np.testing.assert_allclose(result["loss"], given["loss"], rtol=1e-4, err_msg=framework)


def test_canonical_weights_name_what_is_missing_or_misshapen(built: tuple[Path, dict]) -> None:
    spec = load_spec_file(built[0] / "convnext.keras")
    _, weights = _keras_reference(built[0] / "convnext.npz")
    with pytest.raises(ValueError, match="no weights given for Keras layer 'norm'"):
        canonical_weights(spec, {layer: values for layer, values in weights.items() if layer != "norm"})
    with pytest.raises(ValueError, match="spec layer 'pwconv1' holds"):
        canonical_weights(spec, weights | {"pwconv1": weights["pwconv2"]})


@pytest.mark.parametrize(("name", "layer"), [
    ("lstm", "'lstm' (LSTM)"), ("attention", "'attention' (MultiHeadAttention)"), ("softmax", "'gate' (Dense)"),
    ("max_same", "'max' (MaxPooling2D)"),
    ("rescale", "'per_channel' (Rescaling)"),
    ("noise", "'channels' (Dropout)"), ("rms", "'rms' (LayerNormalization)"), ("ops", "'subtract' (Subtract)"),
    ("first", "'first' (AdaptiveAveragePooling2D)"), ("prelu_rows", "'rows' (PReLU)"),
    ("shared", "'block' (Sequential)")])
def test_refused_in_one_line(built: tuple[Path, dict], name: str, layer: str) -> None:
    path = built[0] / f"{name}.keras"
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: layer {layer} ") and "\n" not in str(error.value)


def test_a_registered_class_is_refused_naming_its_package_and_the_rewrap(built: tuple[Path, dict]) -> None:
    """A functional subclass saved as its class (keras-hub's backbones are) holds its arguments, not its layers: only
    its package builds it, and the suite never imports a package a file names (but the Keras team's, which Keras
    imports itself: suites/run/keras_rewrap.py), so it is refused in one line with the rewrap that imports."""
    path = built[0] / "registered.keras"
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value) == f"{path}: a registered Keras class, user_nets>Backbone (user_nets): its config holds " \
                               f"the arguments it is built with, not its layers; fix: {Fix.KERAS_REWRAP}"


def test_a_keras_hub_class_where_keras_hub_is_missing_is_refused_naming_it(tmp_path: Path) -> None:
    """A keras-hub backbone saved as itself: Keras builds it where keras-hub is installed (`make zoo`'s env); in an
    interpreter without it, the command says so in one line, and measures nothing."""
    path = tmp_path / "backbone.keras"
    config = {"module": "keras_hub.src.models.resnet.resnet_backbone", "class_name": "ResNetBackbone",
              "registered_name": "keras_hub>ResNetBackbone", "config": {"name": "res_net_backbone"}}
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("config.json", json.dumps(config))
        archive.writestr("metadata.json", json.dumps({"keras_version": "3.15.1"}))
    keras_env = interpreter("keras-tensorflow")
    without = os.environ | {"FOOTPRINT_PYTHON_ZOO_KERAS": keras_env}  # the bench's Keras: no keras-hub
    done = subprocess.run([sys.executable, "-m", "suites", "estimate", "--model-file", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=without)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        f"python -m suites: error: {path}: a registered Keras class of keras_hub, which Keras could not build as a "
        f"functional model: keras_hub is not installed beside Keras here ({Path(keras_env).parents[1]}): `make zoo` "
        f"installs it in .tox/zoo-keras"]


def test_cli_estimates_a_keras_file_and_refuses_an_lstm(built: tuple[Path, dict]) -> None:
    out, _ = built
    assert run_cli("estimate", "--model-file", str(out / "net.keras")).returncode == 0
    refused = run_cli("estimate", "--model-file", str(out / "lstm.keras"))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "layer 'lstm' (LSTM) has no counterpart in the spec" in lines[0]


@pytest.mark.parametrize(("name", "framework", "scenario"), [
    ("net", "torch", "train"), ("net", "jax", "train"), ("efficientnet", "torch", "infer"),
    ("convnext", "jax", "infer")])
def test_an_imported_keras_net_runs_in_a_framework_it_did_not_come_from(built: tuple[Path, dict], name: str,
                                                                       framework: str, scenario: str) -> None:
    path = built[0] / f"{name}.keras"
    done = run_cli("run", "--framework", framework, "--model-file", str(path), "--device", "cpu", "--scenario",
                   scenario, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["status"] == "ok", record
    assert record["framework"]["param_count"] == load_spec_file(path).param_count  # as the net built


def test_check_proves_a_keras_file_and_counts_a_to_json(built: tuple[Path, dict]) -> None:
    """`models --check`: on a `.keras` file, Keras's own counts and output (its softmax left to the loss) against the
    imported net with the file's weights in torch and JAX, and how far float32's rounding moves Keras's own answer;
    on to_json()'s JSON, which holds no weights, the counts; on a net of two outputs, both."""
    out, counts = built
    done = run_cli("models", "--model-file", str(out / "net.keras"), "--model-file", str(out / "net.json"),
                   "--model-file", str(out / "dense.keras"), "--check")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    trainable, statistics = counts["net"]["trainable"], counts["net"]["non_trainable"]
    equal = (f"  counts            the spec's {trainable:,} trainable + {statistics:,} statistics, Keras's "
             f"{trainable:,} + {statistics:,}: equal")
    assert lines[0].startswith(f"{out / 'net.keras'}: the imported net with the file's weights against Keras")
    assert lines[1] == equal and lines[5:7] == [f"{out / 'net.json'}: counts against Keras (no weights in it)", equal]
    assert lines[-1] == "checked 3 files: 3 proved"
    dense = lines.index(next(line for line in lines if line.startswith(f"{out / 'dense.keras'}: ")))
    for line, framework in [*zip(lines[2:4], ("torch", "jax"), strict=True),
                            *zip(lines[dense + 2:dense + 4], ("torch", "jax"), strict=True)]:
        found = re.fullmatch(rf"  {framework} +largest difference (\S+) \(outputs up to (\S+)\): agrees", line)
        assert found and float(found[2]) > 0.01 and float(found[1]) <= 1e-4 * float(found[2]), line
    # Keras's own float64 answer: float32's rounding alone moves this net's output by far less than the tolerance
    rounding = re.fullmatch(r"  Keras float64 +its own float32 answer is (\S+) of its largest value from its float64 "
                            r"one: within the tolerance, so a difference past it is the import's", lines[4])
    assert rounding and 0 < float(rounding[1]) < 1e-5, lines[4]
