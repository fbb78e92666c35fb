"""The reports a person reads first (issue 33): tables that fit a screen, CPU summaries that rank by the figure that
repeats and leave out columns with nothing to say, no empty or contradicting lines, labels without a field that does
not apply, and sizes said as exactly as the rest of the report."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.catalogue import get_model
from models.scenario import Scenario
from suites.analysis.figures import mib
from suites.report import headline, readout, render, summary
from suites.run.registry import ROOT
from suites.run.runfile import load
from tests.conftest import published_runs

RESULTS = ROOT / "results"
RUNS = sorted(str(path.relative_to(RESULTS)) for path in published_runs())


def _header(lines: list[str]) -> list[str]:
    """The first table's header cells."""
    first = next(line for line in lines if line.startswith("| framework"))
    return [cell.strip() for cell in first.strip("|").split("|")]


def _only(run: dict, *frameworks: str) -> dict:
    """The run with only the records of `frameworks` (the ones with no allocator figure on the CPU)."""
    return run | {"records": [r for r in run["records"] if r["scenario"]["framework"] in frameworks]}


@pytest.mark.parametrize("name", RUNS)
def test_no_table_is_wider_than_a_screen(name: str) -> None:
    text = render.markdown(load(RESULTS / name))
    widest = max((line.count("|") - 1 for line in text.splitlines() if line.startswith("|")), default=0)
    assert widest <= render.COLUMNS, name


def test_a_wide_panel_is_split_by_framework_keeping_every_record_once() -> None:
    run = load(RESULTS / "cpu-4bbc599" / "techniques-cpu.json")
    text = render.markdown(run)
    panel = text.split("## plain-16, train")[1].split("\n## ")[0]
    headers = [line.split(" | ")[1:] for line in panel.splitlines() if line.startswith("| phase |")]
    assert len(headers) == 5 and all(len({cell.split()[0] for cell in header}) == 1 for header in headers)
    shown = [r for r in run["records"] if (r["scenario"]["model"], r["scenario"]["kind"]) == ("plain-16", "train")]
    assert sum(len(header) for header in headers) == len(shown)


def test_the_cpu_summary_ranks_by_anonymous_memory_and_leaves_out_a_column_of_dashes() -> None:
    run = _only(load(RESULTS / "cpu-eb50ac8" / "default-cpu.json"), "torch", "jax")
    text = summary.tables(run)
    table = text.split("heatmap68 infer (batch 1)\n")[1].split("\n\n")[0].splitlines()
    assert table[0].split() == ["framework", "anon", "MiB", "holds", "MiB"]  # needs: '-' for both, left out
    rows = {line.split()[0]: line.split()[1:] for line in table[1:]}
    marked = [name for name, cells in rows.items() if cells[0].endswith(summary.LOWEST)]
    assert len(marked) == 1 and not any(cells[1].endswith(summary.LOWEST) for cells in rows.values())
    lowest = min((r for r in run["records"] if r["scenario"]["model"] == "heatmap68"),
                 key=lambda record: summary.anonymous(record)[0])
    assert marked == [lowest["scenario"]["framework"]]
    assert "ranked by it" in text and "compare" in text


def test_the_cpu_headline_leaves_out_columns_with_nothing_to_say_and_gpu_keeps_its_own() -> None:
    cpu = headline.section(_only(load(RESULTS / "cpu-eb50ac8" / "default-cpu.json"), "torch", "jax"))
    assert _header(cpu) == ["framework", "anonymous", "holds (VmHWM)", "floor", "estimate error", "status"]
    assert any("**anonymous**" in line and "`compare` gates" in line for line in cpu)
    assert sum(summary.LOWEST in line for line in cpu if line.startswith("| ")) == len(
        [line for line in cpu if line.startswith("**")])  # one lowest per table
    gpu = headline.section(load(RESULTS / "h100-ec3adfa" / "default-cuda.json"))
    assert _header(gpu) == list(headline.HEADERS)


def test_a_fit_report_has_no_commits_line_with_nothing_to_say() -> None:
    text = render.markdown(load(RESULTS / "cpu-248a74c" / "fit-cpu.json"))
    head = text.split("\n\n")[1].splitlines()
    assert [line.split(":")[0] for line in head] == ["- device", "- commit", "- machine", "- not measured in this run"]


def test_an_inference_label_names_no_optimizer() -> None:
    train = Scenario(framework="torch", model="heatmap68", kind="train", batch=1, optimizer="adam", device="cpu")
    infer = Scenario(framework="torch", model="heatmap68", kind="infer", batch=1, optimizer="adam", device="cpu")
    assert " adam " in readout.label(train) and readout.label(train) == train.label
    assert readout.label(infer) == infer.label.replace(" adam ", " ")
    missing = render._missing_section({"missing": [infer.to_dict()]})
    assert missing[-1] == f"- {readout.label(infer)}" and "adam" not in missing[-1]


def test_a_failed_phase_says_the_failure_as_the_status_does() -> None:
    run = load(RESULTS / "h100-d2f1409" / "allocators-cuda.json")
    failed = next(r for r in run["records"] if (r["failure"] or {}).get("phase") == "context")
    assert render._status(failed) == "error in context"
    assert render._holds_needs(failed, "context") == "error" and render._holds_needs(failed, "build") == "-"


def test_the_weights_are_said_to_the_report_s_precision() -> None:
    text = render.markdown(load(RESULTS / "h100-ec3adfa" / "default-cuda.json"))
    weights = get_model("heatmap68").weight_bytes()
    assert mib(weights) == "1.5" and f"397,188 parameters, {mib(weights)} MiB of weights" in text


def test_every_run_file_is_rendered() -> None:
    assert {"cpu-4bbc599/techniques-cpu.json", "cpu-248a74c/fit-cpu.json"} <= set(RUNS)
    assert all(Path(RESULTS / name).with_suffix(".md").exists() for name in RUNS if not name.startswith("local/"))


def test_the_terminal_table_names_the_failed_phase_as_its_header_does_and_infers_without_an_optimizer() -> None:
    """`run`'s table: the phase a scenario failed in shows its status ("error"), as the line above it says "error in
    context" (it said "not reached"); an inference scenario's label has no optimizer."""
    scenario = Scenario.create("torch", "probe", kind="infer", device="cpu")
    record = scenario.bare_record() | {"status": "error", "failure": {"phase": "context", "message": "boom"}}
    lines = readout.phase_table(record).splitlines()
    assert lines[0].endswith(": error in context: boom") and " adam " not in lines[0], lines[0]
    rows = {line.split()[0]: line.split()[1:] for line in lines[2:2 + len(scenario.phases)]}
    assert rows["context"] == ["error"] and rows["build"] == ["not", "reached"], rows
