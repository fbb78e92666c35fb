"""The analytic estimate: hand counts, its arithmetic, and its rules checked against real frameworks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from models.catalogue import KIND_COST_PROBES, Graph, get_model
from models.estimate import RULES, activations, estimate, hand_count
from models.layer_kinds import PROBED, census
from models.record import phase
from models.scenario import Scenario
from models.spec import (
    ELU,
    AdaptiveAvgPool2D,
    BatchNorm,
    ChannelShuffle,
    ChannelSlice,
    Concat,
    Conv2D,
    ConvTranspose2D,
    Crop2D,
    Dense,
    Flatten,
    GlobalAvgPool,
    GroupNorm,
    HardSigmoid,
    HardSwish,
    InstanceNorm,
    LayerScale,
    LeakyReLU,
    MaxPool2D,
    Mish,
    ModelSpec,
    Pad2D,
    PReLU,
    ReLU,
    Resize2D,
    Softplus,
)
from suites.analysis import accounting, constants, figures, kind_costs
from suites.run.orchestrator import run_scenario, worker_environment
from suites.run.registry import ROOT, interpreter
from tests.conftest import FRAMEWORKS, run_cli, steps_in_one_worker
from tests.test_estimate_graph import newer_kinds, small_graph

# CS231n's VGG-16 table, one entry per layer output (ReLU in place), input first.
CS231N_VGG16 = ([224 * 224 * 3] + [224 * 224 * 64] * 2 + [112 * 112 * 64] + [112 * 112 * 128] * 2 + [56 * 56 * 128]
                + [56 * 56 * 256] * 3 + [28 * 28 * 256] + [28 * 28 * 512] * 3 + [14 * 14 * 512]
                + [14 * 14 * 512] * 3 + [7 * 7 * 512] + [4096, 4096, 1000])


def test_vgg16_hand_count_is_cs231n_per_layer_table() -> None:
    spec = get_model("vgg16")
    assert hand_count(spec) == sum(CS231N_VGG16) == 15_237_608  # the notes' own rows; their "24M" total is not
    assert spec.param_count == 138_357_544
    infer = estimate(spec, "infer", 1, framework=None)
    assert infer.phase("inference").items["weights"] == 138_357_544 * 4
    # inference holds one layer's input and output at once: the largest pair is 224x224x64 in and out
    assert infer.phase("inference").items["transient"] == 2 * 224 * 224 * 64 * 4


def test_keras200m_weights_and_adam() -> None:
    train = estimate(get_model("keras200m"), "train", 1, "adam", framework="torch")
    step = train.phase("train_step_1").items
    assert step["weights"] == 826_152_612 and step["gradients"] == 826_152_612
    assert step["optimizer_state"] == 2 * 826_152_612
    largest = 3 * 3 * 1024 * 1024 * 4
    assert step["update_temporaries"] == 2 * largest  # torch's per-tensor Adam on the CPU: sqrt, then divide


def test_batch_scales_activations_not_weights() -> None:
    spec = get_model("plain-4")
    one, eight = (estimate(spec, "train", batch, "sgd", framework="keras-tensorflow") for batch in (1, 8))
    assert one.phase("build").items["weights"] == eight.phase("build").items["weights"]
    assert activations(spec, RULES["jax"], 8, 4).saved == 8 * activations(spec, RULES["jax"], 1, 4).saved
    assert "optimizer_state" not in {k for k, v in one.phase("train_step_2").items.items() if v}  # plain SGD


@pytest.mark.parametrize(("depth", "batch"), [(8, 2), (20, 16), (3000, 2)])
def test_a_deep_chain_is_its_closed_form(depth: int, batch: int) -> None:
    """plain-N under the neutral rules, figure by figure, at depths where an estimate quadratic in depth would crawl
    (3,000 conv-ReLU pairs took 9 s): each ReLU's output is kept once (by it and by the next conv); the backward peaks
    at the last ReLU, with every ReLU output kept, its output's and input's gradients and the dense layer's weight
    gradient (deeper, a pair frees more activations than its conv's gradient adds); inference holds one conv's input
    and output."""
    value, feature, head = batch * 4, 32 * 32 * 64, 8 * 8 * 64  # one activation's bytes; a feature map; max-pool's out
    dense = (head * 10 + 10) * 4
    acts = activations(get_model(f"plain-{depth}"), RULES["neutral"], batch, 4)
    assert acts.saved == value * (depth * feature + head + 10)  # and the loss's residual, 10 classes
    assert (acts.backward_peak, acts.backward_saved, acts.backward_gradients) == (
        value * (depth + 2) * feature + dense, value * depth * feature, dense)
    assert acts.inference_transient == value * 2 * feature


def test_a_net_that_makes_no_tensor_or_keeps_its_output_is_estimated() -> None:
    """A lone flatten makes no tensor, so inference holds nothing beside the batch; a conv that is the net's output,
    kept by JAX's bnrelu policy on a GPU, is read by no step (only the loss): kept at the forward's end, not during the
    backward. Both were a `max()` or `min()` of nothing."""
    flat = ModelSpec("flat", (4,), (Flatten(),), "mse")
    assert estimate(flat, "infer", 2).phase("inference").items["transient"] == 0
    out = ModelSpec("conv-out", (8, 8, 3), (BatchNorm(), ReLU(), Conv2D(4)), "mse")
    acts = activations(out, RULES["jax"], 2, 4, "bnrelu", device="cuda")
    assert acts.saved == 2 * (2 * 4 * 8 * 8 * 4)  # the loss's residual and the kept output
    assert acts.backward_saved == 2 * 4 * 8 * 8 * 3  # the conv's input (the ReLU's output) while its run is recomputed


def test_a_tracked_forward_holds_what_it_keeps_beside_what_is_live() -> None:
    """conv, ReLU, max-pool, conv, ReLU, dense under torch's rules, tracked: each ReLU's output is kept (by it, and by
    the pool or the dense layer after it), the pool's output (by the conv) and its int64 indices, each conv's output
    is not. The peak is at the second ReLU: everything kept and the second conv's output, its input, live; the
    transient is that conv output alone, not the untracked forward's peak on top of what is kept."""
    chain = ModelSpec("chain", (8, 8, 3), (Conv2D(4), ReLU(), MaxPool2D(), Conv2D(6), ReLU(), Flatten(), Dense(5)),
                      "mse")
    value, first, pooled, second = 2 * 4, 8 * 8 * 4, 4 * 4 * 4, 4 * 4 * 6  # a value's bytes at batch 2; elements
    tracked = estimate(chain, "infer", 2, framework="torch", technique="tracked").phase("inference").items
    # the ReLUs' outputs, the pool's and its indices; no loss, so no loss residual
    assert tracked["saved_activations"] == value * (first + pooled + second) + 2 * pooled * 8
    assert tracked["transient"] == value * second


def test_optimizer_state_arrives_where_each_framework_makes_it() -> None:
    spec = get_model("keras-small")
    jax, torch = (estimate(spec, "train", 10, "adam", framework=name) for name in ("jax", "torch"))
    state = 2 * spec.weight_bytes()
    assert jax.phase("compile").items["optimizer_state"] == state
    assert torch.phase("compile").items["optimizer_state"] == 0
    assert torch.phase("train_step_1").items["optimizer_state"] in (0, state)  # 0 when the backward pass peaks


GRAPH_SMALL = "graph-small"  # tests.test_estimate_graph.small_graph: every graph layer kind, run from a spec file
NEWER_KINDS = "newer-kinds"  # tests.test_estimate_graph.newer_kinds: every newer layer kind, from a spec file too
HARD_KINDS = "hard-kinds"  # hard_kinds(): MobileNetV3's activations, each read by the layer after it
ZOO_KINDS = "zoo-kinds"  # zoo_kinds(): the kinds the public conv nets brought
NEXT_KINDS = "next-kinds"  # next_kinds(): the kinds timm's and the segmentation nets brought
DENSE_KINDS = "dense-kinds"  # dense_kinds(): the kinds the dense-prediction and medical nets brought


def hard_kinds() -> ModelSpec:
    """Hard swish and hard sigmoid between convs: what JAX's pullback keeps of them (jax.nn.relu6's mask and zeros
    inside both), with nothing else in the net the tracked rules could miss; one kernel shape and no bias, as each new
    shape costs the JAX process a compilation of its random draw."""
    return ModelSpec(HARD_KINDS, (8, 8, 8), (Conv2D(8, bias=False), HardSwish(), Conv2D(8, bias=False), HardSigmoid(),
                                             GlobalAvgPool()), "mse")


def zoo_kinds() -> ModelSpec:
    """The kinds the public conv nets brought, each between convs so that what it keeps is its own: ConvNeXt's layer
    scale, NASNet's crop (a view in torch, which the adaptive pool after it keeps whole), VGG's adaptive pool (uneven
    windows, growing one axis), ShuffleNet's channel split (views in torch, one kept by the conv that reads it) and
    channel shuffle."""
    net = Graph()
    net.add(Conv2D(4, bias=False))
    net.add(LayerScale())
    net.add(Crop2D(top=1, left=2))
    net.add(AdaptiveAvgPool2D((5, 9)))
    pooled = net.add(ReLU())
    kept = net.add(ChannelSlice(0, 2), pooled)
    branch = net.add(Conv2D(2, 1, bias=False), net.add(ChannelSlice(2, 4), pooled))
    net.add(Concat(), kept, branch)
    net.add(ChannelShuffle(2))
    net.add(Conv2D(4, bias=False))
    net.add(GlobalAvgPool())
    return net.spec(ZOO_KINDS, (9, 9, 4), "mse", "the zoo's kinds, small", batch=2)


def next_kinds() -> ModelSpec:
    """The kinds timm's and the segmentation nets brought, each between convs so that what it keeps is its own: a
    dilated conv and a dilated depthwise one (the atrous convs), CSP nets' LeakyReLU and Mish, ELU and Softplus."""
    return ModelSpec(NEXT_KINDS, (9, 9, 4), (Conv2D(4, bias=False, dilation=2), LeakyReLU(0.2),
                                             Conv2D(4, bias=False, groups=4, dilation=3), ELU(), Conv2D(4, bias=False),
                                             Softplus(), Conv2D(4, bias=False), Mish(), GlobalAvgPool()), "mse")


def dense_kinds() -> ModelSpec:
    """The kinds the dense-prediction and medical nets brought, each between convs so that what it keeps is its own:
    reflect and replicate padding, group norm with and without its scale, instance norm with and without it (torch
    repeats an instance norm's scale per example), PReLU per channel and shared, transposed convs (one depthwise),
    resizes (nearest by a scale, bilinear to a size with the corners aligned); and a second output, a map the net
    reads on from (deep supervision's), whose loss keeps its own residual."""
    return ModelSpec(DENSE_KINDS, (9, 9, 4), (
        Pad2D(1, 1, 2, 0), Conv2D(4, bias=False), GroupNorm(2), PReLU(), Conv2D(4, bias=False),
        Pad2D(0, 1, 1, 1, mode="replicate"), Conv2D(4, bias=False), GroupNorm(1, affine=False), Conv2D(4, bias=False),
        InstanceNorm(), Conv2D(4, bias=False), InstanceNorm(affine=True), PReLU(shared=True), Conv2D(4, bias=False),
        ConvTranspose2D(4, 3, 2, padding=1, output_padding=1), ReLU(), ConvTranspose2D(4, 2, 2, groups=4), ReLU(),
        Resize2D(scale=0.7), Conv2D(4, bias=False), Resize2D(size=(5, 7), interpolation="bilinear", align_corners=True),
        Conv2D(4, bias=False), GlobalAvgPool()), "mse", outputs=(22, 4))


SPEC_FILES = {GRAPH_SMALL: small_graph, NEWER_KINDS: newer_kinds, HARD_KINDS: hard_kinds, ZOO_KINDS: zoo_kinds,
              NEXT_KINDS: next_kinds, DENSE_KINDS: dense_kinds}


SAVED_CASES = [
    *(("torch", model, batch, "none") for model, batch in (("keras-small", 2), ("heatmap68", 2), ("plain-2", 2),
                                                           ("resnet50", 1))),
    *(("torch", GRAPH_SMALL, 2, technique) for technique in ("none", "inplace", "checkpoint", "bnrelu", "efficient")),
    *(("keras-torch", model, batch, "none") for model, batch in (("heatmap68", 2), (GRAPH_SMALL, 2), ("resnet50", 1))),
    *((framework, model, 2, "none") for framework in ("torch", "keras-torch")
      for model in (NEWER_KINDS, ZOO_KINDS, NEXT_KINDS, DENSE_KINDS))]


def _spec(model: str) -> ModelSpec:
    return SPEC_FILES[model]() if model in SPEC_FILES else get_model(model)


def _model_named(model: str, folder: Path) -> str:
    """What names the model to a worker: a catalogue name itself, a model of SPEC_FILES its spec file, written into
    `folder`."""
    if model not in SPEC_FILES:
        return model
    path = folder / f"{model}.json"
    path.write_text(json.dumps(_spec(model).to_dict()))
    return str(path)


@pytest.fixture(scope="module")
def saved_by_autograd(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str, int, str], int]:
    """Per case of SAVED_CASES, the bytes autograd's saved-tensor hooks saw its first step keep: every case of a
    framework in one process (the framework's import paid once), since what is saved is the framework's arithmetic,
    not the process's memory (`test_torch_rules_match_a_record_s_saved_tensors` reads it from a worker's record)."""
    folder = tmp_path_factory.mktemp("saved")
    scenarios: dict[str, list[Scenario]] = {}
    for framework, model, batch, technique in SAVED_CASES:
        scenarios.setdefault(framework, []).append(
            Scenario.create(framework, _model_named(model, folder), device="cpu", batch=batch, technique=technique))
    saved: dict[tuple[str, str, int, str], int] = {}
    for framework, given in scenarios.items():
        cases = [case for case in SAVED_CASES if case[0] == framework]
        steps = steps_in_one_worker(given, folder / framework)
        saved |= {case: each[0]["saved_activation_bytes"] for case, each in zip(cases, steps, strict=True)}
    return saved


