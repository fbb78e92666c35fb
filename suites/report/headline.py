"""The table a report opens with: per model and kind, each framework's three figures (what it takes of the device
by default, a pool included and named; what its process holds without the pool; what the model needs), the
physical floor, the estimate's error and the status; then sentences saying which parts of the breakdown make the
difference between frameworks run alike, read from the bars the plot draws.

Table, sentences and plot sum a record up at one phase (`figures.summary_phase`), so they never disagree on what they
compare. No ratio or comparison is ever taken against a pool: a pool is sized by the framework's setting, not by the
model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from models import allocator_modes
from models.record import phase
from models.scenario import Scenario
from suites.analysis import figures
from suites.analysis.constants import PROBES
from suites.analysis.figures import MIB, driver_peak, highest, mib, need
from suites.report import plots, summary

NAMED = 3  # the parts a sentence names one by one; the rest are "other parts"


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
    """What the process holds at the phase the record is summed up by, with the phase; where it has no breakdown (a
    pool whose size the framework does not say), its highest figure."""
    device = record["scenario"]["device"]
    name = figures.summary_phase(record)
    if name is None:
        return highest(record, lambda found: driver_peak(phase(record, found), device)[0])
    return driver_peak(phase(record, name), device)[0], name


def _settings_but(record: dict, *left_out: str) -> str:
    """A run's settings but those `left_out`, as a key: without the allocator, a pool-off run and its default run
    share it; without the framework too, the runs one sentence compares (same technique, batch, optimizer, dtype,
    execution)."""
    return json.dumps(Scenario.from_dict(record["scenario"]).to_dict() | dict.fromkeys(left_out), sort_keys=True)


def _pool_off_key(record: dict) -> str:
    return _settings_but(record, "allocator")


def rows(records: list[dict]) -> list[Row]:
    """Each record a row, except a pool-off run whose default run is present: that one fills the row of each run of
    its framework that maps a pool."""
    def is_pool_off(record: dict) -> bool:
        scenario = record["scenario"]
        return allocator_modes.is_without_pool(scenario["framework"], scenario["allocator"])

    defaults = {_pool_off_key(r) for r in records if r["scenario"]["allocator"] == "default"}
    pool_off = {_pool_off_key(r): r for r in records if is_pool_off(r)}
    return [Row(record, pool_off.get(_pool_off_key(record)) if Scenario.from_dict(record["scenario"]).preallocates
                else None)
            for record in records if not (is_pool_off(record) and _pool_off_key(record) in defaults)]


def _status(record: dict) -> str:
    failure = record.get("failure") or {}
    return record["status"] + (f" in {failure['phase']}" if failure.get("phase") else "")


def _at(found: tuple[int, str] | None) -> str:
    """A figure in MiB with its phase, or '-'."""
    return "-" if found is None else f"{mib(found[0])} ({found[1]})"


HEADERS = ("framework", "takes by default", "holds without a pool", "needs", "floor", "needs / floor",
           "estimate error", "status")
# On the CPU no framework maps a pool: the process's figure is VmHWM, and the anonymous memory comes first, ranked.
CPU_HEADERS = ("framework", "anonymous", "holds (VmHWM)", "holds without a pool", *HEADERS[3:])


def _cells(row: Row, cpu: bool) -> list[str]:
    """A row's cells, as HEADERS (CPU_HEADERS where `cpu`) name them."""
    record = row.record
    held = _held(record)
    takes = _at(held) + (", a pool" if held and row.pooled else "")
    if row.comparable is None:
        without = f"not run ({allocator_modes.without_pool(record['scenario']['framework'])})"
    else:
        without = _at(_held(row.comparable))
    needs = highest(record, lambda name: need(record, name)[0])
    floor = record.get("floor", {})
    ratio = f"{needs[0] / floor['bytes']:,.1f}x" if needs and floor.get("bytes") else "-"
    error = (record.get("comparison", {}).get(held[1], {}).get("driver", {}).get("relative_error")
             if held else None)
    status = _status(record) + (f"; without the pool {_status(row.without_pool)}"
                                if row.pooled and row.without_pool and row.without_pool["status"] != "ok" else "")
    return [plots.variant(record), *([_at(summary.anonymous(record))] if cpu else []), takes, without, _at(needs),
            mib(floor.get("bytes")), ratio, "-" if error is None else f"{error:+.0%}", status]


def _table(found: list[Row], cpu: bool) -> list[str]:
    """The rows under their headers, less the columns with nothing to say (summary.kept: on the CPU also those equal
    to another); on the CPU the lowest anonymous figure of the runs that finished marked, as the summary marks it."""
    headers = CPU_HEADERS if cpu else HEADERS
    cells = [_cells(row, cpu) for row in found]
    if cpu:
        lowest = min((summary.anonymous(row.record) for row in found if row.record["status"] == "ok"
                      and summary.anonymous(row.record)), default=None)
        cells = [[cell + (summary.LOWEST if index == 1 and lowest and cell == _at(lowest) else "")
                  for index, cell in enumerate(row)] for row in cells]
    keep = summary.kept(list(zip(*cells, strict=True)) if cells else [[] for _ in headers], alike=cpu)
    keep[0] = keep[-1] = True  # the framework and the status, whatever they say
    shown = [index for index, kept in enumerate(keep) if kept]
    align = {0: "---", len(headers) - 1: "---"}
    return ["| " + " | ".join(headers[index] for index in shown) + " |",
            "|" + "|".join(align.get(index, "---:") for index in shown) + "|",
            *("| " + " | ".join(row[index] for index in shown) + " |" for row in cells)]


