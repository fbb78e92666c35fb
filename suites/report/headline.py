"""The table a report opens with: per model and kind, each framework's three figures (what it takes of the device
by default, a pool included and named; what its process holds without the pool; what the model needs), the
physical floor, the estimate's error and the status; then one sentence per model saying which part of the
breakdown drives the largest difference between frameworks, read from the bars the plot draws.

No ratio is ever taken against a pool: a pool is sized by the framework's setting, not by the model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from models import allocators
from models.record import phase
from models.scenario import Scenario
from suites.analysis.constants import PROBES
from suites.analysis.figures import MIB, driver_peak, highest, mib, need
from suites.report import plots


@dataclass(frozen=True)
class Row:
    """One framework in the headline: its default run, and the same run with its pool off where it has one."""

    record: dict
    without_pool: dict | None  # the pool-off run, or None: the default run maps no pool, or it was not run

    @property
    def pooled(self) -> bool:
        return Scenario.from_dict(self.record["scenario"]).preallocates

    @property
    def comparable(self) -> dict | None:
        """The record whose process figures compare across frameworks: the run without a pool."""
        return self.without_pool if self.pooled else self.record


def _held(record: dict) -> tuple[int, str] | None:
    return highest(record, lambda name: driver_peak(phase(record, name), record["scenario"]["device"])[0])


def _pool_off_key(record: dict) -> str:
    """A run's settings but its allocator: a pool-off run and its default run share it."""
    return json.dumps(Scenario.from_dict(record["scenario"]).to_dict() | {"allocator": None}, sort_keys=True)


def rows(records: list[dict]) -> list[Row]:
    """Each record a row, except a pool-off run whose default run is present: that one fills the row of each run of
    its framework that maps a pool."""
    def is_pool_off(record: dict) -> bool:
        scenario = record["scenario"]
        return allocators.is_without_pool(scenario["framework"], scenario["allocator"])

    defaults = {_pool_off_key(r) for r in records if r["scenario"]["allocator"] == "default"}
    pool_off = {_pool_off_key(r): r for r in records if is_pool_off(r)}
    return [Row(record, pool_off.get(_pool_off_key(record)) if Scenario.from_dict(record["scenario"]).preallocates
                else None)
            for record in records if not (is_pool_off(record) and _pool_off_key(record) in defaults)]


def _status(record: dict) -> str:
    failure = record.get("failure") or {}
    return record["status"] + (f" in {failure['phase']}" if failure.get("phase") else "")


def _cells(row: Row) -> str:
    record = row.record
    held = _held(record)
    takes = "-" if held is None else f"{mib(held[0])} ({held[1]})" + (", a pool" if row.pooled else "")
    if row.comparable is None:
        without = f"not run ({allocators.without_pool(record['scenario']['framework'])})"
    else:
        found = _held(row.comparable)
        without = "-" if found is None else f"{mib(found[0])} ({found[1]})"
    needs = highest(record, lambda name: need(record, name)[0])
    floor = record.get("floor", {})
    ratio = f"{needs[0] / floor['bytes']:,.1f}x" if needs and floor.get("bytes") else "-"
    error = (record.get("comparison", {}).get(held[1], {}).get("driver", {}).get("relative_error")
             if held else None)
    status = _status(record) + (f"; without the pool {_status(row.without_pool)}"
                                if row.pooled and row.without_pool and row.without_pool["status"] != "ok" else "")
    return (f"| {plots.variant(record)} | {takes} | {without} | {mib(needs[0] if needs else None)} | "
            f"{mib(floor.get('bytes'))} | {ratio} | {'-' if error is None else f'{error:+.0%}'} | {status} |")


def drawn(record: dict) -> tuple[str, dict[str, int]] | None:
    """The phase the plot draws for a record and its breakdown by part, the pool left out; None without one."""
    name = plots.peak_phase(record)
    if name is None or record["status"] != "ok":
        return None
    return name, {part: value["bytes"] for part, value in record["breakdown"][name].items() if part != "pool_unused"}


def sentence(found: list[Row]) -> str | None:
    """Between the framework whose process holds most without a pool and the one holding least, at the phases the
    plot draws: the part of the breakdown that differs most. Pooled runs without a pool-off twin are left out."""
    bars = [(record, *shown) for row in found if (record := row.comparable) and (shown := drawn(record))]
    if len(bars) < 2:
        return None
    (high, high_phase, most), (low, low_phase, least) = (max(bars, key=lambda bar: sum(bar[2].values())),
                                                         min(bars, key=lambda bar: sum(bar[2].values())))
    gaps = {part: most.get(part, 0) - least.get(part, 0) for part in {*most, *least}}
    part = max(gaps, key=gaps.__getitem__)
    return (f"Without a pool, {plots.variant(high)} holds {(sum(most.values()) - sum(least.values())) / MIB:,.0f} MiB "
            f"more than {plots.variant(low)} at the phases the plot draws ({high_phase} against {low_phase}); the "
            f"largest part of it is {part.replace('_', ' ')} (+{gaps[part] / MIB:,.0f} MiB).")


def section(run: dict) -> list[str]:
    """The headline: one table per model and kind but the probes, then its sentence."""
    groups = {key: records for key, records in plots.panels(run["records"]).items() if key[0] not in PROBES}
    if not groups:
        return []
    lines = ["", "## Headline", "",
             "Per model and kind, three figures that answer three questions: what the framework **takes** of the "
             "device by default and in which phase (a preallocated pool included, and named), what its process "
             "**holds without a pool** (the same run with the pool off: JAX's noprealloc, TensorFlow's growth; "
             "the same figure where the framework maps no pool), and what the model **needs** (the allocator's "
             "peak). Then the physical floor (what no framework can avoid), needs over floor (never a ratio against "
             "a pool), the estimate's error at the phase that takes most (driver's view) and the status. MiB.", ""]
    for (model, kind), records in groups.items():
        found = rows(records)
        lines += [f"**{model}, {kind}** (batch {records[0]['scenario']['batch']})", "",
                  "| framework | takes by default | holds without a pool | needs | floor | needs / floor | "
                  "estimate error | status |",
                  "|---|---:|---:|---:|---:|---:|---:|---|", *(_cells(row) for row in found)]
        said = sentence(found)
        lines += ["", said, ""] if said else [""]
    return lines
