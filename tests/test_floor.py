"""The physical floor holds: no committed measurement, on any device, framework or technique, needs less.

Every run file under results/ is read again with today's arithmetic (`accounting.refresh`, as the report does
for an older run file), so a change to the floor's definition is checked against every need ever measured.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from models.catalogue import get_model
from models.estimate import floor
from suites.analysis import accounting, figures
from suites.run.registry import ROOT
from tests.conftest import published_runs

RESULTS = ROOT / "results"
# TensorFlow's CPU allocator does not see a small net's tensors: for the probes and the plain-N nets it reads 0 bytes
# in phases where the framework holds its weights, so its peak is some of the step's scratch, not the model's need
BLIND = {("keras-tensorflow", "cpu")}


def _records() -> Iterator[tuple[str, dict]]:
    """Every train or infer record that ran, from every run file."""
    for path in published_runs():
        data = json.loads(path.read_text())
        for record in data["records"]:
            if record["scenario"]["kind"] in ("train", "infer") and record["status"] == "ok":
                yield str(path.relative_to(RESULTS)), record


def _blind(record: dict) -> bool:
    """An allocator that read 0 bytes in a phase whose end found the framework holding weights does not see them."""
    return any(figures.need(record, measured["name"])[0] == 0 and (measured.get("tensors") or {}).get("weights")
               for measured in record.get("phases", []))


def _name(path: str, record: dict) -> str:
    scenario = record["scenario"]
    return (f"{path}: {scenario['framework']} {scenario['model']} {scenario['kind']} "
            f"{scenario.get('technique', 'none')} batch {scenario['batch']} {scenario['optimizer']} "
            f"{scenario['allocator']} on {scenario['device']}")


@pytest.fixture(scope="module")
def checked() -> dict[str, list[tuple[str, int, int]]]:
    """Per device, (record, floor bytes, highest need over its phases) for every record with a need."""
    result: dict[str, list[tuple[str, int, int]]] = {}
    for path, record in _records():
        floor = accounting.refresh(record)["floor"]
        if floor["need_bytes"] is None:
            continue
        if _blind(record):
            assert (record["scenario"]["framework"], record["scenario"]["device"]) in BLIND, _name(path, record)
            continue
        result.setdefault(record["scenario"]["device"], []).append(
            (_name(path, record), floor["bytes"], floor["need_bytes"]))
    return result


def test_no_measured_need_falls_below_the_floor(checked: dict[str, list[tuple[str, int, int]]]) -> None:
    below = [f"{name}: needs {need:,} bytes, floor {floor:,}"
             for rows in checked.values() for name, floor, need in rows if not 0 < floor <= need]
    assert not below, "\n".join(below)


def test_the_check_covers_the_cpu_runs_and_both_h100_runs(checked: dict[str, list[tuple[str, int, int]]]) -> None:
    assert len(checked["cpu"]) >= 70 and len(checked["cuda"]) >= 170, {k: len(v) for k, v in checked.items()}
    assert {name.split(":")[0].split("/")[-1] for name, _, _ in checked["cpu"]} >= {
        "default-cpu.json", "techniques-cpu.json", "sweeps-cpu.json", "allocators-cpu.json"}
    assert {name.split("/")[0] for name, _, _ in checked["cuda"]} >= {"h100-d2f1409", "h100-ec3adfa"}


def test_training_floor_is_state_and_one_step_not_every_gradient_or_saved_activation() -> None:
    spec = get_model("resnet50")
    trainable, statistics = spec.weight_bytes(), spec.statistics_bytes()
    batch = (224 * 224 * 3 + 1) * 4  # an image and its label per example
    step = (56 * 56 * 256 + 56 * 56 * 128) * 4  # the largest conv's input and output: a 1x1 from 256 to 128 maps
    sgd = floor(spec, "train", 16, "sgd", 4)
    assert sgd == trainable + statistics + 16 * (batch + step)
    assert floor(spec, "train", 16, "momentum", 4) == sgd + trainable
    assert floor(spec, "train", 16, "adam", 4) == sgd + 2 * trainable
    assert floor(spec, "train", 16, "sgd", 4, "checkpoint") == sgd  # recomputation reruns every step
    assert floor(spec, "train", 16, "sgd", 4, "bf16") == sgd - 16 * step // 2  # half activations, fp32 weights
    # four micro-batches of 4: a quarter of the batch live, and the gradients' sum kept between them
    assert floor(spec, "train", 16, "sgd", 4, "accumulate") == sgd + trainable - 12 * (batch + step)
