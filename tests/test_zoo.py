"""`python -m suites zoo`: a net of the zoo built in its source, imported, checked and written as a row; the zoo
itself is a published command (make zoo), not a test."""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
from pathlib import Path

import numpy
import pytest

from models import catalogue, zoo_split
from models.catalogue import get_model
from models.estimate import estimate
from models.importers.files import load_spec_file
from suites.analysis import accounting, constants, depth, errors
from suites.bench import zoo
from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter
from tests.conftest import run_cli


def test_a_keras_net_is_built_imported_checked_and_trained_into_the_table(tmp_path: Path) -> None:
    """MobileNetV3Small, as keras.applications builds it (hard swish, squeeze-and-excite, its preprocessing): Keras's
    exact counts, with Keras's own weights torch gives Keras's outputs, and its training step in torch is measured
    beside the estimate, on train step 2 and inference, and evaluated at the table's head in its half of the split
    (tuned: MobileNet's family is the catalogue's); a second call checks and measures nothing again."""
    chosen = ["--sources", "keras", "--nets", "MobileNetV3Small", "--frameworks", "torch",
              "--train-frameworks", "torch"]
    done = run_cli("zoo", *chosen, "--out", str(tmp_path / "table"), "--work", str(tmp_path / "built"), timeout=900)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "table" / "zoo.json").read_text())
    assert data["kind"] == "footprint-zoo" and data["schema_version"] == 1
    (row,) = data["rows"]
    assert row["name"] == "MobileNetV3Small" and row["reason"] is None and row["check_reason"] is None
    assert row["spec_counts"] == row["source_counts"] and row["source_counts"][1] == 12_112
    assert 0 <= row["check"]["torch"] <= data["check"]["tolerance"]
    assert 0 < row["rounding"] < data["check"]["tolerance"]  # Keras's own float32 answer against its float64 one
    assert row["train"]["torch"]["status"] == "ok" and abs(row["train"]["torch"]["estimate_error"]) < 1
    assert abs(row["train"]["torch"]["inference_error"]) < 1 and row["half"] == zoo_split.TUNED
    figures = data["evaluation"]["frameworks"]["torch"]
    assert list(figures) == [zoo_split.TUNED] and figures["tuned"]["n"] == 2  # no held-out net: no margin
    errors_found = sorted(abs(row["train"]["torch"][key]) for key in ("estimate_error", "inference_error"))
    assert figures["tuned"]["median"] == statistics.median(errors_found)
    assert figures["tuned"]["unsafe_with_margin"] is None
    run = json.loads((tmp_path / "built" / "zoo-cpu.json").read_text())
    assert [record["scenario"]["batch"] for record in run["records"]] == [8]
    table = (tmp_path / "table" / "zoo.md").read_text()
    assert "| keras | MobileNetV3Small | tuned | 64 |" in table
    assert f"| torch | tuned | zoo's | 1 | 2 | {figures['tuned']['median']:.1%} |" in table
    # a record of an earlier build of the net (another file, another size) is another scenario: a second call
    # measures nothing again, and its table reads today's build's record alone
    stale = json.loads(json.dumps(run["records"][0]))
    stale["scenario"]["model_file"] = str(tmp_path / "earlier" / "MobileNetV3Small.keras")
    stale["status"] = "crashed"
    (tmp_path / "built" / "zoo-cpu.json").write_text(json.dumps(run | {"records": [*run["records"], stale]}))
    again = run_cli("zoo", *chosen, "--out", str(tmp_path / "again"), "--work", str(tmp_path / "built"), timeout=900)
    assert again.returncode == 0 and "training" not in again.stdout, again.stderr
    assert "zoo: checking the outputs of 0 (1 checked before, the same file and spec)" in again.stdout
    data = json.loads((tmp_path / "again" / "zoo.json").read_text())
    assert data["rows"][0]["train"] == row["train"] and sum(data["train"]["records_by_commit"].values()) == 1
    # another machine, without the work folder: the published table's records are taken back for the rebuilt file
    kept = json.loads((tmp_path / "table" / "zoo-records.json").read_text())
    assert [record["scenario"]["file"] for record in kept["records"]] == ["MobileNetV3Small.keras"]
    assert "spec_json" not in kept["records"][0]["scenario"]
    elsewhere = run_cli("zoo", *chosen, "--out", str(tmp_path / "elsewhere"), "--work", str(tmp_path / "fresh"),
                        "--seed", str(tmp_path / "table"), timeout=900)
    assert elsewhere.returncode == 0 and "training" not in elsewhere.stdout, elsewhere.stderr
    assert f"zoo: 1 records taken from {tmp_path / 'table'}" in elsewhere.stdout
    data = json.loads((tmp_path / "elsewhere" / "zoo.json").read_text())
    assert data["rows"][0]["train"] == row["train"]