def _assert_torch_rules_predict(framework: str, spec: ModelSpec, batch: int, technique: str, measured: int) -> None:
    predicted = activations(spec, RULES[framework], batch, 4, technique).saved
    # torch's cross-entropy also keeps a 4-byte scalar; Keras's losses keep a few scalars and, for cross-entropy,
    # the labels as int64
    assert abs(measured - predicted) <= (8 if framework == "torch" else 16 + 8 * batch), (measured, predicted)


@pytest.mark.parametrize(("framework", "model", "batch", "technique"), SAVED_CASES)
def test_torch_rules_match_autograd_saved_tensors(framework: str, model: str, batch: int, technique: str,
                                                  saved_by_autograd: dict[tuple[str, str, int, str], int]) -> None:
    """autograd's saved-tensor hooks list what the backward keeps; the torch rules must predict it, on chains and
    graphs (batch norm, add, concat, depthwise conv, ReLU6, dropout, pooling), on the newer kinds (layer norm, SiLU,
    GELU, sigmoid, multiply, upsampling, per-example dropout...), on the zoo's (layer scale, crop, adaptive pool)
    and under each technique; the keras-torch rules too
    (Keras's channels-first copies, its composed batch norm)."""
    _assert_torch_rules_predict(framework, _spec(model), batch, technique,
                                saved_by_autograd[framework, model, batch, technique])


