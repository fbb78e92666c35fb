"""Every committed run file under results/, read as its report reads it (today's arithmetic, `accounting.reaccount`):
the breakdown's names are true, and the headline's table, its sentences and the plot sum each run up at one phase and
compare only like with like. A new folder of run files is checked as soon as it is committed.
"""

from __future__ import annotations

import functools
import re

import pytest

from models import allocator_modes
from models.estimate import CATEGORIES
from models.record import phase
from models.scenario import Scenario
from suites.analysis import accounting, figures
from suites.analysis.constants import PROBES
from suites.analysis.figures import MIB, driver_peak
from suites.report import headline, plots
from suites.run.registry import ROOT
from suites.run.runfile import load
from tests.conftest import published_runs

RESULTS = ROOT / "results"
RUNS = sorted(str(path.relative_to(RESULTS)) for path in published_runs())
# What a breakdown may name: the measured parts, the estimate's parts that name part of a need, what no rule names, the
# allocator's pool beyond the need, and what the driver holds beyond all that.
NAMES = {"context", "weights", "gradients", "optimizer_state", "inputs", "activations", "library_workspace",
         "unsplit_chunks", "update_temporaries", "transient", "unexplained", "allocator_cache", "pool_unused",
         "kernel_modules", "runtime"}
SENTENCE = re.compile(r"Without a pool, (?P<high>.+?) holds (?P<total>[\d,]+) MiB more than (?P<low>.+?) "
                      r"\((?P<high_phase>\w+) against (?P<low_phase>\w+), as the table and the plot show them\); "
                      r"by part: (?P<parts>.+) MiB\.$")
ALIKE = ("model", "kind", "batch", "optimizer", "dtype", "device", "technique", "execution", "cuda_module_loading")


@functools.cache
def _run(name: str) -> dict:
    """A committed run with its records accounted as the report does (read once: accounting a run takes seconds)."""
    run = load(RESULTS / name)
    run["records"] = accounting.reaccount(run)
    return run


def _phases(run: dict) -> list[tuple[dict, dict, dict]]:
    """(record, phase, breakdown) for every phase with a breakdown."""
    return [(record, phase(record, name), parts) for record in run["records"]
            for name, parts in (record.get("breakdown") or {}).items()]


def _pool(record: dict, measured: dict) -> int | None:
    """The allocator's pool in a phase as its own counters give it: a preallocated pool's size, torch's reserved peak,
    JAX's BFC pool at its largest; None where the allocator reports none, or its counters mean nothing in its mode."""
    if figures.pool_size(record) is not None:
        return figures.pool_size(record)
    scenario, counters = record["scenario"], measured["allocator"]
    if not allocator_modes.counted(scenario["framework"], scenario["allocator"]):
        return None
    found = counters.get("reserved_peak") or counters.get("peak_pool_bytes")
    return found["bytes"] if found else None


def _panels(run: dict) -> list[tuple[list[dict], plots.Panel]]:
    """Each model and kind the headline and the plot show (the probes left out), with the plot's panel."""
    drawn = {(panel.model, panel.kind): panel for panel in plots.breakdown_panels(run)}
    return [(records, drawn[key]) for key, records in plots.panels(run["records"]).items() if key[0] not in PROBES]


def test_every_committed_run_file_is_checked() -> None:
    folders = {name.split("/")[0] for name in RUNS}
    assert {"h100-d2f1409", "h100-ec3adfa", "cpu-eb50ac8", "cpu-4bbc599"} <= folders, folders


@pytest.mark.parametrize("name", RUNS)
def test_a_pool_the_allocator_reports_is_its_cache_never_kernel_modules(name: str) -> None:
    """Where the allocator reports its pool, kernel modules are only what the driver holds beyond the context and
    that pool (JAX's noprealloc on the H100 at ec3adfa once showed its grown, unused BFC pool as 1,481 MiB of kernel
    modules); where it does not, the rest is `runtime`, never named kernel modules."""
    for record, measured, parts in _phases(_run(name)):
        if record["scenario"]["device"] != "cuda":
            assert "kernel_modules" not in parts
            continue
        pool = _pool(record, measured)
        label = (plots.variant(record), record["scenario"]["model"], measured["name"])
        if pool is None:
            assert "kernel_modules" not in parts and "runtime" in parts, label
            continue
        beyond = driver_peak(measured, "cuda")[0] - parts["context"]["bytes"] - pool
        assert parts["kernel_modules"]["bytes"] <= max(beyond, 0), label
        unused = "pool_unused" if figures.preallocated(record) else "allocator_cache"
        assert parts[unused]["bytes"] <= max(pool - figures.pool_used(record, measured["name"]), 0), label


