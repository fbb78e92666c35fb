"""ONNX models imported as specs: the initializers that become weights counted exactly, the same outputs as the ONNX
graph itself (onnxruntime) in torch and JAX, and what has no counterpart refused."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from models.importers import onnx_external
from models.importers.files import load_spec_file
from models.importers.fixes import Fix
from models.importers.onnx_file import canonical_weights
from models.spec import LeakyReLU, SpecError
from tests.conftest import run_cli

CONSTANT = "const_"  # the initializers that shape the computation (Reshape's shape, Resize's scales...): not weights
Build = Callable[[], tuple[onnx.ModelProto, str]]  # a net, and the name of its output before any softmax
EXPORTS = Path(__file__).parent / "data" / "torch_exports"  # a small net exported by PyTorch (export.py there)
TRAINING_GRAPHS = ("default_unoptimized", "legacy_preserve")  # the two exports that keep the batch norms
SHUFFLES = ("shuffle", "shuffle_legacy")  # ShuffleNet v2's block by the default exporter and by the legacy one


class _Net:
    """An ONNX graph written node by node, with random initializers (positive variances, as training leaves)."""

    def __init__(self, channels: int, size: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.input = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", channels, size, size])
        self.generator = np.random.default_rng(3)

    def weight(self, name: str, *shape: int, positive: bool = False) -> str:
        value = (self.generator.uniform(0.5, 2.0, shape) if positive
                 else self.generator.standard_normal(shape) * 0.3).astype(np.float32)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def constant(self, name: str, value: list, dtype: type = np.int64) -> str:
        self.initializers.append(numpy_helper.from_array(np.array(value, dtype=dtype), CONSTANT + name))
        return CONSTANT + name

    def node(self, op: str, inputs: list[str], name: str, **attributes: object) -> str:
        self.nodes.append(helper.make_node(op, inputs, [name], name=name, **attributes))
        return name

    def conv(self, x: str, name: str, out: int, cin: int, kernel: int, bias: bool = True, **attributes: object) -> str:
        weights = [self.weight(f"{name}.W", out, cin // attributes.get("group", 1), kernel, kernel)]
        return self.node("Conv", [x, *weights, *([self.weight(f"{name}.B", out)] if bias else [])], name,
                         kernel_shape=[kernel, kernel], **attributes)

    def batchnorm(self, x: str, name: str, channels: int) -> str:
        inputs = [self.weight(f"{name}.{part}", channels, positive=part in ("scale", "var"))
                  for part in ("scale", "B", "mean", "var")]
        return self.node("BatchNormalization", [x, *inputs], name, epsilon=1e-3, momentum=0.9)

    def model(self, output: str, classes: int | None, opset: int) -> onnx.ModelProto:
        shape = ["N", classes] if classes else None
        graph = helper.make_graph(self.nodes, "net", [self.input],
                                  [helper.make_tensor_value_info(output, TensorProto.FLOAT, shape)], self.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        onnx.checker.check_model(model)
        return model


def residual_net() -> tuple[onnx.ModelProto, str]:
    """The issue's graph: conv, batch norm, relu, a residual add, a padded max pool, global pooling, flatten, gemm."""
    net = _Net(3, 12)
    x = net.node("Relu", [net.batchnorm(net.conv("image", "stem", 8, 3, 3, strides=[2, 2], pads=[1, 1, 1, 1]),
                                        "stem_bn", 8)], "stem_relu")
    y = net.batchnorm(net.conv(x, "conv", 8, 8, 3, bias=False, pads=[1, 1, 1, 1]), "conv_bn", 8)
    x = net.node("Relu", [net.node("Add", [x, y], "residual")], "residual_relu")
    x = net.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat")
    x = net.node("Gemm", [x, net.weight("fc.W", 5, 8), net.weight("fc.B", 5)], "fc", transB=1)
    return net.model(x, 5, 14), x  # 14: the first opset whose BatchNormalization is inference unless told


def newer_net() -> tuple[onnx.ModelProto, str]:
    """The newer kinds: an uneven Pad folded before a conv, clip (relu6), a squeeze-and-excite block (reshapes,
    sigmoid, a per-channel Mul), x * sigmoid(x) (silu), concat, ShuffleNetV2's torch.chunk as the default exporter
    writes it (SplitToSequence, SequenceAt) and as the legacy one does (Split), Slices of the channels,
    torchvision's channel shuffle (Reshape, Transpose, Identity, Reshape), nearest and linear resize, a Slice of
    height and width (a crop), padded average pools (counting the padding, and not), a max pool rounding up
    (ceil_mode), a depthwise conv, HardSwish, x * HardSigmoid(x) (torch's Hardswish before opset 14) and HardSigmoid
    as torch exports it (alpha 1/6), layer scales (a Mul by a (C, 1, 1) initializer, and by a (C,) one
    channels-last), layer norm over channels (between transposes) and over features, gelu, the flatten of a real map
    into a MatMul + Add, dropout, and a softmax at the output.
    Returns the model and its pre-softmax scores' name."""
    net = _Net(3, 8)
    x = net.node("Pad", ["image", net.constant("pads", [0, 0, 0, 1, 0, 0, 1, 0])], "pad")  # top 0 left 1 bottom 1
    x = net.node("Clip", [net.conv(x, "stem", 8, 3, 3, strides=[2, 2]), net.constant("zero", 0.0, np.float32),
                          net.constant("six", 6.0, np.float32)], "stem_relu6")  # 8 -> 4
    s = net.node("Reshape", [net.node("GlobalAveragePool", [x], "se_gap"), net.constant("flat", [0, -1])], "se_flat")
    s = net.node("Relu", [net.node("Gemm", [s, net.weight("se1.W", 4, 8), net.weight("se1.B", 4)], "se1",
                                   transB=1)], "se_relu")
    s = net.node("Sigmoid", [net.node("Gemm", [s, net.weight("se2.W", 4, 8)], "se2")], "se_gate")
    s = net.node("Mul", [x, net.node("Reshape", [s, net.constant("map", [-1, 8, 1, 1])], "se_map")], "se")
    g = net.conv(x, "grouped", 8, 8, 1, group=2)
    g = net.node("Mul", [g, net.node("Sigmoid", [g], "swish_gate")], "swish")
    x = net.node("Concat", [s, g], "cat", axis=1)  # 16 channels
    parts = net.node("SplitToSequence", [x, net.constant("half", 8)], "chunk", axis=1)
    x = net.node("Concat", [net.node("SequenceAt", [parts, net.constant("last", -1)], "half1"),
                            net.node("Relu", [net.node("SequenceAt", [parts, net.constant("first", 0)], "half0")],
                                     "half0_relu")], "swap", axis=1)
    x = net.node("Reshape", [x, net.constant("grouped", [0, 2, 8, 4, 4])], "view", allowzero=0)
    x = net.node("Identity", [net.node("Transpose", [x], "transpose", perm=[0, 2, 1, 3, 4])], "clone")
    x = net.node("Reshape", [x, net.constant("back", [0, 16, 4, 4])], "view_back")  # a channel shuffle of 2 groups
    net.nodes.append(helper.make_node("Split", [x, net.constant("sizes", [4, 12])], ["split0", "split1"], "split",
                                      axis=1))
    x = net.node("Concat", ["split1", net.node("Slice", ["split0", net.constant("second", [1]),
                                                         net.constant("end", [2**63 - 1]), net.constant("c", [1])],
                                               "rest"),
                            net.node("Slice", ["split0", net.constant("zeroth", [0]), net.constant("one", [1]),
                                               net.constant("c_last", [-3])], "one")], "rotate", axis=1)  # 16
    x = net.node("Resize", [x, "", net.constant("twice", [1, 1, 2, 2], np.float32)], "up", mode="nearest")  # 8
    x = net.node("Slice", [x, net.constant("from", [1, 0]), net.constant("to", [2**63 - 1, -1]),
                           net.constant("hw", [2, 3])], "crop")  # 7: the first row and the last column cut off
    x = net.node("AveragePool", [x], "avg", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                 count_include_pad=1)  # 4
    x = net.node("HardSwish", [net.conv(x, "depthwise", 16, 16, 3, group=16, pads=[1, 1, 1, 1])], "hswish")
    x = net.node("Mul", [net.weight("scale.gamma", 16, 1, 1), x], "scale")  # torchvision's ConvNeXt's layer_scale
    x = net.node("Transpose", [x], "to_last", perm=[0, 2, 3, 1])
    x = net.node("LayerNormalization", [x, net.weight("ln.scale", 16), net.weight("ln.B", 16)], "ln", epsilon=1e-3)
    x = net.node("Mul", [x, net.weight("scale_last.gamma", 16)], "scale_last")  # channels-last: (C,)
    x = net.node("Transpose", [x], "to_first", perm=[0, 3, 1, 2])
    x = net.node("Resize", [x, "", net.constant("again", [1, 1, 2, 2], np.float32)], "smooth", mode="linear")  # 8
    x = net.node("Mul", [x, net.node("HardSigmoid", [x], "hswish_gate", alpha=1 / 6)], "hswish13")
    x = net.node("AveragePool", [x], "inside", kernel_shape=[3, 3], pads=[1, 1, 1, 1])  # padding not counted
    x = net.node("MaxPool", [x], "pool", kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)  # 4, rounded up: a real
    # map to flatten, its last window one pixel over the edge
    x = net.node("Flatten", [net.node("HardSigmoid", [x], "hsigmoid", alpha=1 / 6, beta=0.5)], "flat")
    x = net.node("Dropout", [x, net.constant("ratio", 0.25, np.float32)], "drop")  # the rows' order kept
    x = net.node("Add", [net.node("MatMul", [x, net.weight("fc.W", 256, 12)], "fc"), net.weight("fc.B", 12)],
                 "fc_bias")
    x = net.node("Gelu", [x], "gelu")
    x = net.node("LayerNormalization", [x, net.weight("ln2.scale", 12), net.weight("ln2.B", 12)], "ln2")
    scores = net.node("Gemm", [x, net.weight("head.W", 12, 5), net.weight("head.B", 5)], "head")
    return net.model(net.node("Softmax", [scores], "probs"), 5, 20), scores