def test_torch_rules_match_a_record_s_saved_tensors(records: dict[str, dict]) -> None:
    """The same figure as a worker's phases record it, in torch's keras-small run the records below share."""
    record = records["torch"]
    assert record["status"] == "ok", record["failure"]
    _assert_torch_rules_predict("torch", get_model("keras-small"), record["scenario"]["batch"], "none",
                                phase(record, "train_step_1")["notes"]["saved_activation_bytes"])


# Run in JAX's interpreter: tests.count_residuals of each (model, batch) in turn, in this one process, one JSON a line.
RESIDUALS = """
import contextlib, io, sys
from tests.count_residuals import main
for model, batch in zip(*[iter(sys.argv[1:])] * 2):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        main(model, batch)
    print(out.getvalue())
"""
RESIDUAL_CASES = [("resnet50", 2), ("heatmap68", 2), (HARD_KINDS, 2)]


@pytest.fixture(scope="module")
def pullback_residuals(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], int]:
    """The bytes tests.count_residuals counts for each of RESIDUAL_CASES, all in one JAX process (a model of
    SPEC_FILES given as its spec file)."""
    folder = tmp_path_factory.mktemp("residuals")
    models = [x for model, batch in RESIDUAL_CASES for x in (_model_named(model, folder), str(batch))]
    done = subprocess.run([interpreter("jax"), "-c", RESIDUALS, *models],
                          cwd=ROOT, env=worker_environment(), capture_output=True, text=True, timeout=600, check=True)
    counted = [json.loads(line)["bytes"] for line in done.stdout.splitlines() if line]
    return dict(zip(RESIDUAL_CASES, counted, strict=True))


