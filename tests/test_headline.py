"""The headline over the committed H100 runs at ec3adfa: a pool is named as a pool and no ratio is taken against it;
each sentence names the parts that make the difference between the bars the plot draws, summing to it.
tests/test_published_reports.py checks the same over every committed run file."""

from __future__ import annotations

import json
import re

import pytest

from suites.analysis import accounting, figures
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
        needs, floor, ratio = row[3].split(" (")[0], row[4], row[5]  # needs: its highest, with its phase
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
    summary = figures.summary_phase(noprealloc)
    held = next(p["nvml"]["process_peak"]["bytes"] for p in noprealloc["phases"] if p["name"] == summary)
    assert jax[2] == f"{held / MIB:,.0f} ({summary})"
    assert not any(row[0] == "jax noprealloc" for row in _tables(lines))


@pytest.mark.parametrize(("name", "panels_compared"), [("default", 5), ("allocators", 1), ("techniques", 0)])
def test_each_sentence_names_the_largest_parts_of_the_difference_between_the_drawn_bars(name: str,
                                                                                        panels_compared: int) -> None:
    run = _run(name)
    panels = {(p.model, p.kind): p for p in plots.breakdown_panels(run)}
    checked = 0
    for (model, kind), records in plots.panels(run["records"]).items():
        if model in PROBES:
            continue
        for said in headline.sentences(headline.rows(records)):
            high, total, low, high_phase, low_phase, parts = re.match(
                r"Without a pool, (.+?) holds ([\d,]+) MiB more than (.+?) \((\w+) against (\w+), as the table and the "
                r"plot show them\); by part: (.+) MiB\.$", said).groups()
            columns = {column.label: column for column in panels[(model, kind)].columns}
            assert (columns[high].phase, columns[low].phase) == (high_phase, low_phase)
            # the bars the plot draws, the pool left out; no pooled column without its pool-off twin is compared
            bars = {label: {part: value for part, value in columns[label].holds.items() if part != "pool_unused"}
                    for label in (high, low)}
            comparable = [c for c in columns.values() if c.holds and "pool_unused" not in c.holds and c.status == "ok"]
            assert sum(bars[high].values()) == max(sum(c.holds.values()) for c in comparable)
            assert sum(bars[low].values()) == min(sum(c.holds.values()) for c in comparable)
            gaps = {part.replace("_", " "): bars[high].get(part, 0) - bars[low].get(part, 0)
                    for part in {*bars[high], *bars[low]}}
            named = {part: int(size.replace(",", "")) for part, size in (p.rsplit(" ", 1) for p in parts.split(", "))}
            assert sum(named.values()) == int(total.replace(",", ""))
            rest = named.pop("other parts", 0)
            assert 0 < len(named) <= headline.NAMED
            assert all(size == round(gaps[part] / MIB) for part, size in named.items())
            others = [abs(gap) for part, gap in gaps.items() if part not in named]
            assert min(abs(gaps[part]) for part in named) >= max(others, default=0)  # the largest, one by one
            assert abs(rest - sum(gaps[part] for part in gaps if part not in named) / MIB) <= (len(named) + 1) / 2
            checked += 1
    assert checked == panels_compared


def test_the_parts_of_a_difference_are_signed_and_sum_to_it_the_rest_together() -> None:
    high = {"activations": 100 * MIB, "allocator_cache": 10 * MIB, "context": 518 * MIB + MIB // 3,
            "kernel_modules": 240 * MIB}
    low = {"activations": 20 * MIB, "allocator_cache": 60 * MIB, "context": 520 * MIB, "kernel_modules": 236 * MIB,
           "unexplained": MIB // 4}
    total, parts = headline.differences(high, low)
    assert total == 32  # 868.33 - 836.25 MiB
    assert parts == [("activations", 80), ("allocator cache", -50), ("kernel modules", 4), ("other parts", -2)]
    assert headline.differences(high, high) == (0, [])