def test_a_net_not_in_the_zoo_is_one_line() -> None:
    done = run_cli("zoo", "--nets", "resnet18,lenet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["python -m suites: error: not a zoo net: lenet (docs/models.md lists "
                                                "them)"]


def test_a_seed_that_is_no_zoo_table_is_one_line_before_anything_is_built(tmp_path: Path) -> None:
    (tmp_path / "zoo-records.json").write_text(json.dumps({"kind": "footprint-run", "schema_version": 1}))
    for folder, reason in ((tmp_path / "none", "cannot read zoo-records.json: No such file or directory"),
                           (tmp_path, "zoo-records.json is not a footprint-zoo-records file of schema 1")):
        done = run_cli("zoo", "--nets", "resnet18", "--seed", str(folder), "--work", str(tmp_path / "work"))
        assert done.returncode == 2 and done.stdout == "" and not (tmp_path / "work").exists()
        assert done.stderr.strip().splitlines() == [f"python -m suites: error: --seed {folder}: {reason}"]


def test_every_zoo_net_is_in_one_family_and_the_catalogues_families_are_the_tuned_half() -> None:
    """The split is by family, committed once: each net of the zoo in exactly one; the families of the nets the rules
    were shaped on (the catalogue's) tuned, the rest held out, and so is any net the split does not name."""
    members = [name for _, names in zoo_split.FAMILIES.values() for name in names]
    assert sorted(members) == sorted(name for _, nets in zoo.SOURCES.values() for name in nets)
    held_out_nets = [name for name in members if zoo_split.half_of(name) == zoo_split.HELD_OUT]
    assert set(zoo.LARGE_HELD_OUT) <= set(held_out_nets) and len(held_out_nets) >= len(members) / 2
    assert {zoo_split.half_of(name) for name in zoo.LARGE_TUNED} == {zoo_split.TUNED}
    families = {family for family, (_, names) in zoo_split.FAMILIES.items() if set(names) & set(zoo.LARGE_HELD_OUT)}
    assert len(families) == len(zoo.LARGE_HELD_OUT) >= 12
    assert all(zoo_split.half_of(name) == zoo_split.TUNED for name in ("vgg16", "resnet50", "mobilenetv2",
                                                                       "densenet121", "plain-8"))
    assert {zoo_split.half_of(name) for name in ("VGG16", "ResNet50", "MobileNetV2", "DenseNet121")} == {"tuned"}
    assert zoo_split.half_of("EfficientNetB0") == zoo_split.half_of("my_own_net") == zoo_split.HELD_OUT
    assert catalogue.CATALOGUE.keys() >= {"vgg16", "resnet50", "mobilenetv2", "densenet121"}


def test_the_margin_holds_at_both_sizes_and_each_size_is_judged_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The held-out half at the zoo's size and at the size users train are reported apart; the margin is the larger
    of the two sizes' 95th percentiles, so that with it neither size's held-out half is unsafe beyond 5 %."""
    def row(net: str, size: int, measured: int, estimate: int) -> errors.Row:
        return errors.Row("torch", net, "train", "train_step_2", zoo.EVALUATED_VIEW, "footprint", measured, estimate,
                          estimate / measured - 1, half=zoo_split.half_of(net), net=net, size=size)

    small = [row(f"held{index}", zoo.SIZE, 100, 100 + index) for index in range(20)]  # never short
    large = [row(f"held{index}", zoo.LARGE_SIZE, 100, 70 + 2 * index) for index in range(20)]  # short up to 30 %
    tuned = [row("resnet50", zoo.SIZE, 100, 90)]
    found = zoo.evaluation(small + large + tuned, ["resnet50", *(f"held{index}" for index in range(20))])
    held_out, at_large = found["frameworks"]["torch"]["held-out"], found["large"]["frameworks"]["torch"]["held-out"]
    assert held_out["margin_at_size"] == 0 and at_large["margin_at_size"] == errors.margin(large) > 0.3
    assert held_out["margin"] == at_large["margin"] == errors.margin(large)
    assert at_large["unsafe"] > 0.5 and at_large["unsafe_with_margin"] <= 0.05 and held_out["n"] == at_large["n"] == 20
    assert found["frameworks"]["torch"]["tuned"]["n"] == 1 and "tuned" not in found["large"]["frameworks"]["torch"]
    # `errors` gives each size its own line: a record names its input's shape (read as it stands, not re-accounted)
    monkeypatch.setattr(accounting, "reaccount", lambda run, *_: run["records"])
    records = [{"scenario": {"framework": row.framework, "model": row.net, "kind": row.kind},
                "model": {"input_shape": [row.size, row.size, 3]}, "status": "ok",
                "comparison": {row.phase: {row.view: {"measured": row.measured, "estimate": row.estimate,
                                                      "relative_error": row.error}}}} for row in small + large]
    lines = errors.table([("run", {"records": records})]).splitlines()[2:]
    assert [line.split(" | ")[5] for line in lines] == ["64 px", "224 px"]
    assert lines[1].split(" | ")[6] == "20" and lines[1].split(" | ")[9].startswith("-")


def test_the_depth_costs_are_least_squares_over_the_tuned_nets_and_reach_the_estimate() -> None:
    """`depth.fit` over the published CPU run's nets (the catalogue's: the tuned half), above the published
    constants with the kind costs: for JAX, whose kind probes ran, a scale on their sum and a cost per full conv
    kernel byte; for torch, whose did not, a cost per net and per distinct and repeating layer. No non-negative
    costs near them leave smaller squares than their own, and merged beside the probe's constants they are what
    `overhead` adds."""
    run = json.loads((ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json").read_text())
    base, source = constants.load("cpu", with_depth=False), constants.published_name("cpu")
    accounted = accounting.reaccount(run, base, source)
    fitted = depth.fit(accounted, source, constants.PROBES)
    for framework, kind, phase, rule in (("jax", "train", "train_step_2", "kinds"),
                                         ("torch", "infer", "inference", "layers")):  # its train records: 2 nets
        entry = fitted["frameworks"][framework][kind]
        assert entry["probe_distinct"] == 5 and "resnet50" in entry["nets"]
        costs = [entry["phases"][phase]["driver"][name] for name in depth.NAMES[rule]]
        fixed = base["frameworks"][framework][kind]["phases"][phase]["driver"]
        nets = [record for record in accounted if (record["scenario"]["framework"], record["scenario"]["kind"]) == (
            framework, kind) and record["scenario"]["model"] not in constants.PROBES]
        points = []
        for record in nets:
            found, multiplied = depth.features(record["estimate"]["constants"], record["estimate"], phase, "driver")
            driver = record["comparison"][phase]["driver"]
            assert found == rule and len(multiplied) == len(costs)
            points.append((multiplied, driver["measured"] - driver["tensors"] - fixed))

        def squares(tried: list[float], taken: list = points) -> float:
            return sum((y - sum(cost * x for cost, x in zip(tried, multiplied, strict=True))) ** 2
                       for multiplied, y in taken)

        best = squares(costs)
        assert best <= squares([0] * len(costs)) and min(costs) >= 0
        step = 0.01 if rule == "kinds" else 2**20  # past what the costs' rounding moves them
        for index, moved in itertools.product(range(len(costs)), (-step, step)):
            tried = [cost + (moved if where == index else 0) for where, cost in enumerate(costs)]
            assert min(tried) < 0 or best <= squares(tried) * (1 + 1e-6)
        known = constants.lookup(depth.merged(base, fitted, source), framework, kind)
        resnet = estimate(get_model("resnet50"), kind, 8, framework=framework)
        multiplied = depth.features(known, resnet.to_dict(), phase, "driver")[1]
        assert constants.overhead(known, phase, "driver", resnet) == fixed + round(
            sum(cost * x for cost, x in zip(costs, multiplied, strict=True)))
    assert depth.merged(base, fitted, "another constants file") is base  # measured above other constants: unused


def test_the_depth_costs_are_non_negative_least_squares_in_bytes_past_int64s_range() -> None:
    """Costs that explain the bytes exactly are found, however large the bytes (a GiB's squared passes int64's range);
    a cost least squares would make negative is zero, and the others are fitted without it."""
    exact = [((1, layers, kernel), 20 * 2**20 + 3 * layers * 2**20 + 2 * kernel)
             for layers, kernel in ((100, 2**30), (300, 2**29), (50, 3 * 2**30), (700, 2**29))]
    assert numpy.allclose(depth._least_squares(exact), (20 * 2**20, 3 * 2**20, 2))
    below = [((layers,), -layers * 2**20) for layers in (10, 100, 1000)]  # each held less than the probe
    assert depth._least_squares(below) == (0.0,)
    shared = [((1, layers), 2**30 - layers * 2**20) for layers in (10, 20)]
    assert numpy.allclose(depth._least_squares(shared), (2**30 - 15 * 2**20, 0))


def test_the_published_kind_costs_count_once_a_zoo_fitted_above_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """The published kind costs (`constants.KIND_COSTS`) join the published constants the zoo fits above, but the
    estimate takes them only once the published zoo's depth costs were fitted above them: its margin and its
    held-out figures are then those of the rule it states."""
    plain = str(constants.path("cpu").relative_to(ROOT))
    assert constants.published_name("cpu").startswith(f"{plain} with the kind costs of ")
    base = constants.load("cpu", with_depth=False)
    assert {"jax", "keras-jax", "keras-tensorflow"} <= {
        framework for framework, kinds in base["frameworks"].items() if "kind_costs" in kinds["train"]}
    fitted = {"jax": {"train": {"nets": ["ResNet50"], "probe_distinct": 5, "phases": {
        "train_step_2": {"driver": {"kind_scale": 0.5, "per_kernel_byte": 1.0}}}}}}
    for measured_on, takes_kinds in ((plain, False), (constants.published_name("cpu"), True), ("elsewhere", False)):
        zoo_table = {"depth": {"measured_on": measured_on, "frameworks": fitted}}
        monkeypatch.setattr(constants.margins, "published_zoo", lambda table=zoo_table: table)
        known = constants.lookup(constants.load("cpu"), "jax", "train")
        assert ("kind_costs" in known) == takes_kinds and ("depth" in known) == (measured_on != "elsewhere")


MODULE_SAVED = """
import sys
sys.path.insert(0, "tests/data/torch_exports")
from export import Pyramid
from frameworks.zoo_sources import saved_by_the_module
print(saved_by_the_module(Pyramid(), 8, 8))
"""


def test_the_rebuild_keeps_for_its_backward_what_the_users_module_keeps(tmp_path: Path) -> None:
    """The zoo's saved-for-backward column on a real torch module, one of two outputs (export.py's Pyramid, whose
    coarse level the fine one reads on): its own training step's saved bytes against its ONNX file's rebuild, at the
    zoo's batch, in torch (equal) and in Keras on torch (more: what Keras on torch's rules keep beyond torch's)."""
    done = subprocess.run([interpreter("torch"), "-c", MODULE_SAVED], cwd=ROOT, env=worker_environment(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    path = str(ROOT / "tests" / "data" / "torch_exports" / "pyramid.onnx")
    saved = {"module": int(done.stdout)} | {framework: zoo._saved_by_the_rebuild(framework, path, tmp_path)
                                            for framework in zoo.SAVED_FRAMEWORKS}
    assert saved["module"] > 0 and saved["torch"] == saved["module"], saved
    note = zoo.saved_note(load_spec_file(path), saved)
    assert note.startswith("torch equal; keras-torch +") and "what its rules keep beyond torch's" in note, note
