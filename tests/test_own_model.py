"""A user's own model file goes wherever a model name goes: `bench --models`, `models --model-file`, `run --model`,
`estimate --model` (what each answers for a file is the importer's spec; the importers' own tests check the nets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suites.run.registry import ROOT, interpreter
from tests.conftest import run_cli

# A user's net as Keras saves it (the importer reads only its config, so the suite never imports Keras)
BUILD = """
import sys
import keras
from keras import layers

net = keras.Sequential([keras.Input((16, 16, 3)), layers.Conv2D(8, 3, padding="same", activation="relu"),
                        layers.BatchNormalization(), layers.GlobalAveragePooling2D(), layers.Dense(10)], name="my_net")
net.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
net.save(sys.argv[1])
print(net.count_params())
"""


@pytest.fixture(scope="module")
def keras_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """my_net.keras, saved by Keras itself, and Keras's count of its weights."""
    path = tmp_path_factory.mktemp("own") / "my_net.keras"
    quiet = {"CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([interpreter("keras-tensorflow"), "-c", BUILD, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=os.environ | quiet)
    assert done.returncode == 0, done.stderr[-3000:]
    return path, int(done.stdout.split()[-1])


def test_models_lists_a_file_with_its_counts(keras_file: tuple[Path, int]) -> None:
    path, total = keras_file
    done = run_cli("models", "--model-file", str(path))
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split()[:3] == ["model", "trainable", "statistics"]
    name, trainable, statistics = row.split()[:3]
    assert name == "my_net"
    assert int(trainable.replace(",", "")) + int(statistics.replace(",", "")) == total
    assert int(statistics.replace(",", "")) == 16  # batch norm's moving mean and variance over 8 channels


def test_bench_of_a_file_writes_its_run_report_and_plots(keras_file: tuple[Path, int], tmp_path: Path) -> None:
    path, _ = keras_file
    done = subprocess.run([sys.executable, "-m", "suites", "bench", "--device", "cpu", "--frameworks", "torch",
                           "--models", str(path)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env=os.environ | {"FOOTPRINT_RESULTS": str(tmp_path)})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    run = json.loads((tmp_path / "default-cpu.json").read_text())
    mine = [record for record in run["records"] if record["scenario"]["model"] == str(path)]  # known by its path
    assert sorted(record["scenario"]["kind"] for record in mine) == ["infer", "train"]
    assert all(record["status"] == "ok" for record in mine)
    assert all(record["scenario"]["model_file"] == str(path) for record in mine)
    assert f"## {path}, train (batch 1, adam; 330 parameters" in (tmp_path / "default-cpu.md").read_text()
    assert (tmp_path / "default-cpu.png").stat().st_size > 0


@pytest.mark.parametrize("command", [("estimate", "--layers"), ("estimate", "--budget", "1GiB"),
                                     ("run", "--framework", "jax", "--device", "cpu", "--scenario", "infer")])
def test_a_file_goes_where_a_name_goes(keras_file: tuple[Path, int], command: tuple[str, ...]) -> None:
    done = run_cli(*command, "--model", str(keras_file[0]))
    assert done.returncode == 0, done.stderr
    assert "my_net" in done.stdout


def test_the_fit_suite_refuses_models_it_asks_nothing_about(keras_file: tuple[Path, int]) -> None:
    """Its questions are the stories'; a run that would answer none says where a file's question goes instead."""
    done = run_cli("bench", "--suite", "fit", "--device", "cpu", "--models", str(keras_file[0]))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "python -m suites fit --model NAME_OR_FILE" in done.stderr