@pytest.mark.parametrize("name", RUNS)
def test_every_part_is_named_for_what_it_is_and_the_parts_add_up(name: str) -> None:
    """No residual goes by a known part's name: the need beyond the tensors and activations is `unexplained`, or the
    estimate's own category with basis estimated and at most the estimate's bytes."""
    for record, measured, parts in _phases(_run(name)):
        label = (plots.variant(record), record["scenario"]["model"], measured["name"])
        assert set(parts) <= NAMES, label
        assert all(part["bytes"] >= 0 for part in parts.values()), label
        assert sum(part["bytes"] for part in parts.values()) == driver_peak(measured, record["scenario"]["device"])[0]
        for category, part in parts.items():
            if part["basis"] == accounting.ESTIMATED:
                assert category in CATEGORIES, label
                assert part["bytes"] <= record["estimate"]["phases"][measured["name"]]["items"][category], label
        if "unexplained" in parts:
            assert parts["unexplained"]["basis"] == accounting.DERIVED, label


@pytest.mark.parametrize("name", RUNS)
def test_the_table_shows_each_run_at_the_phase_the_plot_draws(name: str) -> None:
    """Both the default run's figure and the pool-off run's are at the phase of their own column in the plot, and the
    figure is that column's whole bar."""
    for records, panel in _panels(_run(name)):
        columns = {column.label: column for column in panel.columns}
        lines = headline.section({"records": records})
        table = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
        header, cells = table[0], {row[0]: dict(zip(table[0], row, strict=True)) for row in table[1:]}
        takes = "holds (VmHWM)" if "holds (VmHWM)" in header else "takes by default"  # on the CPU: no pool
        for row in headline.rows(records):
            shown = [(cells[plots.variant(row.record)][takes], row.record)]
            if row.pooled and row.comparable:
                shown.append((cells[plots.variant(row.record)]["holds without a pool"], row.comparable))
            for cell, record in shown:
                column = columns[plots.variant(record)]
                if column.phase is None:
                    continue
                figure, _, rest = cell.partition(" (")
                assert rest.split(")")[0] == column.phase, (cell, column.label)
                assert figure == figures.mib(sum(column.holds.values())), (cell, column.label)


@pytest.mark.parametrize("name", RUNS)
def test_each_sentence_compares_runs_alike_at_the_plots_phases_by_parts_summing_to_the_difference(name: str) -> None:
    """Same technique, batch, optimizer, dtype and execution, frameworks apart and never a pool; the signed parts add up
    to the difference, and a part larger than it is only ever offset by a part of the other sign."""
    for records, panel in _panels(_run(name)):
        columns = {column.label: column for column in panel.columns}
        by_label = {plots.variant(record): record for record in records}
        for said in headline.sentences(headline.rows(records)):
            found = SENTENCE.match(said)
            assert found, said
            high, low = (Scenario.from_dict(by_label[found[side]]["scenario"]) for side in ("high", "low"))
            assert all(getattr(high, field) == getattr(low, field) for field in ALIKE), said
            assert high.framework != low.framework and not (high.preallocates or low.preallocates), said
            assert (columns[found["high"]].phase, columns[found["low"]].phase) == (found["high_phase"],
                                                                                   found["low_phase"]), said
            bars = [sum(columns[found[side]].holds.values()) for side in ("high", "low")]
            total = int(found["total"].replace(",", ""))
            assert total == round((bars[0] - bars[1]) / MIB) >= 0, said
            sizes = [int(part.rsplit(" ", 1)[1].replace(",", "")) for part in found["parts"].split(", ")]
            assert sum(sizes) == total, said
            assert all(abs(size) <= total for size in sizes) or min(sizes) < 0 < max(sizes), said


def test_the_checks_are_not_empty() -> None:
    """Grown pools were checked on the H100 (JAX's noprealloc at ec3adfa among them), and sentences were read."""
    grown = [(record, measured) for name in RUNS for record, measured, _ in _phases(_run(name))
             if record["scenario"]["device"] == "cuda" and not figures.preallocated(record)
             and _pool(record, measured) is not None]
    assert any(record["scenario"]["allocator"] == "noprealloc" for record, _ in grown)
    assert len(grown) > 100
    said = [line for name in RUNS for records, _ in _panels(_run(name))
            for line in headline.sentences(headline.rows(records))]
    assert len(said) > 20
