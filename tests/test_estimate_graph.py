"""The estimate on graph specs: what skip connections, concatenations and the recomputing techniques do to the
arithmetic, and the rules for the layer kinds only graph nets have."""

from __future__ import annotations

import math

import pytest

from models import techniques
from models.catalogue import Graph, get_model
from models.estimate import RULES, SAVED_KINDS, activations, estimate, floor, hand_count, steps
from models.spec import (
    GELU,
    INPUT,
    LAYER_TYPES,
    Add,
    AvgPool2D,
    BatchNorm,
    Concat,
    Conv2D,
    Crop2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    HardSigmoid,
    HardSwish,
    LayerNorm,
    MaxPool2D,
    ModelSpec,
    Multiply,
    Normalize,
    ReLU,
    ReLU6,
    Rescale,
    Reshape,
    Sigmoid,
    SiLU,
    Upsample2D,
    ZeroPad2D,
)


def small_graph() -> ModelSpec:
    """Every layer kind of the graph nets, small: a stem (conv, batch norm, ReLU, padded max-pool), a residual block
    (add), an inverted residual (depthwise conv, ReLU6), a dense block (concat feeding batch norm, ReLU, conv), then
    dropout on a feature map, average and global pooling and a classifier. Each block is a checkpoint run."""
    net = Graph()
    net.conv_bn(8, 3)
    x = net.add(MaxPool2D(3, 2, padding=1))
    net.block = "residual"
    y = net.conv_bn(8, 3, source=x)
    y = net.conv_bn(8, 3, activation=None)
    x = net.add(ReLU(), net.add(Add(), y, x))
    net.block = "inverted"
    y = net.conv_bn(16, 1, source=x, activation=ReLU6)
    y = net.conv_bn(16, 3, groups=16, activation=ReLU6)
    y = net.conv_bn(8, 1, activation=None)
    x = net.add(Add(), x, y)
    net.block = "dense"
    features = [x]
    for _ in range(2):
        joined = net.add(Concat(), *features) if len(features) > 1 else features[0]
        net.add(BatchNorm(), joined)
        net.add(ReLU())
        features.append(net.add(Conv2D(4, 3, padding=1, bias=False)))
    x = net.add(Concat(), *features)
    net.block = ""
    net.add(Dropout(0.2), x)
    net.add(AvgPool2D(2))
    net.add(GlobalAvgPool())
    net.add(Dense(10))
    return net.spec("graph-small", (16, 16, 3), "cross_entropy", "every graph layer kind, small", batch=2)


def newer_kinds() -> ModelSpec:
    """Every layer kind an imported Keras net brings, small: rescale and normalize the pixels, an uneven zero pad
    before a 'valid' stride-2 conv (EfficientNet's stem), layer norm, SiLU, a squeeze-and-excite gate (the mean,
    dense, sigmoid, reshape to (1, 1, C), multiply), GELU, hard swish and hard sigmoid (MobileNetV3's), bilinear and
    nearest upsampling around a padded average pool, per-example dropout and a kept-dims mean reshaped flat for the
    classifier."""
    net = Graph()
    net.add(Rescale(1 / 255))
    net.add(Normalize())
    net.add(ZeroPad2D(bottom=1, right=1))
    net.add(Conv2D(8, 3, 2, "valid"))
    net.add(LayerNorm())
    x = net.add(SiLU())
    net.add(GlobalAvgPool(), x)
    net.add(Dense(8))
    net.add(Sigmoid())
    gate = net.add(Reshape((1, 1, 8)))
    net.add(Multiply(), x, gate)
    net.add(GELU())
    net.add(HardSwish())
    net.add(HardSigmoid())
    net.add(Upsample2D(2, "bilinear"))
    net.add(AvgPool2D(3, 2, padding=1))
    net.add(Upsample2D(2))
    net.add(Dropout(0.2, per_example=True))
    net.add(GlobalAvgPool(keepdims=True))
    net.add(Reshape((8,)))
    net.add(Dense(10))
    return net.spec("newer-kinds", (8, 8, 3), "cross_entropy", "every newer layer kind, small", batch=2)


