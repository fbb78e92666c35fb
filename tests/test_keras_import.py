"""Keras models imported as specs: weights counted exactly as Keras counts them, and what has no counterpart refused."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from models.spec import SpecError, load_spec_file
from suites.run.registry import ROOT, interpreter
from tests.conftest import run_cli

# One Keras process writes every file: a functional net of each mapped layer (as .keras and as to_json()), and nets
# the importer must refuse. It prints Keras's own trainable and non-trainable counts.
BUILD = """
import json, sys
import keras
from keras import layers

out = sys.argv[1]
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
net.save(f"{out}/net.keras")
open(f"{out}/net.json", "w").write(net.to_json())
keras.Sequential([keras.Input((5, 4)), layers.LSTM(3, name="lstm"), layers.Dense(1)]).save(f"{out}/lstm.keras")
keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="sigmoid", name="gate")]).save(f"{out}/sigmoid.keras")
keras.Sequential([keras.Input((8, 8, 1)), layers.ZeroPadding2D(((0, 1), (0, 1)), name="uneven"), layers.Conv2D(2, 2)]
                 ).save(f"{out}/uneven.keras")
print(json.dumps({"trainable": sum(int(w.numpy().size) for w in net.trainable_weights),
                  "non_trainable": sum(int(w.numpy().size) for w in net.non_trainable_weights),
                  "total": net.count_params()}))
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The folder of saved models and Keras's counts for the net."""
    out = tmp_path_factory.mktemp("keras_models")
    quiet = {"CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([interpreter("keras-tensorflow"), "-c", BUILD, str(out)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=os.environ | quiet)
    assert done.returncode == 0, done.stderr[-3000:]
    return out, json.loads(done.stdout.strip().splitlines()[-1])


def test_counts_match_keras_exactly(built: tuple[Path, dict]) -> None:
    out, counts = built
    spec = load_spec_file(out / "net.keras")
    assert spec.param_count == counts["trainable"]
    assert spec.statistics_count == counts["non_trainable"]
    assert spec.param_count + spec.statistics_count == counts["total"]
    assert spec.loss == "cross_entropy"  # from the compile config; the output's softmax is the loss's own


def test_saved_file_and_json_give_one_spec(built: tuple[Path, dict]) -> None:
    out, _ = built
    assert load_spec_file(out / "net.json") == load_spec_file(out / "net.keras")


def test_mapping(built: tuple[Path, dict]) -> None:
    layers = {entry["name"]: entry for entry in load_spec_file(built[0] / "net.keras").to_dict()["layers"]}
    assert layers["stem"]["padding"] == 1  # the ZeroPadding2D, folded in
    assert layers["dw"]["groups"] == 8 and layers["dw"]["filters"] == 8  # depthwise
    assert layers["stem_bn"]["momentum"] == 0.01  # torch's convention: 1 - Keras's 0.99
    assert layers["pw_relu"]["type"] == "relu"  # the conv's activation, as its own layer
    assert layers["cat"]["inputs"] == ["residual", "stem_relu6"]


@pytest.mark.parametrize(("name", "layer"), [("lstm", "'lstm' (LSTM)"), ("sigmoid", "'gate' (Dense)"),
                                             ("uneven", "'uneven' (ZeroPadding2D)")])
def test_refused_in_one_line(built: tuple[Path, dict], name: str, layer: str) -> None:
    path = built[0] / f"{name}.keras"
    with pytest.raises(SpecError) as error:
        load_spec_file(path)
    assert str(error.value).startswith(f"{path}: layer {layer} ") and "\n" not in str(error.value)


def test_cli_estimates_a_keras_file_and_refuses_an_lstm(built: tuple[Path, dict]) -> None:
    out, _ = built
    assert run_cli("estimate", "--model-file", str(out / "net.keras")).returncode == 0
    refused = run_cli("estimate", "--model-file", str(out / "lstm.keras"))
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "layer 'lstm' (LSTM) has no counterpart in the spec" in lines[0]


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_an_imported_keras_net_trains_in_a_framework_it_did_not_come_from(built: tuple[Path, dict],
                                                                         framework: str) -> None:
    out, _ = built
    done = run_cli("run", "--framework", framework, "--model-file", str(out / "net.keras"), "--device", "cpu",
                   "--json")
    record = json.loads(done.stdout)
    assert done.returncode == 0 and record["status"] == "ok", done.stderr[-2000:]
    assert record["framework"]["param_count"] == load_spec_file(out / "net.keras").param_count  # as the net built