@pytest.mark.parametrize(("model", "batch"), RESIDUAL_CASES)
def test_jax_tracked_rules_match_the_pullbacks_residuals(model: str, batch: int,
                                                         pullback_residuals: dict[tuple[str, int], int]) -> None:
    """jax.vjp over the jitted forward (the jax column's tracked inference) keeps every residual JAX's partial
    evaluation names, none fused away: a batch norm in evaluation mode its scaled difference and two per-channel
    vectors, a ReLU its mask and a zero tensor of its size (jax.nn.relu's jvp selects from one; jax.nn.relu6's too,
    inside hard sigmoid and hard swish, which keeps its input and the hard sigmoid as well). The estimate's saved
    activations are the pullback's arrays beyond the weights and the batch, to the byte (resnet50 at batch 2:
    262,900,224 bytes; the H100 at c3d4247 peaked at the weights, the batch and 2,004 MiB of them at batch 16)."""
    measured = pullback_residuals[model, batch]
    predicted = estimate(_spec(model), "infer", batch, framework="jax", technique="tracked")
    assert predicted.phase("inference").items["saved_activations"] == measured


@pytest.fixture(scope="module")
def records(shared_run: Callable[[Scenario], dict]) -> dict[str, dict]:
    """One real keras-small training run per framework, as the orchestrator returns it (measurements only): the
    session's, which test_records and test_keras read too."""
    return {framework: shared_run(Scenario.create(framework, "keras-small", device="cpu")) for framework in FRAMEWORKS}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_read_record_carries_estimate_error_breakdown_and_floor(records: dict[str, dict], framework: str) -> None:
    """The run machinery stores measurements only; the estimate, its error, the breakdown and the floor are computed
    where the record is read (here with the published constants, as a run without probes is)."""
    measured = records[framework]
    assert measured["status"] == "ok", measured["failure"]
    assert not {"estimate", "comparison", "breakdown", "floor"} & set(measured)
    record = accounting.reaccount({"records": [measured]})[0]
    assert record["estimate"]["constants"]["source"] == "results/cpu-a4d9e61/constants-cpu.json"
    assert record["estimate"]["rules"] == framework and record["estimate"]["phases"]["build"]["total"] > 0
    base = figures.baseline(record, "cpu")
    for name in ("build", "compile", "train_step_1", "train_step_2", "inference"):
        driver = record["comparison"][name]["driver"]
        assert driver["measured"] == figures.driver_peak(phase(record, name), "cpu")[0] - base
        if "estimate" in driver:
            assert driver["relative_error"] == pytest.approx((driver["estimate"] - driver["measured"])
                                                             / driver["measured"], abs=1e-4)
        parts = record["breakdown"][name]
        assert sum(part["bytes"] for part in parts.values()) == figures.driver_peak(phase(record, name), "cpu")[0]
        assert parts["weights"] == {"bytes": 313_617 * 4, "basis": "measured",
                                    "source": "the framework's tensors at the end of the phase"}
    assert record["floor"]["ratio"] == pytest.approx(record["floor"]["peak_bytes"] / record["floor"]["bytes"], 1e-3)