def dense_block(layers: int, growth: int = 8) -> ModelSpec:
    """One DenseNet block: each layer reads the concatenation of every earlier feature map (BN-ReLU-conv 3x3)."""
    net = Graph()
    features = [net.add(Conv2D(growth, 3, padding=1, bias=False))]
    for _ in range(layers):
        joined = net.add(Concat(), *features) if len(features) > 1 else features[0]
        net.add(BatchNorm(), joined)
        net.add(ReLU())
        features.append(net.add(Conv2D(growth, 3, padding=1, bias=False)))
    net.add(Concat(), *features)
    net.add(GlobalAvgPool())
    net.add(Dense(10))
    return net.spec(f"dense-{layers}", (16, 16, 3), "cross_entropy", "a dense block", batch=8)


def test_every_framework_has_a_rule_for_every_layer_kind() -> None:
    kinds = set(LAYER_TYPES) | {"pad"}
    for name, rules in RULES.items():
        assert rules.saves.keys() == kinds, name
        for table in (rules.saves, rules.cuda_saves, rules.in_place_saves):
            assert all(set(saved) <= set(SAVED_KINDS) for saved in table.values()), name
        assert rules.saves["add"] == rules.saves["concat"] == ()  # a sum's and a join's gradients need only shapes
        assert rules.saves["global_avg_pool"] == rules.saves["pad"] == ()  # so do a mean's and a padding's


def test_dense_block_keeps_quadratically_without_efficient_and_linearly_with_it() -> None:
    torch = RULES["torch"]
    plain = [activations(dense_block(n), torch, 8, 4).saved for n in (8, 16, 32)]
    efficient = [activations(dense_block(n), torch, 8, 4, "efficient").saved for n in (8, 16, 32)]
    for kept in (plain, efficient):
        assert kept[0] < kept[1] < kept[2]
    # each layer keeps its concatenation (and its ReLU's output): k + 2k + ... grows as n^2
    assert math.log2(plain[2] / plain[1]) > 1.7
    # recomputing concat-BN-ReLU-conv keeps each layer's own feature map only: n
    assert 0.9 < math.log2(efficient[2] / efficient[1]) < 1.1
    assert efficient[2] < plain[2] / 5


@pytest.mark.parametrize("framework", list(RULES))
def test_bnrelu_keeps_less_than_none_on_resnet50(framework: str) -> None:
    spec = get_model("resnet50")
    none, bnrelu = (activations(spec, RULES[framework], 8, 4, technique) for technique in ("none", "bnrelu"))
    assert bnrelu.saved < none.saved and bnrelu.backward_peak < none.backward_peak
    checkpoint = activations(spec, RULES[framework], 8, 4, "checkpoint")
    assert checkpoint.saved < bnrelu.saved  # a whole bottleneck recomputed keeps only its input


def _skip(kind: type) -> ModelSpec:
    """Three 1x1 convs; the last layer adds the first conv's output back (Add) or only reads the third (ReLU)."""
    net = Graph()
    first = net.add(Conv2D(4, 1, padding=0))
    net.add(Conv2D(4, 1, padding=0))
    third = net.add(Conv2D(4, 1, padding=0))
    net.add(Add(), third, first) if kind is Add else net.add(ReLU(), third)
    net.add(Flatten())
    net.add(Dense(1))
    return net.spec("skip", (8, 8, 4), "mse", "a skip connection", batch=64)


def test_a_skip_connection_keeps_a_second_gradient_alive() -> None:
    """Back-propagating the convs under a skip, the skip's gradient (from the add) waits for the first conv: three
    activation gradients live at once where a chain has two (its output's and its input's)."""
    activation = 64 * 8 * 8 * 4 * 4  # one 8x8x4 map for the batch of 64, in bytes
    for kind, live in ((Add, 3), (ReLU, 2)):
        acts = activations(_skip(kind), RULES["neutral"], 64, 4)
        assert acts.backward_peak - acts.backward_saved - acts.backward_gradients == live * activation, kind


