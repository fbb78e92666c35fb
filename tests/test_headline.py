"""The headline over the committed H100 runs at ec3adfa: a pool is named as a pool and no ratio is taken against it;
each sentence names the part that differs most between the bars the plot draws."""

from __future__ import annotations

import json
import re

import pytest

from suites.analysis import accounting
from suites.analysis.constants import PROBES
from suites.analysis.figures import MIB
from suites.report import headline, plots
from suites.run.registry import ROOT

RUNS = ROOT / "results" / "h100-ec3adfa"


def _run(name: str) -> dict:
    data = json.loads((RUNS / f"{name}-cuda.json").read_text())
    data["records"] = [record | accounting.refresh(record) for record in data["records"]]
    return data


def _tables(lines: list[str]) -> list[list[str]]:
    """The headline's table rows, split into cells."""
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines
            if line.startswith("| ") and not line.startswith("| framework")]


@pytest.mark.parametrize("name", ["default", "allocators", "techniques"])
def test_a_pool_is_named_and_no_ratio_is_taken_against_it(name: str) -> None:
    run = _run(name)
    rows = _tables(headline.section(run))
    pooled = [row for row in rows if row[0].split()[0] in ("jax", "keras-jax") and row[-1] == "ok"]
    assert pooled and all(row[1].endswith("a pool") for row in pooled)
    for row in rows:
        needs, floor, ratio = row[3], row[4], row[5]
        if ratio == "-":
            continue
        assert float(ratio.removesuffix("x")) == pytest.approx(float(needs.replace(",", "")) /
                                                                float(floor.replace(",", "")), rel=0.02, abs=0.06), row
        assert float(ratio.removesuffix("x")) < 1000  # a ratio against a 60 GiB pool read 11,126x


def test_the_pool_off_run_fills_the_pooled_rows_without_a_row_of_its_own() -> None:
    run = _run("allocators")
    lines = headline.section(run)
    jax = next(row for row in _tables(lines) if row[0] == "jax")
    noprealloc = next(r for r in run["records"] if r["scenario"]["framework"] == "jax"
                      and r["scenario"]["allocator"] == "noprealloc" and r["scenario"]["model"] == "keras200m")
    held = max(p["nvml"]["process_peak"]["bytes"] for p in noprealloc["phases"] if "process_peak" in p.get("nvml", {}))
    assert jax[2].startswith(f"{held / MIB:,.0f} ")
    assert not any(row[0] == "jax noprealloc" for row in _tables(lines))


@pytest.mark.parametrize(("name", "panels_compared"), [("default", 5), ("allocators", 1), ("techniques", 1)])
def test_each_sentence_names_the_largest_difference_between_the_drawn_bars(name: str, panels_compared: int) -> None:
    run = _run(name)
    lines = headline.section(run)
    sentences = [line for line in lines if line.startswith("Without a pool")]
    panels = {(p.model, p.kind): p for p in plots.breakdown_panels(run)}
    checked = 0
    for (model, kind), records in plots.panels(run["records"]).items():
        if model in PROBES:
            continue
        said = headline.sentence(headline.rows(records))
        if said is None:
            continue
        high, low = re.match(r"Without a pool, (.+?) holds .* more than (.+?) at the phases", said).groups()
        columns = {column.label: column for column in panels[(model, kind)].columns}
        # the bars the plot draws, the pool left out; no pooled column without its pool-off twin is compared
        bars = {label: {part: value for part, value in columns[label].holds.items() if part != "pool_unused"}
                for label in (high, low)}
        comparable = [c for c in columns.values() if c.holds and "pool_unused" not in c.holds and c.status == "ok"]
        assert sum(bars[high].values()) == max(sum(c.holds.values()) for c in comparable)
        assert sum(bars[low].values()) == min(sum(c.holds.values()) for c in comparable)
        gaps = {part: bars[high].get(part, 0) - bars[low].get(part, 0) for part in {*bars[high], *bars[low]}}
        largest = max(gaps, key=gaps.__getitem__)
        assert f"largest part of it is {largest.replace('_', ' ')} " in said
        assert said in sentences
        checked += 1
    assert checked == panels_compared