def activations_net() -> tuple[onnx.ModelProto, str]:
    """The activations conv nets beyond torchvision's classifiers use, as torch 2.13's exporters write them: LeakyRelu
    and Elu with their alpha (one at ONNX's default), Mish, Gelu's tanh form; unoptimized (the default exporter's
    `optimize=False`) Elu between Muls by 1 and softplus as Where(x > 20, x, Softplus(x * 1) / 1); the legacy
    exporter's Mish, x * Tanh(Softplus(x))."""
    net = _Net(3, 6)
    one = net.node("Constant", [], "one", value=numpy_helper.from_array(np.array(1.0, np.float32)))  # not a weight
    x = net.node("LeakyRelu", [net.conv("image", "conv", 4, 3, 3, pads=[1, 1, 1, 1])], "leaky", alpha=0.2)
    x = net.node("Elu", [net.node("LeakyRelu", [x], "leaky_default")], "elu_default")
    x = net.node("Mul", [net.node("Elu", [net.node("Mul", [x, one], "elu_in")], "elu", alpha=0.5), one], "elu_out")
    scaled = net.node("Mul", [x, one], "scaled")
    softplus = net.node("Div", [net.node("Softplus", [scaled], "softplus"), one], "unscaled")
    past = net.node("Greater", [scaled, net.constant("threshold", 20.0, np.float32)], "past")
    x = net.node("Mish", [net.node("Where", [past, x, softplus], "thresholded")], "mish")
    x = net.node("Mul", [x, net.node("Tanh", [net.node("Softplus", [x], "mish_legacy")], "tanh")], "mish_legacy_mul")
    x = net.node("Gelu", [net.conv(x, "mix", 4, 4, 1)], "gelu_tanh", approximate="tanh")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat")
    x = net.node("Gemm", [x, net.weight("fc.W", 5, 4), net.weight("fc.B", 5)], "fc", transB=1)
    return net.model(x, 5, 20), x


def dilated_net() -> tuple[onnx.ModelProto, str]:
    """The segmentation nets' atrous convs as torch exports them: dilated by 2 with as many pixels of padding, a
    depthwise one too, and one whose pads are TensorFlow's 'same' over its dilated window (2x2 by 3: 4 pixels)."""
    net = _Net(3, 9)
    x = net.node("Relu", [net.conv("image", "atrous", 6, 3, 3, dilations=[2, 2], pads=[2, 2, 2, 2])], "relu")
    x = net.conv(x, "atrous_dw", 6, 6, 3, group=6, dilations=[2, 2], pads=[2, 2, 2, 2])
    x = net.conv(x, "uneven", 4, 6, 2, dilations=[3, 3], pads=[1, 1, 2, 2])
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat")
    x = net.node("Gemm", [x, net.weight("fc.W", 5, 4), net.weight("fc.B", 5)], "fc", transB=1)
    return net.model(x, 5, 17), x


def timm_net() -> tuple[onnx.ModelProto, str]:
    """timm's forms in a dynamic-batch export: ConvNeXt's layer scale `x.mul(gamma.reshape(1, -1, 1, 1))`, as the (1,
    C, 1, 1) initializer the exporter folds it to and as a Reshape of the (C,) parameter (to (1, C, 1, 1), to (C, 1,
    1), and to a Concat of four constants, as torch 2.13's exporter writes it); MobileOne's `out += identity_out`
    where the block has no identity branch (0: a Cast of a scalar zero); GhostNet's `out[:, :n]`, a Slice over the
    batch to INT64_MAX and two to its size, Shape(x)[0] (a Gather of the Shape, and a Shape from 0 to 1), then its
    `x += shortcut` as torch's slice_scatter over the whole batch: a ScatterND at indices Range(0, Shape(x)[0], 1),
    sliced whole and unsqueezed to (N, 1), as the exporter builds them; then a Slice over the channels."""
    net = _Net(3, 6)
    x = net.conv("image", "conv", 16, 3, 3, pads=[1, 1, 1, 1])
    x = net.node("Mul", [x, net.weight("folded.gamma", 1, 16, 1, 1)], "folded")
    x = net.node("Mul", [net.node("Reshape", [net.weight("nchw.gamma", 16), net.constant("nchw", [1, -1, 1, 1])],
                                  "nchw_view"), x], "nchw")
    x = net.node("Mul", [x, net.node("Reshape", [net.weight("chw.gamma", 16),
                                                 net.constant("chw", [-1, 1, 1])], "chw_view")], "chw")
    target = net.node("Concat", [net.constant(f"dim{index}", [size]) for index, size in enumerate((1, -1, 1, 1))],
                      "target", axis=0)
    x = net.node("Mul", [x, net.node("Reshape", [net.weight("concat.gamma", 16), target], "concat_view")], "concat")
    zero = net.node("Cast", [net.constant("scalar_zero", 0.0, np.float64)], "scalar_tensor_default", to=1)
    x = shortcut = net.node("Add", [x, zero], "no_identity")
    zero, batch = net.constant("zero", [0]), net.constant("batch", [0])
    x = net.node("Slice", [x, zero, net.constant("max", [2**63 - 1]), batch], "to_max")
    size = net.node("Gather", [net.node("Shape", [x], "shape"), net.constant("first", 0)], "size", axis=0)
    x = net.node("Slice", [x, zero, net.node("Unsqueeze", [size, batch], "size_1d"), batch], "to_size")
    x = net.node("Slice", [x, zero, net.node("Shape", [x], "shape_0", start=0, end=1), batch], "to_shape_0")
    added = net.node("Add", [x, shortcut], "add")
    x = net.node("ScatterND", [x, _whole_batch_indices(net, x, 0), added], "slice_scatter", reduction="none")
    x = net.node("Slice", [x, zero, net.constant("four", [4]), net.constant("c", [1])], "out_chs")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat")
    x = net.node("Gemm", [x, net.weight("fc.W", 5, 4), net.weight("fc.B", 5)], "fc", transB=1)
    return net.model(x, 5, 17), x


