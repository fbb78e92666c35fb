"""The table a report opens with: per model and kind, each framework's peak, its need, the physical floor, the
estimate's error and the status, and one sentence per model saying what drives the largest difference, read from
the breakdowns (never written by hand).
"""

from __future__ import annotations

from models.record import phase
from suites import plots
from suites.constants import PROBES
from suites.figures import MIB, driver_peak, highest, mib, need


def _peak(record: dict) -> tuple[str | None, int | None]:
    """The phase where the process held most, and what it held (the sum of that phase's breakdown where there is
    one, which is the driver's figure split by category)."""
    parts = record.get("breakdown", {})
    if parts:
        name = max(parts, key=lambda n: sum(p["bytes"] for p in parts[n].values()))
        return name, sum(p["bytes"] for p in parts[name].values())
    held = highest(record, lambda name: driver_peak(phase(record, name), record["scenario"]["device"])[0])
    return (held[1], held[0]) if held else (None, None)


def _row(record: dict) -> str:
    name, holds = _peak(record)
    needs = highest(record, lambda phase_name: need(record, phase_name)[0])
    floor = record.get("floor", {})
    error = record.get("comparison", {}).get(name, {}).get("driver", {}).get("relative_error") if name else None
    status = record["status"] + (f" in {record['failure']['phase']}" if (record.get("failure") or {}).get("phase")
                                 else "")
    ratio = f"{holds / floor['bytes']:,.1f}x" if holds and floor.get("bytes") else "-"
    return (f"| {plots.variant(record)} | {mib(holds)} ({name or '-'}) | {mib(needs[0] if needs else None)} | "
            f"{mib(floor.get('bytes'))} | {ratio} | {'-' if error is None else f'{error:+.0%}'} | {status} |")


def _driver(records: list[dict]) -> str | None:
    """Between the framework holding most and the one holding least: the category that differs most."""
    held = [(record, *_peak(record)) for record in records if record["status"] == "ok"]
    held = [(record, name, value) for record, name, value in held if value is not None and record.get("breakdown")]
    if len(held) < 2:
        return None
    (high, high_phase, most), (low, low_phase, least) = max(held, key=lambda h: h[2]), min(held, key=lambda h: h[2])
    parts = [high["breakdown"][high_phase], low["breakdown"][low_phase]]
    gaps = {category: parts[0].get(category, {}).get("bytes", 0) - parts[1].get(category, {}).get("bytes", 0)
            for category in {*parts[0], *parts[1]}}
    category = max(gaps, key=gaps.__getitem__)
    return (f"{plots.variant(high)} holds {(most - least) / MIB:,.0f} MiB more than {plots.variant(low)} at its "
            f"peak ({high_phase} against {low_phase}); the largest part of it is {category.replace('_', ' ')} "
            f"(+{gaps[category] / MIB:,.0f} MiB).")


def section(run: dict) -> list[str]:
    """The headline: one table over every model but the probes, then one sentence per model and kind."""
    groups = {key: records for key, records in plots.panels(run["records"]).items() if key[0] not in PROBES}
    if not groups:
        return []
    lines = ["", "## Headline", "",
             "Per model and kind: the most the process held and in which phase, the most the model needed (the "
             "allocator), the physical floor (what no framework can avoid), held over floor, the estimate's error "
             "at that phase (driver's view) and the status. MiB.", ""]
    for (model, kind), records in groups.items():
        lines += [f"**{model}, {kind}** (batch {records[0]['scenario']['batch']})", "",
                  "| framework | holds | needs | floor | holds / floor | estimate error | status |",
                  "|---|---:|---:|---:|---:|---:|---|", *(_row(record) for record in records)]
        sentence = _driver(records)
        lines += ["", sentence, ""] if sentence else [""]
    return lines
