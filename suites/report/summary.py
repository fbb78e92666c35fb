"""The end of a bench in the terminal: one short table per model and kind, in MiB like the report.

Per run setting (the framework and whatever differs from the defaults): what the process held at its highest phase
(the driver's view: NVML on a GPU, host RSS on the CPU) and the most the model needed (the allocator's peak), with
the lowest of each marked. The probes measure the estimate's constants, not a model: they are counted, not listed.
"""

from __future__ import annotations

from models.scenario import Scenario
from suites.analysis.constants import PROBES
from suites.analysis.figures import mib, peaks, preallocated

LOWEST, POOL = "*", "p"


def _figures(record: dict) -> tuple[int | None, int | None]:
    """(holds, needs) at their highest phase, bytes; None where the record has no such figure."""
    holds, needs = peaks(record)
    return (holds[0] if holds else None), (needs[0] if needs else None)


def _table(records: list[dict]) -> list[str]:
    rows = [(Scenario.from_dict(record["scenario"]).variant, record["status"], *_figures(record), preallocated(record))
            for record in records]
    least = [min((row[index] for row in rows if row[1] == "ok" and row[index] and not (index == 2 and row[4])),
                 default=None) for index in (2, 3)]
    width = max(len("framework"), *(len(row[0]) for row in rows))
    lines = [f"  {'framework':<{width}}  {'holds MiB':>10}  {'needs MiB':>10}"]
    for setting, status, holds, needs, pooled in rows:
        if status != "ok":
            lines.append(f"  {setting:<{width}}  {status:>10}")
            continue
        cells = [f"{mib(value)}{LOWEST if value is not None and value == least[index] else ' '}"
                 for index, value in enumerate((holds, needs))]
        cells[0] = cells[0].rstrip() + POOL if pooled else cells[0]
        lines.append(f"  {setting:<{width}}  {cells[0]:>10}  {cells[1]:>10}")
    return lines


def tables(run: dict) -> str:
    """Every model and kind of the run, in the run's order, then a line for the probes."""
    groups: dict[tuple[str, str], list[dict]] = {}
    probes = []
    for record in run["records"]:
        scenario = record["scenario"]
        if scenario["model"] in PROBES:
            probes.append(record)
            continue
        groups.setdefault((scenario["model"], scenario["kind"]), []).append(record)
    lines = []
    for (model, kind), records in groups.items():
        lines += [f"{model} {kind} (batch {records[0]['scenario']['batch']})", *_table(records), ""]
    if groups:
        lines.append(f"{LOWEST} the lowest; holds: what the process held at its highest phase ("
                     + ("NVML" if run.get("device") == "cuda" else "host RSS") + f"), {POOL}: a pool the framework "
                     "took up front, whatever the model needs (not ranked); needs: the allocator's peak")
    if probes:
        ok = sum(record["status"] == "ok" for record in probes)
        lines.append(f"probes (the estimate's constants, not listed): {ok} of {len(probes)} ok")
    return "\n".join(lines)