def test_tensorflow_allocator_view_and_framework_estimates(records: dict[str, dict]) -> None:
    read = accounting.reaccount({"records": [records["keras-tensorflow"]]})[0]
    step = read["comparison"]["train_step_2"]
    if read["framework"]["onednn"]["enabled"]:
        assert step["allocator"]["measured"] > 0 and step["allocator"]["tensors"] > 0
    else:  # TensorFlow's CPU allocator keeps no statistics (tests/test_user_environment.py): the driver's view alone
        assert "allocator" not in step and step["driver"]["measured"] > 0
    plan = phase(records["jax"], "compile")["notes"]["memory_analysis"]["train_step"]
    own = accounting.framework_tensors(records["jax"])["train_step_1"]
    assert own == (plan["argument"]["bytes"] + plan["temp"]["bytes"] + plan["output"]["bytes"]
                   - plan["alias"]["bytes"], "jax: compiled memory_analysis()")
    tracker = records["torch"]["framework_estimate"]["mem_tracker"]
    assert tracker["phase"] == "train_step_1" and tracker["by_category"]["Parameter"] == 313_617 * 4


def _taken(*records: dict) -> dict | None:
    """The constants a run of these records gives, as a report reads them."""
    return constants.of_run({"started_at": "now", "records": list(records)})[0]


