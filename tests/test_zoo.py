"""`python -m suites zoo`: a net of the zoo built in its source, imported, checked and written as a row; the zoo
itself is a published command (make zoo), not a test."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli


def test_a_keras_net_is_built_imported_checked_and_trained_into_the_table(tmp_path: Path) -> None:
    """MobileNetV3Small, as keras.applications builds it (hard swish, squeeze-and-excite, its preprocessing): Keras's
    exact counts, with Keras's own weights torch gives Keras's outputs, and its training step in torch is measured
    beside the estimate; a second call measures nothing again."""
    done = run_cli("zoo", "--sources", "keras", "--nets", "MobileNetV3Small", "--frameworks", "torch",
                   "--out", str(tmp_path / "table"), "--work", str(tmp_path / "built"), timeout=900)
    assert done.returncode == 0, done.stderr
    data = json.loads((tmp_path / "table" / "zoo.json").read_text())
    assert data["kind"] == "footprint-zoo" and data["schema_version"] == 1
    (row,) = data["rows"]
    assert row["name"] == "MobileNetV3Small" and row["reason"] is None and row["check_reason"] is None
    assert row["spec_counts"] == row["source_counts"] and row["source_counts"][1] == 12_112
    assert 0 <= row["check"]["torch"] <= data["check"]["tolerance"]
    assert 0 < row["rounding"] < data["check"]["tolerance"]  # Keras's own float32 answer against its float64 one
    assert row["train"]["torch"]["status"] == "ok" and abs(row["train"]["torch"]["estimate_error"]) < 1
    run = json.loads((tmp_path / "built" / "zoo-cpu.json").read_text())
    assert [record["scenario"]["batch"] for record in run["records"]] == [8]
    assert "| keras | MobileNetV3Small | 64 |" in (tmp_path / "table" / "zoo.md").read_text()
    # a record of an earlier build of the net (another file, another size) is another scenario: a second call
    # measures nothing again, and its table reads today's build's record alone
    stale = json.loads(json.dumps(run["records"][0]))
    stale["scenario"]["model_file"] = str(tmp_path / "earlier" / "MobileNetV3Small.keras")
    stale["status"] = "crashed"
    (tmp_path / "built" / "zoo-cpu.json").write_text(json.dumps(run | {"records": [*run["records"], stale]}))
    again = run_cli("zoo", "--sources", "keras", "--nets", "MobileNetV3Small", "--frameworks", "torch",
                    "--out", str(tmp_path / "again"), "--work", str(tmp_path / "built"), timeout=900)
    assert again.returncode == 0 and "training" not in again.stdout, again.stderr
    data = json.loads((tmp_path / "again" / "zoo.json").read_text())
    assert data["rows"][0]["train"] == row["train"] and sum(data["train"]["records_by_commit"].values()) == 1


def test_a_net_not_in_the_zoo_is_one_line() -> None:
    done = run_cli("zoo", "--nets", "resnet18,lenet")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == ["python -m suites: error: not a zoo net: lenet (docs/models.md lists "
                                                "them)"]