def test_in_place_activations_follow_the_spec_and_torch_relu6_keeps_a_clone() -> None:
    spec, torch = get_model("mobilenetv2"), RULES["torch"]
    in_place = techniques.in_place(spec, "inplace")
    assert len(in_place) == sum(1 for layer in spec.layers if layer.kind == "relu6")  # each reads a lone batch norm
    # hardtanh_'s backward reads its original input, so autograd keeps a clone: in place saves no backward memory
    plain, inplace = (activations(spec, torch, 8, 4, technique) for technique in ("none", "inplace"))
    assert inplace.saved == plain.saved
    # the neutral rules keep ReLU6's output, which in place is the batch norm's: one tensor either way
    assert activations(spec, RULES["neutral"], 8, 4, "inplace").saved == activations(spec, RULES["neutral"], 8, 4).saved


def test_an_activation_runs_in_place_only_where_no_other_layer_reads_what_it_would_write() -> None:
    """Through a view (a flatten, a reshape) the tensor written is the one viewed: in place only where the view is
    its one reader; never on a crop or channel slice (torch's slice writes the tensor it was cut from)."""
    net = Graph()
    flat = net.add(ReLU(), net.add(Flatten(), net.add(Conv2D(4), INPUT)))  # the flatten alone reads its conv
    reshaped = net.add(ReLU(), net.add(Reshape((1, 1, 16)), net.add(Conv2D(4), INPUT)))
    cropped = net.add(ReLU(), net.add(Crop2D(top=1), net.add(Conv2D(4), INPUT)))
    net.add(Concat(), flat, net.add(Flatten(), reshaped), net.add(Flatten(), cropped))
    assert techniques.in_place(net.spec("views", (2, 2, 3), "mse", "", batch=2), "inplace") == {flat, reshaped}
    skip = Graph()
    image = skip.add(Conv2D(4))
    flat = skip.add(ReLU(), skip.add(Flatten(), image))  # writing the flatten would write the conv's output ...
    skip.add(Concat(), flat, skip.add(Flatten(), skip.add(Conv2D(4), image)))  # ... which this conv reads too
    assert techniques.in_place(skip.spec("skip-view", (2, 2, 3), "mse", "", batch=2), "inplace") == set()


def test_keras_pads_pixel_padding_as_a_copy_the_others_inside_the_op() -> None:
    spec = get_model("resnet50")  # a 7x7 conv padded by 3, a 3x3 max-pool padded by 1, 3x3 convs padded by 1
    padded = sum(1 for layer in spec.layers if getattr(layer, "padding", 0) not in (0, "valid", "same"))
    for name, rules in RULES.items():
        pads = [op for op in steps(spec, rules, 4) if op.kind == "pad"]
        assert len(pads) == (padded if name.startswith("keras-") else 0), name
    stem = steps(spec, RULES["keras-jax"], 4)[:2]
    assert [op.kind for op in stem] == ["pad", "conv2d"] and stem[0].outputs == 230 * 230 * 3 == stem[1].inputs


def test_torch_dropout_keeps_float_noise_on_the_cpu_and_a_bool_mask_on_cuda() -> None:
    spec, torch = small_graph(), RULES["torch"]
    feature_map = 8 * 8 * 16  # the dense block's output, which dropout reads
    cpu, cuda = (activations(spec, torch, 2, 4, device=device).saved for device in ("cpu", "cuda"))
    assert cpu - cuda == feature_map * 2 * (4 - 1)


def test_weights_count_statistics_but_gradients_and_state_do_not() -> None:
    spec = get_model("resnet50")
    train = estimate(spec, "train", 8, "adam", framework="torch")
    step = train.phase("train_step_2").items
    trainable, statistics = spec.weight_bytes(), spec.statistics_bytes()
    assert statistics == 53_120 * 4
    assert step["weights"] == trainable + statistics
    assert train.phase("inference").items["gradients"] == trainable  # torch keeps .grad
    assert train.phase("compile").items["optimizer_state"] == 0
    jax = estimate(spec, "train", 8, "adam", framework="jax")
    assert jax.phase("compile").items["optimizer_state"] == 2 * trainable
    assert floor(spec, "infer", 1, "adam", 4) > spec.weight_bytes() + spec.statistics_bytes()