@pytest.fixture(scope="module")
def probe_record(shared_run: Callable[[Scenario], dict]) -> dict:
    """One torch probe run (the session's), which both the probe's constants and the depth probe's are measured
    against."""
    return shared_run(Scenario.create("torch", constants.PROBE, device="cpu"))


def test_probe_constants_are_measured_minus_analytic(probe_record: dict) -> None:
    record = probe_record
    known = constants.lookup(_taken(record), "torch", "train")
    analytic = constants.analytic_estimate(Scenario.from_dict(record["scenario"]))
    assert known["context"] == figures.baseline(record, "cpu")
    for name in ("build", "train_step_2"):
        rise = figures.driver_peak(phase(record, name), "cpu")[0] - known["context"]
        assert known["phases"][name]["driver"] == rise - analytic.phase(name).total
    again = accounting.account(record, _taken(record))
    assert again["comparison"]["build"]["driver"]["relative_error"] == 0.0  # why the probe is left out of errors


def test_depth_probe_adds_a_measured_cost_per_layer(probe_record: dict) -> None:
    """The depth probe's bytes beyond its tensors, less the probe's, per layer it has more; stored beside the probe's
    constants (never without them) and added per layer beyond the probe's to a deeper net's estimate."""
    deep = run_scenario(Scenario.create("torch", constants.DEEP_PROBE, device="cpu"))
    assert constants.lookup(_taken(deep), "torch", "train") is None  # no probe: nothing to measure against
    known = constants.lookup(_taken(deep, probe_record), "torch", "train")
    depth = known["per_layer"]
    assert depth["probe_layers"] == len(get_model(constants.PROBE).layers)
    assert depth["extra_layers"] == len(get_model(constants.DEEP_PROBE).layers) - depth["probe_layers"]
    beyond = constants.from_probe(deep)["phases"]["train_step_1"]["driver"]
    slope = depth["phases"]["train_step_1"]["driver"]
    assert slope == round((beyond - known["phases"]["train_step_1"]["driver"]) / depth["extra_layers"])
    resnet = estimate(get_model("resnet50"), "train", 1, framework="torch")
    assert constants.overhead(known, "train_step_1", "driver", resnet) == (
        known["phases"]["train_step_1"]["driver"] + max(slope, 0) * (resnet.layers - depth["probe_layers"]))
    one = estimate(get_model("heatmap68"), "train", 1, framework="torch")
    assert constants.overhead(known, "train_step_1", "driver", replace(one, layers=1)) == known["phases"][
        "train_step_1"]["driver"]


def test_the_kind_probes_determine_each_kinds_cost_and_a_net_pays_it_per_layer() -> None:
    """The kind probes' figures, made here from chosen costs per kind (distinct and repeating) and a part every
    probe holds alike, give back those costs; one missing probe gives none; a cost measured below zero counts
    nothing. A net then pays, beyond the probe's fixed cost, each of its layers at its kind's cost less the probe's
    own layers', scaled and with a cost per full conv kernel byte where the zoo's tuned half fitted them."""
    chosen = {kind: {"distinct": (3 + index) * 2**20, "repeat": index * 2**18} for index, kind in enumerate(PROBED)}
    chosen["elementwise"]["repeat"] = -2**16

    def held(name: str) -> int:
        return 150 * 2**20 + sum(chosen[kind][cost] * counts[index] for kind, counts in census(get_model(name)).items()
                                 for index, cost in enumerate(kind_costs.COST_KINDS))

    measured = {name: {"train_step_2": {"driver": held(name)}} for name in KIND_COST_PROBES}
    solved = kind_costs.solve(measured)
    found = solved["phases"]["train_step_2"]["driver"]
    chosen["elementwise"]["repeat"] = 0
    assert found == chosen
    assert kind_costs.solve({name: measured[name] for name in KIND_COST_PROBES[1:]}) is None
    known = {"phases": {"train_step_2": {"driver": 7 * 2**20}}, "kind_costs": solved}
    net = estimate(get_model("mobilenetv2"), "train", 8, framework="jax")
    probe = census(get_model(constants.PROBE))
    by_kind = sum(found[kind][cost] * (net.kinds.get(kind, [0, 0])[index] - probe.get(kind, [0, 0])[index])
                  for kind in PROBED for index, cost in enumerate(kind_costs.COST_KINDS))
    assert net.kinds["depthwise"] == [10, 7] and by_kind > 0  # 17 depthwise convs, 7 repeating one before
    assert constants.overhead(known, "train_step_2", "driver", net) == 7 * 2**20 + by_kind
    assert constants.overhead(known, "inference", "driver", net) is None
    known["depth"] = {"phases": {"train_step_2": {"driver": {"kind_scale": 0.5, "per_kernel_byte": 2.0}}}}
    assert net.full_conv_kernel_bytes == 4 * 3 * 3 * 3 * 32  # its stem: every other conv is 1x1 or depthwise
    assert constants.overhead(known, "train_step_2", "driver", net) == 7 * 2**20 + round(
        0.5 * by_kind + 2.0 * net.full_conv_kernel_bytes)


