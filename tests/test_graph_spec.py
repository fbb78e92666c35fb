"""Specs as graphs: a user's residual net in JSON runs everywhere; every graph error is one line naming the layer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.catalogue import get_model
from models.importers.files import load_spec_file
from models.spec import INPUT, ModelSpec, SpecError
from tests.conftest import FRAMEWORKS, run_cli

# docs/models.md's example: a stem, one residual block (conv-BN-ReLU, conv-BN, add the block's input, ReLU), a head.
RESIDUAL_NET = {
    "name": "my-resnet", "input_shape": [16, 16, 3], "loss": "cross_entropy", "default_batch": 4,
    "layers": [
        {"type": "conv2d", "name": "stem", "filters": 8, "padding": 1, "bias": False},
        {"type": "batchnorm", "name": "stem_bn"},
        {"type": "relu", "name": "stem_relu"},
        {"type": "conv2d", "name": "conv1", "filters": 8, "padding": 1, "bias": False},
        {"type": "batchnorm", "name": "bn1"},
        {"type": "relu", "name": "relu1"},
        {"type": "conv2d", "name": "conv2", "filters": 8, "padding": 1, "bias": False},
        {"type": "batchnorm", "name": "bn2", "momentum": 0.1, "epsilon": 1e-5},
        {"type": "add", "name": "residual", "inputs": ["bn2", "stem_relu"]},
        {"type": "relu", "name": "out"},
        {"type": "global_avg_pool"},
        {"type": "dense", "units": 10},
    ],
}


def _net(**changes: object) -> dict:
    """RESIDUAL_NET with some layers changed: {name: {key: value}} or {name: None} to drop the layer."""
    layers = []
    for layer in RESIDUAL_NET["layers"]:
        change = changes.get(layer.get("name", ""), {})
        if change is not None:
            layers.append(layer | change)
    return RESIDUAL_NET | {"layers": layers}


def test_a_chain_written_as_a_list_is_still_a_chain() -> None:
    spec = get_model("keras-small")
    assert spec.is_chain and [step.inputs for step in spec.walk()][:2] == [(INPUT,), (0,)]
    assert "inputs" not in json.dumps(spec.to_dict())


def test_the_residual_example_reads_as_a_graph() -> None:
    spec = ModelSpec.from_dict(RESIDUAL_NET)
    add = next(step for step in spec.walk() if step.layer.kind == "add")
    assert [spec.layer_name(index) for index in add.inputs] == ["bn2", "stem_relu"]
    assert spec.consumers()[2] == [3, 8]  # the stem's ReLU feeds the block and its skip
    assert spec.param_count == (27 * 8 + 2 * 8) + 2 * (72 * 8 + 2 * 8) + (8 * 10 + 10)
    assert spec.statistics_count == 3 * 2 * 8
    assert ModelSpec.from_dict(spec.to_dict()) == spec


def test_several_outputs_are_named_and_read_on_and_come_back_from_json() -> None:
    """An FPN-like spec: `outputs` names each, in order; a layer read on by others may be one; every layer must
    feed some output; the JSON form keeps them."""
    data = RESIDUAL_NET | {"loss": "mse", "outputs": ["out", "stem_relu"]}
    data = data | {"layers": data["layers"][:-2]}  # out is a map now, as a dense-prediction net's
    spec = ModelSpec.from_dict(data)
    assert spec.output_shapes == ((16, 16, 8), (16, 16, 8))
    assert spec.consumers()[spec.output_layers[1]] == [3, 8, len(spec.layers)]  # read on, and by the loss
    assert ModelSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_layers_written_out_of_order_are_sorted_after_their_inputs() -> None:
    layers = RESIDUAL_NET["layers"]
    shuffled = RESIDUAL_NET | {"layers": [layers[8], layers[0] | {"inputs": ["input"]}, *layers[1:8], *layers[9:]]}
    shuffled["layers"][9] |= {"inputs": ["residual"]}  # the ReLU after the add no longer follows it in the list
    assert ModelSpec.from_dict(shuffled).walk()[-1].output_shape == (10,)
    assert [layer.kind for layer in ModelSpec.from_dict(shuffled).layers] == \
        [layer.kind for layer in ModelSpec.from_dict(RESIDUAL_NET).layers]


@pytest.mark.parametrize("data, message", [
    (_net(residual={"inputs": ["bn2", "stem_rleu"]}), "layer 'residual': unknown input 'stem_rleu'"),
    (_net(conv1={"inputs": ["out"]}), "layer 'conv1' is in a cycle: conv1 -> out -> residual -> bn2 -> conv2"),
    (_net(residual={"inputs": ["bn2", "input"]}), "layer 'residual': add needs inputs of one shape, got (16, 16, 8)"),
    (_net(conv2={"inputs": ["stem_relu"]}), "layer 'conv1' feeds no output (the outputs: 'layer11')"),
    (RESIDUAL_NET | {"outputs": ["layer11", "stem_rleu"]}, "spec outputs: unknown layer 'stem_rleu'"),
    (RESIDUAL_NET | {"outputs": "layer11"}, "spec outputs must be a non-empty list of layer names"),
    (RESIDUAL_NET | {"outputs": ["layer11", "stem_relu"]}, "cross_entropy needs a flat output of class scores, got "
                                                           "shape (16, 16, 8) at 'stem_relu'"),
    (_net(conv1={"groups": 3}), "layer 'conv1': conv2d groups 3 must divide its 8 input channels and its 8 filters"),
    (_net(residual={"type": "concat", "inputs": ["bn2", "stem_relu"]}, out={"type": "conv2d", "filters": 4,
                                                                        "inputs": ["residual", "stem"]}),
     "layer 'out' (conv2d) takes one input, got 2"),
    (_net(residual={"inputs": ["bn2"]}), "layer 'residual' (add) takes at least 2 inputs, got 1"),
    (_net(bn1={"momentum": 0}), "layer 'bn1': batchnorm.momentum must be a number in (0, 1]"),
    (_net(stem={"padding": -1}), "layer 'stem': conv2d.padding must be one of same, valid, pixels >= 0 or [height, "
                                 "width] of them"),
    (_net(stem={"kernel": [1, 0]}), "layer 'stem': conv2d.kernel must be an integer >= 1, or [height, width] of them, "
                                    "got 0"),
    (_net(stem_bn={"name": "stem"}), "layer name 'stem' is used twice"),
])
def test_graph_errors_are_one_line_naming_the_file_and_layer(data: dict, message: str, spec_file) -> None:  # noqa: ANN001
    path = spec_file(data)
    with pytest.raises(SpecError) as caught:
        load_spec_file(path)
    assert str(caught.value).startswith(f"spec file {path}: ") and message in str(caught.value), caught.value
    assert "\n" not in str(caught.value)


def test_bad_graph_on_the_command_line_is_exit_2_nothing_written(spec_file, tmp_path: Path) -> None:  # noqa: ANN001
    out = tmp_path / "record.json"
    done = run_cli("run", "--framework", "torch", "--model-file", str(spec_file(_net(conv2={"inputs": ["x"]}))),
                   "--device", "cpu", "--out", str(out))
    assert done.returncode == 2 and "unknown input 'x'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not out.exists()


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_users_residual_net_trains_in_every_framework_without_code(framework: str, spec_file,  # noqa: ANN001
                                                                     tmp_path: Path) -> None:
    out = tmp_path / "record.json"
    done = run_cli("run", "--framework", framework, "--model-file", str(spec_file(RESIDUAL_NET)), "--device", "cpu",
                   "--out", str(out))
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    spec = ModelSpec.from_dict(RESIDUAL_NET)
    assert record["status"] == "ok"
    assert record["framework"]["param_count"] == spec.param_count
    assert record["framework"]["statistics_count"] == spec.statistics_count