def test_inference_holds_the_skip_and_hand_count_counts_each_new_tensor() -> None:
    spec = get_model("resnet50")
    # the largest live set: three 56x56x256 maps, a bottleneck's shortcut, its branch and their sum at the add
    peak = activations(spec, RULES["torch"], 1, 4).inference_transient
    assert peak == 3 * 56 * 56 * 256 * 4
    # the floor leaves the shortcut out (which tensor spans the block is the schedule's choice) and the sum (an add
    # may run in place): TensorFlow's CPU inference at batch 8 needs less than weights and three such maps
    assert floor(spec, "infer", 1, "sgd", 4) < spec.weight_bytes() + spec.statistics_bytes() + peak
    relu_free = sum(math.prod(s.output_shape) for s in spec.walk() if s.layer.kind != "relu")
    assert hand_count(spec) == 224 * 224 * 3 + relu_free


def test_keras_on_torch_holds_every_layer_output_through_an_inference() -> None:
    """Run eagerly, Keras's Functional keeps each layer's output until the call returns: inference holds them all,
    a recomputed run as one layer (its output, plus its own outputs while it runs)."""
    spec = get_model("resnet50")
    # every layer's output and each ZeroPadding2D copy Keras puts before a conv or pool with integer padding
    every_output = sum(op.outputs for op in steps(spec, RULES["keras-torch"], 4)) * 4
    assert every_output > sum(math.prod(s.output_shape) for s in spec.walk()) * 4
    assert activations(spec, RULES["keras-torch"], 1, 4).inference_transient == every_output
    assert activations(spec, RULES["torch"], 1, 4).inference_transient < every_output / 10
    per_block = activations(spec, RULES["keras-torch"], 1, 4, "checkpoint").inference_transient
    assert activations(spec, RULES["torch"], 1, 4).inference_transient < per_block < every_output


def test_xla_on_the_cpu_keeps_what_a_checkpoint_would_recompute() -> None:
    spec = get_model("resnet50")
    for framework in ("jax", "keras-jax"):
        cpu = {t: estimate(spec, "train", 8, framework=framework, device="cpu", technique=t).peak.total
               for t in ("none", "checkpoint", "bnrelu")}
        cuda = {t: estimate(spec, "train", 8, framework=framework, device="cuda", technique=t).peak.total
                for t in ("none", "checkpoint")}
        assert cpu["none"] == cpu["checkpoint"] == cpu["bnrelu"] and cuda["checkpoint"] < cuda["none"]


def test_tensorflow_on_the_cpu_keeps_each_phase_high_water_mark() -> None:
    """Pages a phase freed stay with the process: no phase after the step holds less than it, and the retained
    pages are the host's alone, not the allocator's."""
    spec = get_model("resnet50")
    cpu = estimate(spec, "train", 8, framework="keras-tensorflow", device="cpu")
    totals = [phase.total for phase in cpu.phases if phase.items]
    assert totals == sorted(totals)
    inference = cpu.phase("inference")
    assert inference.items["retained_pages"] > 0
    assert inference.total == max(cpu.phase(name).total for name in ("train_step_1", "train_step_2"))
    assert "retained_pages" not in estimate(spec, "train", 8, framework="keras-tensorflow", device="cuda").phase(
        "inference").items