def test_estimate_command_needs_no_framework() -> None:
    code = ("import sys; from suites.__main__ import main; main(['estimate', '--model', 'vgg16', '--batch', '1', "
            "'--scenario', 'infer', '--device', 'cpu']); "
            "assert not {'torch', 'tensorflow', 'jax', 'keras'} & set(sys.modules), sorted(sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "15,237,608 activation values" in done.stdout and "138,357,544 parameters" in done.stdout
    assert "61.0 MB per example forward" in done.stdout


def test_estimate_command_bad_input_is_one_line() -> None:
    done = run_cli("estimate", "--model", "keras200m", "--batch", "-3")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "batch" in done.stderr
    for wrong in (("--device", "cuda", "--gpu-memory", "24"), ("--device", "cpu", "--gpu-memory", "24GiB")):
        done = run_cli("estimate", "--model", "keras200m", "--framework", "jax", *wrong)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, wrong
        assert "--gpu-memory" in done.stderr and not done.stdout, wrong


DEPTHWISE_PLAN = """
import json, sys
from frameworks.jax_adapter import JaxAdapter
from models.scenario import Scenario
adapter = JaxAdapter(Scenario.create("jax", sys.argv[1], batch=8, kind="train", device="cpu"))
adapter.import_framework()
adapter.init_device()
adapter.build()
print(json.dumps(adapter.compile()["memory_analysis"]["train_step"]))
"""


def test_a_depthwise_convs_filter_gradient_is_planned_as_a_dense_ones_on_xlas_cpu(tmp_path: Path) -> None:
    """XLA's CPU backend computes a depthwise conv's filter gradient as a dense conv's: its plan for the jax
    adapter's train step holds two kh x kw x C x C buffers (a 7x7 conv of 512 channels: 98 MiB, on 2x2 maps whose
    activations are 16 KiB), and the estimate's tensors for that step are the plan's within 2 % (a ConvNeXt's
    depthwise convs ran 20 % above the estimate before this rule). Torch's autograd and the inference plan no such
    buffer."""
    spec = ModelSpec("depthwise-7x7", (2, 2, 512), (Conv2D(512, 7, padding="same", groups=512, bias=False),
                                                    GlobalAvgPool(), Dense(4)), "cross_entropy", default_batch=8)
    path = tmp_path / "depthwise.json"
    path.write_text(json.dumps(spec.to_dict()))
    done = subprocess.run([interpreter("jax"), "-c", DEPTHWISE_PLAN, str(path)], cwd=ROOT, env=worker_environment(),
                          capture_output=True, text=True, timeout=600, check=True)
    plan = json.loads(done.stdout.splitlines()[-1])
    planned = sum(plan[name]["bytes"] for name in ("argument", "temp", "output")) - plan["alias"]["bytes"]
    expanded = 2 * 7 * 7 * 512 * 512 * 4
    assert plan["temp"]["bytes"] >= expanded
    jax_step = estimate(spec, "train", 8, framework="jax", device="cpu").phase("train_step_2")
    assert abs(jax_step.total - planned) <= 0.02 * planned
    assert jax_step.items["transient"] >= expanded
    for framework, kind, name in (("torch", "train", "train_step_2"), ("jax", "train", "inference")):
        held = estimate(spec, kind, 8, framework=framework, device="cpu").phase(name)
        assert held.total < expanded