def norms_net() -> tuple[onnx.ModelProto, str]:
    """ONNX's own ops for the dense-prediction nets' layers, as another exporter may write them: GroupNormalization
    (opset 21's, a scale per channel), InstanceNormalization of the file's parameters, and of Constant ones and zeros
    (an instance norm without its own scale), PoolFormer's pool(x) - x, SpaceToDepth, PRelu on flat features, and
    Pad mode edge."""
    net = _Net(3, 6)
    x = net.node("Pad", [net.conv("image", "conv", 4, 3, 3), net.constant("pads", [0, 0, 1, 0, 0, 0, 3, 2])], "edge",
                 mode="edge")  # 4 -> 8 by 6
    x = net.node("GroupNormalization", [x, net.weight("gn.scale", 4), net.weight("gn.B", 4)], "gn", num_groups=2,
                 epsilon=1e-3)
    x = net.node("InstanceNormalization", [x, net.weight("in.scale", 4), net.weight("in.B", 4)], "in")
    ones = net.node("Constant", [], "ones", value=numpy_helper.from_array(np.ones(4, np.float32)))
    zeros = net.node("Constant", [], "zeros", value=numpy_helper.from_array(np.zeros(4, np.float32)))
    x = net.node("InstanceNormalization", [x, ones, zeros], "in_plain", epsilon=1e-3)
    x = net.node("Sub", [net.node("AveragePool", [x], "mix", kernel_shape=[3, 3], pads=[1, 1, 1, 1]), x], "token")
    x = net.node("Flatten", [net.node("GlobalAveragePool", [net.node("SpaceToDepth", [x], "s2d", blocksize=2)],
                                      "gap")], "flat")
    x = net.node("PRelu", [x, net.weight("prelu.slope", 16)], "prelu")
    x = net.node("Gemm", [x, net.weight("fc.W", 5, 16), net.weight("fc.B", 5)], "fc", transB=1)
    return net.model(x, 5, 21), x


def _whole_batch_indices(net: _Net, x: str, start: int) -> str:
    """The indices of torch's slice_scatter over the batch of `x` as the default exporter writes them: Range(start,
    Shape(x)[0], 1), a Slice of it to INT64_MAX with its bounds each an Unsqueeze of a scalar, then an Unsqueeze to
    (N, 1)."""
    first, one, axes = net.constant("position", 0), net.constant("by", 1), net.constant("axis", [0])
    size = net.node("Gather", [net.node("Shape", [x], "scatter_shape", start=0), first], "scatter_size", axis=0)
    examples = net.node("Range", [net.constant("from", start), size, one], "examples")
    bounds = [net.node("Unsqueeze", [bound, axes], f"{name}_1d") for name, bound in
              (("start", first), ("end", net.constant("end", 2**63 - 1)), ("step", one))]
    every = net.node("Slice", [examples, bounds[0], bounds[1], axes, bounds[2]], "every")
    return net.node("Unsqueeze", [every, net.constant("last", [-1])], "indices")


def _weight_values(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(init.dims)) for init in model.graph.initializer if not init.name.startswith(CONSTANT))


def _save(model: onnx.ModelProto, folder: Path, name: str) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("build", [residual_net, newer_net, activations_net, dilated_net, timm_net, norms_net],
                         ids=["residual", "newer", "activations", "dilated", "timm", "norms"])
def test_counts_equal_the_initializers_that_are_weights(build: Build, tmp_path: Path) -> None:
    model, _ = build()
    spec = load_spec_file(_save(model, tmp_path, build.__name__))
    assert spec.name == build.__name__  # the file's stem
    assert spec.param_count + spec.statistics_count == _weight_values(model)
    statistics = sum(int(np.prod(init.dims)) for init in model.graph.initializer if init.name.endswith(("mean", "var")))
    assert spec.statistics_count == statistics


def test_mapping(tmp_path: Path) -> None:
    residual = load_spec_file(_save(residual_net()[0], tmp_path, "residual"))
    layers = {entry["name"]: entry for entry in residual.to_dict()["layers"]}
    assert residual.loss == "mse" and residual.input_shape == (12, 12, 3)
    assert layers["stem"]["padding"] == 1 and layers["stem"]["stride"] == 2
    assert residual.layers[1].momentum == 0.1 and layers["stem_bn"]["epsilon"] == 1e-3  # torch's: 1 - ONNX's 0.9
    assert layers["pool"]["padding"] == 1 and layers["gap"]["keepdims"] is True
    newer = load_spec_file(_save(newer_net()[0], tmp_path, "newer"))
    layers = {entry["name"]: entry for entry in newer.to_dict()["layers"]}
    assert newer.loss == "cross_entropy" and "probs" not in layers  # the softmax is the loss's own
    assert layers["stem_pad"] | {"inputs": []} == {"type": "zeropad2d", "bottom": 1, "left": 1, "name": "stem_pad",
                                                    "inputs": []}  # the Pad, uneven, before the conv's own
    assert layers["stem_relu6"]["type"] == "relu6" and layers["se"]["type"] == "multiply"
    assert layers["swish"]["type"] == "silu" and "swish_gate" not in layers
    assert layers["crop"] | {"inputs": []} == {"type": "crop2d", "top": 1, "right": 1, "name": "crop", "inputs": []}
    slices = {name: (layers[name]["type"], layers[name]["start"], layers[name]["stop"]) for name in
              ("half0", "half1", "split_0", "split_1", "rest", "one")}  # torch.chunk's halves, Split's, Slices of C
    assert slices == {"half0": ("channel_slice", 0, 8), "half1": ("channel_slice", 8, 16),
                      "split_0": ("channel_slice", 0, 4), "split_1": ("channel_slice", 4, 16),
                      "rest": ("channel_slice", 1, 4), "one": ("channel_slice", 0, 1)}
    assert layers["view"] | {"inputs": []} == {"type": "channel_shuffle", "groups": 2, "name": "view", "inputs": []}
    assert not {"chunk", "transpose", "clone", "view_back"} & layers.keys()
    assert layers["hswish"]["type"] == layers["hswish13"]["type"] == "hard_swish" and "hswish_gate" not in layers
    assert layers["hsigmoid"]["type"] == "hard_sigmoid"
    assert layers["scale"]["type"] == layers["scale_last"]["type"] == "layerscale"
    assert layers["se_map"]["shape"] == (1, 1, 8) and layers["depthwise"]["groups"] == 16
    assert layers["fc"]["units"] == 12 and layers["drop"]["rate"] == 0.25 and "fc_bias" not in layers
    assert layers["smooth"]["interpolation"] == "bilinear" and layers["avg"]["padding"] == 1
    (pool,) = (layer for layer in newer.layers if layer.kind == "maxpool2d")
    assert layers["pool"]["ceil_mode"] is True and pool.overhang((8, 8, 16)) == (1, 1)


def test_activations_mapping(tmp_path: Path) -> None:
    """Each activation with its options (an attribute left out is ONNX's default: LeakyRelu 0.01, torch's too; Elu 1;
    float32's 0.2 the decimal 0.2), and torch's arithmetic around them no layer: its Muls and Div by 1, its
    softplus threshold (20, past which float32 cannot tell softplus(x) from x), the legacy Mish's Tanh and Mul."""
    spec = load_spec_file(_save(activations_net()[0], tmp_path, "activations"))
    layers = [{key: value for key, value in entry.items() if key not in ("inputs",)}
              for entry in spec.to_dict()["layers"]][1:-5]  # between the first conv and the 1x1 conv
    assert layers == [
        {"type": "leaky_relu", "negative_slope": 0.2, "name": "leaky"},
        {"type": "leaky_relu", "name": "leaky_default"}, {"type": "elu", "name": "elu_default"},
        {"type": "elu", "alpha": 0.5, "name": "elu"}, {"type": "softplus", "name": "softplus"},
        {"type": "mish", "name": "mish"}, {"type": "mish", "name": "mish_legacy_mul"}]
    assert next(layer for layer in spec.layers if layer.kind == "gelu").approximate
    assert [layer.kind for layer in load_spec_file(_save(swish(), tmp_path, "swish")).layers] == ["silu"]


