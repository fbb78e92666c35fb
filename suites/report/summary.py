"""The end of a bench in the terminal: one short table per model and kind, in MiB like the report.

Per run setting (the framework and whatever differs from the defaults): what the process held at its highest phase
and the most the model needed (the allocator's peak), with the lowest of each marked. On a GPU the process's figure
is NVML's; on the CPU the lowest is marked by its anonymous resident memory (sampled), the figure that repeats run to
run and the one `compare` gates there, since host RSS (VmHWM) also counts file-backed pages that move between runs.
A column with nothing to say (no figure in any row, or on the CPU another column's in every row) is left out. The
probes measure the estimate's constants, not a model: they are counted, not listed. A framework whose allocator
kept no figures says why in a line. Last, the scenarios the bench failed (probes too), each with its message and where
it was raised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from models.scenario import Scenario
from suites.analysis import compare
from suites.analysis.constants import PROBES
from suites.analysis.explain import wrap
from suites.analysis.figures import highest, mib, no_allocator_figures, peaks, preallocated
from suites.report import readout

LOWEST, POOL = "*", "p"
Peak = tuple[int, str] | None  # bytes at the highest phase, with the phase


def anonymous(record: dict) -> Peak:
    """The most anonymous resident memory the process held in a phase (sampled), with the phase: `compare`'s CPU
    view; None for a record without it (written before it was sampled, or on a GPU)."""
    reading = compare.FIGURES["anonymous"][0]
    return highest(record, lambda name: reading(record, name))


def kept(columns: Sequence[Sequence[object]], alike: bool) -> list[bool]:
    """Which columns (each a sequence of cells, None or '-' for no figure) say something: a figure in some row and,
    where `alike`, not the same cells as an earlier column."""
    said = [any(cell not in (None, "-") for cell in column) for column in columns]
    return [said[index] and not (alike and any(said[earlier] and list(columns[earlier]) == list(column)
                                               for earlier in range(index)))
            for index, column in enumerate(columns)]


def _columns(cpu: bool) -> list[tuple[str, Callable[[dict], Peak]]]:
    """The figures a table may show, the process's view first: on the CPU the anonymous memory, then VmHWM."""
    views = [("holds MiB", lambda record: peaks(record)[0]), ("needs MiB", lambda record: peaks(record)[1])]
    return [("anon MiB", anonymous), *views] if cpu else views


def _table(records: list[dict], cpu: bool) -> list[str]:
    rows = [(Scenario.from_dict(record["scenario"]).variant, record["status"], preallocated(record))
            for record in records]
    found = [(name, [figure(record) for record in records]) for name, figure in _columns(cpu)]
    found = [column for column, keep in zip(found, kept([values for _, values in found], alike=cpu), strict=True)
             if keep]
    # the process's view that repeats (the first one kept), and the need; none where no record has a figure
    ranked = {name for name, _ in found[:1]} | {"needs MiB"}
    least = [min((value[0] for value, (_, status, pooled) in zip(values, rows, strict=True)
                  if status == "ok" and value and not (name == "holds MiB" and pooled)), default=None)
             if name in ranked else None for name, values in found]
    width = max(len("framework"), *(len(row[0]) for row in rows))
    lines = [f"  {'framework':<{width}}" + "".join(f"  {name:>10}" for name, _ in found)]
    for index, (setting, status, pooled) in enumerate(rows):
        if status != "ok":
            lines.append(f"  {setting:<{width}}  {status:>10}")
            continue
        cells = []
        for (name, values), lowest in zip(found, least, strict=True):
            value = values[index][0] if values[index] else None
            cell = f"{mib(value)}{LOWEST if value is not None and value == lowest else ' '}"
            cells.append(cell.rstrip() + POOL if name == "holds MiB" and pooled else cell)
        lines.append(f"  {setting:<{width}}" + "".join(f"  {cell:>10}" for cell in cells))
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
    cpu = run.get("device") != "cuda"
    lines = []
    for (model, kind), records in groups.items():
        lines += [f"{model} {kind} (batch {records[0]['scenario']['batch']})", *_table(records, cpu), ""]
    if groups and cpu:
        lines.append(f"{LOWEST} the lowest; anon: the process's anonymous resident memory at its highest phase "
                     "(sampled), the CPU's figure that repeats run to run and the one `compare` gates, so the rows are "
                     "ranked by it; holds: host RSS (VmHWM), with file-backed pages that move between runs (ranked "
                     "only where no anon figure is); needs: the allocator's peak; a column no row has is left out")
    elif groups:
        lines.append(f"{LOWEST} the lowest; holds: what the process held at its highest phase (NVML), {POOL}: a pool "
                     "the framework took up front, whatever the model needs (not ranked); needs: the allocator's peak")
    lines += _needs_not_available(run["records"])
    if probes:
        ok = sum(record["status"] == "ok" for record in probes)
        lines.append(f"probes (the estimate's constants, not listed): {ok} of {len(probes)} ok")
    return "\n".join(lines + _failed(run["records"]))


def _needs_not_available(records: list[dict]) -> list[str]:
    """Once per framework whose allocator kept no figures (Keras on TensorFlow with oneDNN off), why its needs are
    missing: the tables leave a column out that no row has, and would say nothing."""
    reasons = {record["scenario"]["framework"]: why for record in records if (why := no_allocator_figures(record))}
    return [line for framework, why in reasons.items() for line in wrap(f"{framework} needs {why}", "")]


def _failed(records: list[dict]) -> list[str]:
    """The scenarios the bench failed (probes too), each with its message and, under it, where it was raised."""
    failed = [record for record in records if readout.needs_a_look(record)]
    lines = ["", f"failed: {len(failed)}"] if failed else []
    for record in failed:
        lines += [*wrap(f"{readout.label(Scenario.from_dict(record['scenario']))}: {readout.failure_line(record)}",
                        "  "), *readout.frame_lines(record["failure"], indent="      ")]
    return lines