# newer_kinds()'s tensors, values per example: the zero pad's 9x9x3, the stride-2 conv's and layer norm's 4x4x8 (and
# SiLU's, the multiply's, GELU's and the hard ones'), the squeeze's 8-vectors, the bilinear 8x8x8 and its 10x10x8
# padded copy where Keras pads
PADDED, MAP, VECTOR, BIG, KERAS_PAD = 9 * 9 * 3, 4 * 4 * 8, 8, 8 * 8 * 8, 10 * 10 * 8
POSITIONS, LOSS = 4 * 4, 10  # layer norm's per-position floats; the loss's residual, 10 classes
# What every framework keeps: the conv the pad's output (Keras on torch a channels-first copy of it), the dense layers
# their 8-vector inputs, multiply SiLU's output and the gate (the sigmoid's output, which the reshape views), and the
# loss's residual. Then per framework: (values per example beyond it, bools per example, bytes whatever the batch);
# the dropout's mask or noise is one value per example, a composed normalize keeps its 3-channel divisor (12 bytes).
COMMON = PADDED + 3 * VECTOR + MAP + LOSS
NEWER_KINDS_KEPT = {
    # layer norm, SiLU, GELU and hard swish their inputs, hard sigmoid its output
    "neutral": (3 * MAP + 2 * MAP, 1, 0),
    # and layer norm's mean and rstd, the average pool's input (the bilinear map), float noise (hard sigmoid its input)
    "torch": (3 * MAP + 2 * MAP + 2 * POSITIONS + BIG + 1, 0, 12),
    # layer norm its input, its scale times rsqrt and three per position; SiLU its input; GELU three of its size; hard
    # swish its input, relu6's output and the hard sigmoid; hard sigmoid relu6's output
    "keras-tensorflow": (2 * MAP + MAP + 3 * POSITIONS + 3 * MAP + 3 * MAP + MAP, 1, 12),
    # SiLU its input and two of its size; layer norm three and three per position; sigmoid one; GELU three; hard swish
    # its input and the hard sigmoid, and a bool mask as hard sigmoid does
    "jax": (3 * MAP + 3 * MAP + 3 * POSITIONS + VECTOR + 3 * MAP + 2 * MAP, 1 + 2 * MAP, 12),
    # layer norm its input, two of its size and four per position; the rest as jax
    "keras-jax": (3 * MAP + 3 * MAP + 4 * POSITIONS + VECTOR + 3 * MAP + 2 * MAP, 1 + 2 * MAP, 12),
    # as torch, but the pool keeps a channels-first copy of Keras's padded input, and the conv a copy of its kernel
    "keras-torch": (3 * MAP + 2 * MAP + 2 * POSITIONS + KERAS_PAD, 1, 12 + 3 * 3 * 3 * 8 * 4),
}


@pytest.mark.parametrize("framework", list(RULES))
def test_the_newer_kinds_keep_their_hand_count(framework: str) -> None:
    """Each framework's rules for the newer kinds, on one small net, against a count by hand (the rules themselves
    are checked against autograd's saved tensors in tests/test_estimate.py)."""
    values, bools, fixed = NEWER_KINDS_KEPT[framework]
    for batch in (1, 4):
        assert activations(newer_kinds(), RULES[framework], batch, 4).saved == (
            batch * (4 * (COMMON + values) + bools) + fixed)


def test_the_newer_kinds_views_pads_and_counts() -> None:
    """A reshape makes no tensor (as flatten); Keras alone pads an average pool's pixels as a copy; the hand count
    leaves the element-wise layers, the reshapes and dropout out; the floor counts the upsampling's new tensor."""
    spec = newer_kinds()
    for name, rules in RULES.items():
        pads = [op.kind for op in steps(spec, rules, 4) if op.kind == "pad"]
        assert pads == (["pad"] if name.startswith("keras-") else []), name
    made = PADDED + 2 * MAP + 2 * VECTOR + MAP + BIG + MAP + BIG + VECTOR + LOSS  # each output of a new value
    assert hand_count(spec) == 8 * 8 * 3 + made
    # the largest step making a new tensor: the bilinear upsampling, 4x4x8 in and 8x8x8 out
    assert floor(spec, "infer", 1, "sgd", 4) == 4 * (spec.param_count + spec.statistics_count + 8 * 8 * 3 + MAP + BIG)