def test_dilated_convs_keep_their_dilation_and_padding(tmp_path: Path) -> None:
    """A dilation is the conv's own; pads that are 'same' over the dilated window are 'same'."""
    layers = [(layer.dilation, layer.padding, layer.groups) for layer in
              load_spec_file(_save(dilated_net()[0], tmp_path, "dilated")).layers if layer.kind == "conv2d"]
    assert layers == [(2, 2, 1), (2, 2, 6), (3, "same", 1)]


def test_timms_layer_scales_are_layerscales_and_its_slices_over_the_batch_no_layer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each per-channel scale, (1, C, 1, 1) or a parameter reshaped, is a layerscale holding the parameter's values
    (read from the Reshape itself where its weights, stored beside the file, are left unread); the slices over the
    whole batch and the scatter over it are no layer."""
    model, _ = timm_net()
    spec = load_spec_file(_save(model, tmp_path, "timm"))
    assert [(entry["type"], entry["name"]) for entry in spec.to_dict()["layers"]] == [
        ("conv2d", "conv"), ("layerscale", "folded"), ("layerscale", "nchw"), ("layerscale", "chw"),
        ("layerscale", "concat"), ("add", "add"), ("channel_slice", "out_chs"), ("global_avg_pool", "gap"),
        ("flatten", "flat"), ("dense", "fc")]
    gammas = {init.name: numpy_helper.to_array(init).reshape(-1) for init in model.graph.initializer}
    weights = canonical_weights(model, spec)
    for index, name in ((1, "folded"), (2, "nchw"), (3, "chw"), (4, "concat")):
        np.testing.assert_array_equal(weights[f"layer{index}_scale"], gammas[f"{name}.gamma"])
    onnx.save(model, tmp_path / "beside.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
    monkeypatch.setattr(onnx_external, "SHAPES_ONLY_BYTES", 32)  # the targets read, each gamma (64 bytes) not
    read = onnx_external.read_model(tmp_path / "beside.onnx", values=False)
    assert {"nchw.gamma", "chw.gamma"} <= {tensor.name for tensor in read.graph.initializer
                                           if uses_external_data(tensor)}
    assert load_spec_file(tmp_path / "beside.onnx").to_dict()["layers"] == spec.to_dict()["layers"]


@pytest.mark.parametrize(("threshold", "refused"), [
    (10.0, "node 'thresholded' \\(Where\\) returns x past 10.0, where softplus\\(x\\) differs from x in float32"),
    (None, "node 'past' \\(Greater\\) compares values; the spec has no comparison")])
def test_a_softplus_threshold_float32_shows_is_refused(threshold: float | None, refused: str, tmp_path: Path) -> None:
    """A threshold where x and softplus(x) differ in float32 would be another function; a comparison read by
    anything but a Where is no softplus."""
    model, _ = activations_net()
    greater = next(node for node in model.graph.node if node.op_type == "Greater")
    if threshold is None:  # the comparison's mask the output, through a Mul: no Where reads it
        model.graph.node.append(helper.make_node("Mul", [greater.output[0], greater.output[0]], ["extra"]))
        model.graph.output[0].name = "extra"
    else:
        limit = next(init for init in model.graph.initializer if init.name == greater.input[1])
        limit.CopyFrom(numpy_helper.from_array(np.array(threshold, np.float32), limit.name))
    with pytest.raises(SpecError, match=refused):
        load_spec_file(_save(model, tmp_path, "thresholds"))


def test_torch_and_jax_compute_what_the_onnx_graph_computes(tmp_path: Path) -> None:
    """`models --check`: with the initializers loaded, each imported net's output is the ONNX graph's own
    (onnxruntime's; its scores before a softmax the loss took in), for the nets written here and PyTorch's two
    exports that keep the training graph, in one worker per framework for all of them."""
    paths = [str(_save(build()[0], tmp_path, build.__name__))
             for build in (residual_net, newer_net, activations_net, dilated_net, timm_net, norms_net)]
    paths += [str(EXPORTS / f"{name}.onnx") for name in (*TRAINING_GRAPHS, "pointwise", "adaptive", *SHUFFLES,
                                                         "dense_prediction", "pyramid")]
    done = run_cli("models", *(f"--model-file={path}" for path in paths), "--check")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[-1] == f"checked {len(paths)} files: {len(paths)} proved"
    for path in paths:
        heading = lines.index(next(line for line in lines if line.startswith(f"{path}: ")))
        for line, framework in zip(lines[heading + 1:heading + 3], ("torch", "jax"), strict=True):
            found = re.fullmatch(rf"  {framework} +largest difference (\S+) \(outputs up to (\S+)\): agrees", line)
            assert found, line
            difference, scale = float(found[1]), float(found[2])
            assert scale > 0.1 and difference <= 1e-4 * scale, line  # a net of zeros would agree trivially


def _fixed_batch(folder: Path) -> Path:
    """The small net as `torch.onnx.export(net, x, f)` writes it with a batch-1 x and no dynamic axes: the graph's
    batch fixed at 1."""
    model = onnx.load(EXPORTS / "default_unoptimized.onnx")
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    return _save(model, folder, "fixed_batch")


def _legacy_from_train(folder: Path) -> Path:
    """The legacy exporter's TrainingMode.PRESERVE from train(): each batch norm in training mode."""
    model = onnx.load(EXPORTS / "legacy_preserve.onnx")
    for node in model.graph.node:
        if node.op_type == "BatchNormalization":
            next(attribute for attribute in node.attribute if attribute.name == "training_mode").i = 1
    return _save(model, folder, "legacy_train")


def test_check_proves_a_fixed_batch_at_its_own_and_goes_on_past_a_refused_file(tmp_path: Path) -> None:
    """A graph whose batch is fixed at 1 is fed a batch of 1 (onnxruntime refuses any other); a refused file before
    it is one line naming its fix, the check goes on to the next file, and a last line counts both: exit 2."""
    refused, fixed = str(_legacy_from_train(tmp_path)), str(_fixed_batch(tmp_path))
    done = run_cli("models", f"--model-file={refused}", f"--model-file={fixed}", "--check")
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line == (f"python -m suites: error: {refused}: node '/stem_bn/BatchNormalization' (BatchNormalization) "
                    f"runs in training mode; the importer reads inference graphs; fix: {Fix.EVAL_EXPORT}")
    lines = done.stdout.splitlines()
    assert lines[0] == f"{fixed}: the imported net with the file's weights against onnxruntime (a batch of 1, " \
                       "inference)"
    for line, framework in zip(lines[1:3], ("torch", "jax"), strict=True):
        assert re.fullmatch(rf"  {framework} +largest difference \S+ \(outputs up to \S+\): agrees", line), line
    assert lines[3:] == [f"checked 2 files: 1 proved; 1 refused: {refused}"]


def touchy_net() -> onnx.ModelProto:
    """A net that amplifies float32's rounding, as an untrained deep net can: a conv whose bias, 1e5, float32 holds
    to 0.008, then a batch norm subtracting it and dividing by 0.003: onnxruntime and the frameworks, each summing in
    its own order, differ by about 1 % of the outputs, far past the tolerance."""
    net = _Net(3, 6)
    net.initializers.append(numpy_helper.from_array(np.full(4, 1e5, np.float32), "touchy.B"))
    x = net.node("Conv", ["image", net.weight("touchy.W", 4, 3, 3, 3), "touchy.B"], "touchy", kernel_shape=[3, 3])
    statistics = [numpy_helper.from_array(np.array(value, np.float32), name) for name, value in (
        ("bn.scale", [1.0] * 4), ("bn.B", [0.0] * 4), ("bn.mean", [1e5] * 4), ("bn.var", [1e-6] * 4))]
    net.initializers += statistics
    x = net.node("BatchNormalization", [x, *(each.name for each in statistics)], "bn")
    x = net.node("Flatten", [net.node("Relu", [x], "relu")], "flat")
    return net.model(net.node("Gemm", [x, net.weight("fc.W", 5, 64), net.weight("fc.B", 5)], "fc", transB=1), 5, 17)


def test_a_net_that_amplifies_float32s_rounding_is_proved_within_it_and_one_wrong_by_a_layer_is_not(
        tmp_path: Path) -> None:
    """Past the tolerance, torch computes the rebuild in float64: where onnxruntime's answer and each framework's are
    within 4x the rebuild's own float32 rounding of it, the rounding is the difference and the file is proved, for
    that reason; the same file whose rebuild is wrong by one layer (its ReLU a leaky one) is not."""
    from models.importers.onnx_file import load_onnx_proof
    from suites.run.import_check import Ready, _batch, _onnx, prove, report

    path = _save(touchy_net(), tmp_path, "touchy")
    done = run_cli("models", "--model-file", str(path), "--check")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.splitlines()
    for line, framework in zip(lines[1:3], ("torch", "jax"), strict=True):
        found = re.fullmatch(rf"  {framework} +largest difference (\S+) \(outputs up to (\S+)\): (.*)", line)
        assert found and float(found[1]) > 1e-4 * float(found[2]), line  # past the tolerance: a touchy net
        assert found[3] == "agrees within float32's rounding (below)", line
    assert lines[3].startswith("  torch float64     the rebuild's float32 answer is ") and "within 4x" in lines[3]
    assert len(lines[3]) <= 200
    proof = load_onnx_proof(path)
    batch = _batch(proof.spec)
    layers = [layer if layer.kind != "relu" else LeakyReLU(0.5) for layer in proof.spec.layers]
    wrong = replace(proof.spec, layers=tuple(layers))
    proofs = prove([Ready(str(path), wrong, batch, proof.weights, _onnx(proof, batch, str(path)))], ["torch", "jax"])
    assert not proofs[str(path)].holds
    text = report(proofs, [])
    assert "DIFFERS" in text and "the rebuild is not the file's net" in text and "1 not proved" in text


def test_a_file_onnxruntime_cannot_compute_is_refused_with_its_whole_reason(tmp_path: Path) -> None:
    """onnxruntime's reason, all its lines in one: a batch of 2 fed to a graph fixed at 1 (as the check once fed
    every file) names the index and both sizes on its second line."""
    from models.importers.onnx_file import load_onnx_proof
    from suites.run.import_check import _batch, _onnx

    path = _fixed_batch(tmp_path)
    proof = load_onnx_proof(path)
    with pytest.raises(SpecError) as error:
        _onnx(proof, _batch(proof.spec, 2), str(path))
    assert "index: 0 Got: 2 Expected: 1" in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name", TRAINING_GRAPHS)
def test_pytorchs_exports_that_keep_the_training_graph_have_torchs_counts(name: str) -> None:
    """The default exporter's unoptimized graph (its zero biases and batch-size arithmetic computed, not layers)
    and the legacy exporter's with TrainingMode.PRESERVE: the net's parameters and statistics, as torch counts."""
    spec = load_spec_file(EXPORTS / f"{name}.onnx")
    counts = json.loads((EXPORTS / "counts.json").read_text())["Net"]
    assert (spec.param_count, spec.statistics_count) == (counts["parameters"], counts["statistics"])
    assert sum(layer.kind == "batchnorm" for layer in spec.layers) == 2


def test_torchs_group_and_instance_norms_prelu_and_edge_pads_import_with_torchs_counts() -> None:
    """The default exporter writes a group norm as a Reshape, an InstanceNormalization over the groups, a Reshape
    back, a Mul and an Add: one groupnorm. An instance norm without its own scale reads ones and zeros that the
    exporter's optimizer stored as the affine one's parameters (equal values, stored once): torch's call in the
    node's metadata says it has none, so it counts none."""
    spec = load_spec_file(EXPORTS / "dense_prediction.onnx")
    counts = json.loads((EXPORTS / "counts.json").read_text())["DensePrediction"]
    assert (spec.param_count, spec.statistics_count) == (counts["parameters"], counts["statistics"])
    kinds = [(layer.kind, getattr(layer, "affine", None), getattr(layer, "groups", None)) for layer in spec.layers
             if layer.kind in ("groupnorm", "instancenorm")]
    assert kinds == [("groupnorm", True, 2), ("instancenorm", False, None), ("instancenorm", True, None),
                     ("groupnorm", True, 1)]
    assert [layer.mode for layer in spec.layers if layer.kind == "pad2d"] == ["reflect", "replicate"]
    assert [layer.shared for layer in spec.layers if layer.kind == "prelu"] == [False, True]
    assert [(layer.block, layer.order) for layer in spec.layers if layer.kind == "space_to_depth"] == [
        (2, "channel_major")]  # torch's pixel_unshuffle: a Reshape, a Transpose and a Reshape


def test_a_graph_of_several_outputs_is_a_spec_of_several_outputs_in_the_graphs_order() -> None:
    """torch's export of a net returning two levels (the coarse one read on by the fine one, as an FPN's): one
    spec output per graph output, in its order, with torch's counts; `--check` proves it (above)."""
    spec = load_spec_file(EXPORTS / "pyramid.onnx")
    counts = json.loads((EXPORTS / "counts.json").read_text())["Pyramid"]
    assert (spec.param_count, spec.statistics_count) == (counts["parameters"], counts["statistics"])
    assert spec.output_shapes == ((8, 8, 4), (4, 4, 8)) and spec.loss == "mse"
    coarse = spec.output_layers[1]
    assert len(spec.consumers()[coarse]) == 2  # the upsampling reads it, and the loss


def test_outputs_that_mix_class_scores_with_other_values_are_refused(tmp_path: Path) -> None:
    """A spec's outputs share one loss: a softmax at one output and none at the other is refused by name."""
    net = _Net(3, 4)
    x = net.node("Flatten", [net.node("GlobalAveragePool", ["image"], "gap")], "flat")
    scores = net.node("Softmax", [net.node("Gemm", [x, net.weight("a.W", 5, 3)], "a", transB=1)], "scores", axis=1)
    other = net.node("Gemm", [x, net.weight("b.W", 2, 3)], "b", transB=1)
    model = net.model(scores, 5, 17)
    model.graph.output.append(helper.make_tensor_value_info(other, TensorProto.FLOAT, ["N", 2]))
    with pytest.raises(SpecError, match="the output 'scores' ends in a softmax and 'b' does not; a spec's outputs "
                                        "share one loss"):
        load_spec_file(_save(model, tmp_path, "mixed"))


def test_a_fully_convolutional_file_trains_at_another_size_and_one_that_fixes_its_size_is_refused() -> None:
    """--size rebuilds a model file at another image size (a segmentation net exported at 224 px, trained at 512):
    the same weights, a model of its own in the record; where a layer's weights would change (a dense layer after a
    flatten), one line names it and nothing runs."""
    path = EXPORTS / "dense_prediction.onnx"
    done = run_cli("run", "--framework", "torch", "--model-file", str(path), "--size", "24x20", "--device", "cpu",
                   "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["status"] == "ok" and record["model"]["input_shape"] == [24, 20, 3]
    assert record["model"]["name"] == f"{path}@24x20"
    assert record["framework"]["param_count"] == json.loads((EXPORTS / "counts.json").read_text())[
        "DensePrediction"]["parameters"]
    refused = run_cli("estimate", "--model-file", str(EXPORTS / "dropouts.onnx"), "--size", "64")
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().splitlines() == [
        "python -m suites: error: at 64x64, layer 'node_linear' (dense) would hold weights [(12288, 5), (5,)], not "
        "its [(192, 5), (5,)]: dropouts fixes its input size (8x8)"]


def test_a_zero_bias_the_exporters_optimizer_removed_is_counted_where_torchs_call_had_one(tmp_path: Path) -> None:
    """The default exporter's optimizer drops a bias of zeros from its conv (a fresh timm ConvNeXt's every conv and
    linear): the node's metadata shows torch's call had one, so the net keeps the parameters it trains; without
    that metadata the file says nothing of it."""
    model = onnx.load(EXPORTS / "dense_prediction.onnx")
    conv = next(node for node in model.graph.node if node.op_type == "Conv" and len(node.input) == 3)
    filters = next(initializer for initializer in model.graph.initializer if initializer.name == conv.input[1]).dims[0]
    del conv.input[2]  # as the optimizer leaves a conv whose bias was zeros
    counts = json.loads((EXPORTS / "counts.json").read_text())["DensePrediction"]["parameters"]
    assert load_spec_file(_save(model, tmp_path, "removed")).param_count == counts
    del conv.metadata_props[:]
    assert load_spec_file(_save(model, tmp_path, "unmarked")).param_count == counts - filters


def test_a_conv_by_a_fixed_kernel_is_refused_by_name(tmp_path: Path) -> None:
    """timm's blur pool convolves by a filter torch holds as a buffer, not a parameter: the graph alone cannot tell,
    the node's metadata can, and the conv is refused rather than counted as trained."""
    model = onnx.load(EXPORTS / "dense_prediction.onnx")
    conv = next(node for node in model.graph.node if node.op_type == "Conv")
    entry = next(entry for entry in conv.metadata_props if entry.key == "pkg.torch.onnx.fx_node")
    entry.value = re.sub(r"args = \(([^,]+), %p_\w+", r"args = (\1, %b_blur_filt", entry.value)
    path = _save(model, tmp_path, "blurred")
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value) == f"{path}: node {conv.name!r} (Conv) convolves with a fixed kernel (a buffer in torch: " \
                               f"timm's blur pool's filter); the spec's conv2d learns its kernel"


@pytest.mark.parametrize("fixed", [False, True], ids=["dynamic-batch", "batch-1"])
def test_torchvisions_convnext_layers_over_channels_last_are_1x1_convs(fixed: bool, tmp_path: Path) -> None:
    """torchvision's ConvNeXt in small: its Linear layers over an image's channels (made last by a permute; a MatMul
    and an Add) are 1x1 convs, and the as_strided after its global pool is no layer; torch's counts. Exported
    without dynamic axes from a batch-1 example (the commonest export), its as_strided's indices are constants for
    that batch, shown there."""
    model = onnx.load(EXPORTS / "pointwise.onnx")
    if fixed:
        model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    spec = load_spec_file(_save(model, tmp_path, "pointwise"))
    assert [layer.kind for layer in spec.layers] == ["layernorm", "conv2d", "layernorm", "conv2d", "gelu", "conv2d",
                                                     "layerscale", "add", "global_avg_pool", "layernorm", "flatten",
                                                     "dense"]
    assert [(layer.filters, layer.kernel) for layer in spec.layers if layer.kind == "conv2d"][1:] == [(16, 1), (4, 1)]
    assert spec.param_count == json.loads((EXPORTS / "counts.json").read_text())["Pointwise"]["parameters"]


@pytest.mark.parametrize("name", SHUFFLES)
def test_shufflenets_block_by_either_exporter_is_a_channel_split_and_shuffle(name: str) -> None:
    """ShuffleNet v2's block: torch.chunk (the default exporter's SplitToSequence, the legacy exporter's Split), a
    branch, a concat and the channel shuffle (the legacy exporter's sizes read from `Shape`, folded with ONNX's
    shape inference); torch's counts."""
    spec = load_spec_file(EXPORTS / f"{name}.onnx")
    kinds = [layer.kind for layer in spec.layers]
    assert kinds.count("channel_slice") == 2 and kinds.count("channel_shuffle") == 1
    assert next(layer.groups for layer in spec.layers if layer.kind == "channel_shuffle") == 2
    counts = json.loads((EXPORTS / "counts.json").read_text())["Shuffle"]
    assert (spec.param_count, spec.statistics_count) == (counts["parameters"], counts["statistics"])


def test_torchs_dropouts_in_training_are_the_specs_dropouts() -> None:
    """The default exporter writes an in-place dropout and torchvision's stochastic depth as their arithmetic (a
    RandomUniformLike mask, kept below p, divided by p): each is one dropout, per example where the mask is
    (N, 1, 1, 1); a plain nn.Dropout is ONNX's Dropout."""
    spec = load_spec_file(EXPORTS / "dropouts.onnx")
    dropouts = [(layer.rate, layer.per_example) for layer in spec.layers if layer.kind == "dropout"]
    assert dropouts == [(0.1, True), (0.25, False), (0.5, False)]
    assert [layer.kind for layer in spec.layers] == ["conv2d", "dropout", "add", "relu", "dropout", "flatten",
                                                     "dropout", "dense"]
    assert spec.param_count == json.loads((EXPORTS / "counts.json").read_text())["Dropouts"]["parameters"]


def test_torchs_adaptive_pools_written_as_their_decomposition_are_the_specs_adaptive_pools() -> None:
    """The default exporter writes an adaptive average pool whose size does not divide the input's as a Transpose,
    a GatherND of the windows and their mean (Where, Gather, Add, Div; or a ReduceMean): each is one
    adaptive_avgpool2d, named after the node that ends it, none of its nodes a layer (the outputs are the check's)."""
    spec = load_spec_file(EXPORTS / "adaptive.onnx")
    assert [(layer.kind, getattr(layer, "size", None)) for layer in spec.layers] == [
        ("conv2d", None), ("relu", None), ("adaptive_avgpool2d", (3, 6)), ("adaptive_avgpool2d", (2, 4)),
        ("flatten", None), ("dense", None)]
    assert [shape.output_shape for shape in spec.walk()][2:4] == [(3, 6, 4), (2, 4, 4)]
    assert spec.param_count == json.loads((EXPORTS / "counts.json").read_text())["Adaptive"]["parameters"]


@pytest.mark.parametrize("name", ["default_unoptimized", "dropouts"])
def test_weights_stored_beside_the_file_give_the_same_spec_counted_from_their_shapes(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An export with every tensor in a file beside it (external data), each weight past 64 bytes left unread: the
    same spec as the file with its weights inline (the exporter's arithmetic on a weight's shape, torch's dropout
    masks), where reading them took twice the weights' size in memory."""
    onnx.save(onnx.load(EXPORTS / f"{name}.onnx"), tmp_path / f"{name}.onnx", save_as_external_data=True,
              location="weights.bin", size_threshold=0)
    monkeypatch.setattr(onnx_external, "SHAPES_ONLY_BYTES", 64)
    read = onnx_external.read_model(tmp_path / f"{name}.onnx", values=False)
    assert [tensor.name for tensor in read.graph.initializer if uses_external_data(tensor)]  # some left unread
    assert load_spec_file(tmp_path / f"{name}.onnx") == load_spec_file(EXPORTS / f"{name}.onnx")


def test_a_decomposition_that_computes_no_adaptive_pool_is_refused_as_its_transpose(tmp_path: Path) -> None:
    """The pool is proved, not assumed: the same nodes with each window's sum multiplied by its size rather than
    divided compute no pool, and the Transpose that starts them is refused by name."""
    model = onnx.load(str(EXPORTS / "adaptive.onnx"))
    div = next(node for node in model.graph.node if node.op_type == "Div")
    div.op_type = "Mul"
    transpose = next(node for node in model.graph.node if node.op_type == "Transpose")
    path = _save(model, tmp_path, "not_a_pool")
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: node {transpose.name!r} (Transpose) permutes [2, 3, 0, 1]; ")
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(("name", "message"), [
    ("default", "node 'node_Conv_37' (Conv) has a batch norm fused in (FuseBatchNormIntoConv): an inference graph"),
    ("legacy", "node '/stem/Conv' (Conv) reads a weight the exporter computed ('onnx::Conv_")])
def test_a_graph_whose_batch_norms_were_fused_is_refused_naming_the_export_that_keeps_them(name: str, message: str,
                                                                                          tmp_path: Path) -> None:
    """PyTorch's default export, and the legacy one in its default TrainingMode.EVAL, fold each batch norm into the
    conv before it: an inference graph, never measured as the training net."""
    path = EXPORTS / f"{name}.onnx"
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)
    assert str(error.value).endswith(f"; fix: {Fix.KEEP_BATCH_NORMS}") and "optimize=False" in str(error.value)
    assert len(str(error.value).removeprefix(f"{path}: ")) <= 200
    out = tmp_path / "run.json"
    done = run_cli("run", "--framework", "torch", "--model-file", str(path), "--device", "cpu", "--out", str(out))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [f"python -m suites: error: {error.value}"]
    assert not out.exists() and done.stdout == ""  # nothing measured


def test_an_ultralytics_export_fused_by_model_export_is_refused_and_one_keeping_its_norms_imports(
        tmp_path: Path) -> None:
    """Ultralytics' model.export() fuses each batch norm into its conv in torch, so the weights keep their names:
    its mark in the metadata (author, or YOLOv5's stride and names) with no norm left is the fused net, refused with
    the export that keeps them; a marked file that kept its batch norms, and an unmarked net without norms (VGG's),
    import as they are."""
    net = _Net(3, 8)  # a YOLO classifier, fused: a conv with its bias, an activation, pooling and the head
    x = net.node("Flatten", [net.node("GlobalAveragePool", [net.node("Relu", [net.conv("image", "conv", 4, 3, 3)],
                                                                     "relu")], "gap")], "flat")
    fused = net.model(net.node("Gemm", [x, net.weight("fc.W", 5, 4), net.weight("fc.B", 5)], "fc", transB=1), 5, 17)
    for marks in ({"author": "Ultralytics", "task": "classify"}, {"stride": "32", "names": "{0: 'cat'}"}):
        onnx.helper.set_model_props(fused, marks)
        path = _save(fused, tmp_path, "fused")
        with pytest.raises(SpecError) as error:
            load_spec_file(path)
        assert str(error.value) == f"{path}: an Ultralytics export, its batch norms fused into its convs: an " \
                                   f"inference graph; fix: {Fix.UNFUSED_YOLO}"
    del fused.metadata_props[:]
    assert load_spec_file(_save(fused, tmp_path, "plain")).param_count == 4 * 28 + 25  # no mark: a net without norms
    kept, _ = residual_net()
    onnx.helper.set_model_props(kept, {"author": "Ultralytics"})
    assert load_spec_file(_save(kept, tmp_path, "kept")).statistics_count == 32  # its batch norms kept


def test_an_imported_net_runs_a_scenario_in_keras(tmp_path: Path) -> None:
    path = _save(residual_net()[0], tmp_path, "residual")
    done = run_cli("run", "--framework", "keras-tensorflow", "--model-file", str(path), "--device", "cpu",
                   "--scenario", "infer", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    assert record["status"] == "ok" and record["framework"]["param_count"] == load_spec_file(path).param_count


def _one_node(op: str, name: str, inputs: list[str], initializers: list[TensorProto], **attributes: object) -> \
        onnx.ModelProto:
    """A one-node graph on an image (N, 2, 8, 8)."""
    graph = helper.make_graph([helper.make_node(op, ["image", *inputs], ["out"], name=name, **attributes)], "net",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 2, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _scaled(shape: tuple[int, ...]) -> onnx.ModelProto:
    """The image times a parameter of `shape`."""
    return _one_node("Mul", "scale", ["gamma"], [numpy_helper.from_array(np.ones(shape, np.float32), "gamma")])


def _batch_sliced(start: int, end: int) -> onnx.ModelProto:
    bounds = (("from", [start]), ("to", [end]), ("axes", [0]))
    return _one_node("Slice", "examples", ["from", "to", "axes"],
                     [numpy_helper.from_array(np.array(value, np.int64), name) for name, value in bounds])


def _scattered(start: int, reduction: str) -> onnx.ModelProto:
    """torch's slice_scatter over the batch of the image, of a Relu of it, with indices Range(start, N, 1), then a
    global pool."""
    net = _Net(2, 8)
    x = net.node("ScatterND", ["image", _whole_batch_indices(net, "image", start), net.node("Relu", ["image"], "relu")],
                 "scatter", reduction=reduction)
    return net.model(net.node("Flatten", [net.node("GlobalAveragePool", [x], "gap")], "flat"), 2, 17)


def old_opset() -> onnx.ModelProto:
    model = _one_node("Relu", "relu", [], [])
    model.opset_import[0].version = 12
    return model


def swish(**attributes: object) -> onnx.ModelProto:
    """Opset 24's Swish, x * sigmoid(alpha x): the spec's silu at alpha 1."""
    model = _one_node("Swish", "swish", [], [], **attributes)
    model.opset_import[0].version = 24
    return model


def lstm() -> onnx.ModelProto:
    weights = [numpy_helper.from_array(np.zeros(shape, np.float32), name)
               for name, shape in (("W", (1, 12, 8)), ("R", (1, 12, 3)))]
    return _one_node("LSTM", "encoder", ["W", "R"], weights, hidden_size=3)


def batch_flattened() -> onnx.ModelProto:
    """Every value flattened, batch and all, then gathered as torch's as_strided is written, with indices that
    give back an example at batch 1 but are no function of the batch size: at batch 2 they would drop the second."""
    indices = numpy_helper.from_array(np.arange(128).reshape(1, 2, 8, 8), "indices")
    graph = helper.make_graph([
        helper.make_node("Reshape", ["image", "everything"], ["flat"], name="as_strided_flat"),
        helper.make_node("Gather", ["flat", "indices"], ["out"], name="as_strided", axis=0),
    ], "net", [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 2, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([-1]), "everything"), indices])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


REFUSED = {
    "lstm": (lstm, "node 'encoder' (LSTM) has no counterpart in the spec"),
    "clip": (lambda: _one_node("Clip", "cap", ["lo", "hi"], [numpy_helper.from_array(np.array(v, np.float32), n)
                                                             for n, v in (("lo", 0.0), ("hi", 1.0))]),
             "node 'cap' (Clip) clips to (0.0, 1.0)"),
    "swish": (lambda: swish(alpha=2.0),
              "node 'swish' (Swish) computes x * sigmoid(2.0 x); the spec's silu is x * sigmoid(x)"),
    "hard_sigmoid": (lambda: _one_node("HardSigmoid", "gate", [], []),
                     "node 'gate' (HardSigmoid) computes max(0, min(1, 0.2 x + 0.5)); the spec's hard_sigmoid is "
                     "alpha 1/6"),
    "dilated_unevenly": (lambda: _one_node("Conv", "atrous", ["W"], [numpy_helper.from_array(
        np.zeros((2, 2, 3, 3), np.float32), "W")], dilations=[2, 1]),
                         "node 'atrous' (Conv) has dilations [2, 1], not square"),
    "uneven_max": (lambda: _one_node("MaxPool", "pool", [], [], kernel_shape=[2, 2], pads=[0, 0, 1, 1]),
                   "node 'pool' (MaxPool) pads (0, 1, 0, 1)"),
    "uncounted": (lambda: _one_node("AveragePool", "avg", [], [], kernel_shape=[3, 3], pads=[0, 0, 1, 1]),
                  "node 'avg' (AveragePool) pads (0, 1, 0, 1) (top, bottom, left, right), not the same on every side, "
                  "and the padding never counts"),
    "strided": (lambda: _one_node("Slice", "every_other", ["from", "to", "axes", "steps"], [
        numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("from", [0]), ("to", [4]), ("axes", [2]),
                                                                       ("steps", [2]))]),
                "node 'every_other' (Slice) slices axes [2] by steps [2]"),
    "scale_over_rows": (lambda: _scaled((1, 1, 8, 1)), "node 'scale' (Mul) multiplies by a constant of shape "
                                                       "[1, 1, 8, 1]; the spec's layerscale multiplies by a parameter"),
    "scale_over_batch": (lambda: _scaled((2, 2, 1, 1)), "node 'scale' (Mul) multiplies by a constant of shape "
                                                        "[2, 2, 1, 1]; the spec's layerscale"),
    "batch_from_one": (lambda: _batch_sliced(1, 2**63 - 1),
                       f"node 'examples' (Slice) slices the batch (axis 0) from 1 to {2**63 - 1} by 1; the spec keeps "
                       f"every example"),
    "batch_to_one": (lambda: _batch_sliced(0, 1), "node 'examples' (Slice) slices the batch (axis 0) from 0 to 1 by 1"),
    "scatter_from_one": (lambda: _scattered(1, "none"), "node 'scatter' (ScatterND) scatters (reduction 'none') other "
                                                         "than updates of data's shape over the whole batch"),
    "scatter_adding": (lambda: _scattered(0, "add"), "node 'scatter' (ScatterND) scatters (reduction 'add') other "
                                                     "than updates of data's shape over the whole batch"),
    "not_shuffled": (lambda: _one_node("Reshape", "view", ["grouped"], [
        numpy_helper.from_array(np.array([0, 2, 1, 8, 8], np.int64), "grouped")]),
                     "node 'view' (Reshape) reshapes [2, 8, 8] to [2, 1, 8, 8], then is no channel shuffle"),
    "split_rows": (lambda: _one_node("Split", "rows", [], [], axis=2),
                   "node 'rows' (Split) splits axis 2; the spec's channel_slice takes the channels"),
    "batch_flattened": (batch_flattened, "node 'as_strided_flat' (Reshape) flattens the batch with the values, other "
                                         "than for torch's as_strided giving back the same tensor"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_refused_in_one_line(case: str, tmp_path: Path) -> None:
    build, message = REFUSED[case]
    path = _save(build(), tmp_path, case)
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: {message}") and "\n" not in str(error.value)


def _image_size_open(folder: Path) -> Path:
    """The small net exported with its image's height and width dynamic, not only its batch."""
    model = onnx.load(EXPORTS / "default_unoptimized.onnx")
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim[2:], ("height", "width"), strict=True):
        dim.dim_param = name
    return _save(model, folder, "image_size_open")


def _weights_left_behind(folder: Path) -> Path:
    """The small net with its weights in a file beside it, copied without that file."""
    onnx.save(onnx.load(EXPORTS / "default_unoptimized.onnx"), folder / "moved.onnx", save_as_external_data=True,
              location="moved.onnx.data", size_threshold=0)
    (folder / "moved.onnx.data").unlink()
    return folder / "moved.onnx"


def _keras_size_open(folder: Path) -> Path:
    """A Keras model built with no input size (keras.applications' without input_shape): (None, None, 3)."""
    layers = [{"class_name": "InputLayer", "config": {"name": "image", "batch_shape": [None, None, None, 3]}},
              {"class_name": "GlobalAveragePooling2D", "config": {"name": "pool"}}]
    path = folder / "open.json"
    path.write_text(json.dumps({"class_name": "Sequential", "config": {"name": "open", "layers": layers}}))
    return path


KNOWN_FIXES = {  # a file refused for its export, the refusal's start, and the fix its line ends with
    "old": (lambda folder: _save(old_opset(), folder, "old"),
            "uses ONNX opset 12; the importer reads opset 13 and later", Fix.NEWER_OPSET),
    "legacy_from_train": (_legacy_from_train, "node '/stem_bn/BatchNormalization' (BatchNormalization) runs in "
                                              "training mode", Fix.EVAL_EXPORT),
    "image_size_open": (_image_size_open, "the input 'image' has shape ['N', 3, 'height', 'width']",
                        Fix.BATCH_DYNAMIC_ONLY),
    "weights_left_behind": (_weights_left_behind, "its weights are stored in a file beside it, 'moved.onnx.data', "
                                                  "which is not there", Fix.DATA_BESIDE),
    "keras_size_open": (_keras_size_open, "layer 'image' (InputLayer): the model's input shape [None, None, None, 3] "
                                          "must be known", Fix.KERAS_INPUT_SHAPE),
}


@pytest.mark.parametrize("case", KNOWN_FIXES)
def test_a_refusal_with_a_known_fix_names_it_in_its_line(case: str, tmp_path: Path) -> None:
    write, reason, fix = KNOWN_FIXES[case]
    path = write(tmp_path)
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: {reason}") and str(error.value).endswith(f"; fix: {fix}")
    assert "\n" not in str(error.value) and len(str(error.value).removeprefix(f"{path}: ")) <= 200


def test_each_known_fix_is_short_and_listed_in_the_docs() -> None:
    """A fix fits in its refusal's line (at most 200 characters) and points to docs/models.md, which lists it."""
    listed = (Path(__file__).parents[1] / "docs" / "models.md").read_text()
    for fix in Fix:
        assert len(fix) <= 200 and fix.endswith("; docs/models.md") and f"| `{fix}` |" in listed, fix


def test_cli_estimates_an_onnx_file_and_refuses_an_lstm(tmp_path: Path) -> None:
    assert run_cli("estimate", "--model-file", str(_save(residual_net()[0], tmp_path, "residual"))).returncode == 0
    path = _save(lstm(), tmp_path, "lstm")
    refused = run_cli("estimate", "--model-file", str(path))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{path}: node 'encoder' (LSTM) has no counterpart in the spec" in lines[0]


def test_weights_of_another_spec_are_refused(tmp_path: Path) -> None:
    path = _save(residual_net()[0], tmp_path, "residual")
    other = load_spec_file(_save(newer_net()[0], tmp_path, "newer"))
    with pytest.raises(SpecError, match="is not the one imported"):
        canonical_weights(path, other)


@pytest.mark.parametrize(("arguments", "message", "printed"), [
    ((), "--check proves a model file's import: give --model-file", ""),
    (("--model-file", "{spec}"), "{spec}: a spec file has no source to compare with",
     "checked 1 file: 0 proved; 1 refused: {spec}\n"),
    (("--model-file", "net.onnx", "--frameworks", "mxnet"), "argument --frameworks: unknown framework mxnet", "")])
def test_check_refuses_what_it_cannot_prove_in_one_line(arguments: tuple[str, ...], message: str, printed: str,
                                                        tmp_path: Path) -> None:
    """Bad arguments, and a file refused (its count printed, no worker started), in one line each: exit 2."""
    spec = tmp_path / "mine.json"
    spec.write_text(json.dumps({"name": "mine", "input_shape": [4], "loss": "mse", "layers": [{"type": "dense",
                                                                                          "units": 2}]}))
    arguments = tuple(a.format(spec=spec) for a in arguments)
    message, printed = message.format(spec=spec), printed.format(spec=spec)
    done = run_cli("models", "--check", *arguments)
    assert done.returncode == 2 and done.stdout == printed
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr


def test_check_never_broadcasts_an_output_onto_a_reference_of_another_shape() -> None:
    """A reference of another shape (onnx 1.23's reference evaluator rounded googlenet's stride-1 ceil_mode max pool
    from 8x8 up to 10x10, where torch gives 8x8) differs: it is never broadcast."""
    from suites.run.import_check import _difference

    assert _difference(np.ones((2, 8, 8, 3)), np.ones((2, 10, 10, 3))) == float("inf")
    assert _difference(np.ones((2, 5)), np.ones((2, 1))) == float("inf")  # would broadcast to a difference of 0
    assert _difference(np.array([[1.0, 2.0]]), np.array([[1.5, 2.0]])) == 0.5