def drawn(record: dict) -> tuple[str, dict[str, int]] | None:
    """The phase the plot draws for a record and its breakdown by part, the pool left out; None without one."""
    name = figures.summary_phase(record)
    if name is None or record["status"] != "ok":
        return None
    return name, {part: value["bytes"] for part, value in record["breakdown"][name].items() if part != "pool_unused"}


def differences(high: dict[str, int], low: dict[str, int], named: int = NAMED) -> tuple[int, list[tuple[str, int]]]:
    """The difference between two breakdowns in whole MiB, and the parts that make it, signed and summing to it: the
    `named` largest, then the other parts together (where they round to a MiB or more)."""
    gaps = {part: high.get(part, 0) - low.get(part, 0) for part in dict.fromkeys([*high, *low])}
    largest = [(part.replace("_", " "), round(gap / MIB)) for part, gap in
               sorted(gaps.items(), key=lambda item: -abs(item[1]))[:named] if round(gap / MIB)]
    total = round((sum(high.values()) - sum(low.values())) / MIB)
    rest = total - sum(size for _, size in largest)
    return total, largest + ([("other parts", rest)] if rest else [])


def sentences(found: list[Row]) -> list[str]:
    """Per group of rows run alike but for the framework (each framework's default run, a pooled one by its pool-off
    run; a pooled run without one is left out): between the one whose process holds most and the one holding least,
    at the phases the table and the plot show, the parts that make the difference."""
    groups: dict[str, list[tuple[dict, str, dict[str, int]]]] = {}
    for row in found:
        record = row.comparable
        if row.record["scenario"]["allocator"] == "default" and record and (shown := drawn(record)):
            groups.setdefault(_settings_but(row.record, "framework", "allocator"), []).append((record, *shown))
    said = []
    for bars in groups.values():
        if len({record["scenario"]["framework"] for record, _, _ in bars}) < 2:
            continue
        (high, high_phase, most), (low, low_phase, least) = (max(bars, key=lambda bar: sum(bar[2].values())),
                                                             min(bars, key=lambda bar: sum(bar[2].values())))
        total, parts = differences(most, least)
        said.append(f"Without a pool, {plots.variant(high)} holds {total:,} MiB more than {plots.variant(low)} "
                    f"({high_phase} against {low_phase}, as the table and the plot show them); by part: "
                    + ", ".join(f"{part} {size:+,}" for part, size in parts) + " MiB.")
    return said


def section(run: dict) -> list[str]:
    """The headline: one table per model and kind but the probes, then its sentence."""
    groups = {key: records for key, records in plots.panels(run["records"]).items() if key[0] not in PROBES}
    if not groups:
        return []
    lines = ["", "## Headline", "",
             "Per model and kind, three figures that answer three questions: what the framework **takes** of the "
             "device by default (a preallocated pool included, and named), what its process **holds without a "
             "pool** (the same run with the pool off: JAX's noprealloc, TensorFlow's growth; the same figure where "
             "the framework maps no pool), each at the phase in brackets: the one the run is summed up by, where "
             "its process holds most without a pool, as the plot draws it; and what the model **needs** at most "
             "(the allocator's peak) in the phase in brackets: what a card must fit, which can fall in another "
             "phase when a cache keeps what that phase freed. Then the physical floor (what no framework can "
             "avoid), needs over floor (never a ratio against a pool), the estimate's error at the phase the run "
             "is summed up by (driver's view) and the status. MiB. Below the table, for the frameworks' default "
             "runs alike but for the framework (a pooled one by its pool-off run), the parts that make the "
             "difference between the one holding most and the one holding least, signed, summing to it.", ""]
    cpu = all(record["scenario"]["device"] != "cuda" for record in run["records"])
    if cpu:
        sampled = any(summary.anonymous(record) for record in run["records"])
        lines += ["On the CPU no framework maps a pool, and host RSS (VmHWM) counts file-backed pages (shared "
                  "libraries, the page cache) that move between runs: "
                  + ("the first figure is the process's **anonymous** resident memory at its highest phase (sampled), "
                     "the one that repeats run to run and that `compare` gates, and the lowest of the runs that "
                     f"finished is marked {summary.LOWEST}." if sampled else
                     "this run was written before the anonymous memory, the figure that repeats, was sampled.")
                  + " A column with no figure, or the same as another in every row, is left out.", ""]
    for (model, kind), records in groups.items():
        found = rows(records)
        lines += [f"**{model}, {kind}** (batch {records[0]['scenario']['batch']})", "", *_table(found, cpu)]
        said = [f"{plots.variant(row.record)}: needs {why}." for row in found
                if (why := figures.no_allocator_figures(row.record))] + sentences(found)
        lines += ["", *said, ""] if said else [""]
    return lines
