"""The Markdown report and plots of a run file: what a person reads after `make bench`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from models.record import STATIC_PLAN, atomic_write, phase, worker_seconds
from models.scenario import PHASES, Scenario
from suites.analysis import accounting, across_records, errors, figures, fit
from suites.analysis.constants import PROBES
from suites.analysis.figures import MIB, driver_peak, mib, need
from suites.report import headline, plots, readout
from suites.run import known, runfile

T = TypeVar("T")
COLUMNS = 12  # a table's columns at most: wider ones are split (_tables)
# A breakdown part's basis (suites.analysis.accounting) as the report marks it.
BASIS_MARKS = {accounting.MEASURED: "m", accounting.DERIVED: "d", STATIC_PLAN: "p", accounting.ESTIMATED: "e"}


def _share(value: float | None) -> str:
    """A relative error or saving as a signed percentage; n/a where the measurement was zero."""
    return "n/a" if value is None else f"{value:+.0%}"


def _not_measured(run: dict) -> list[str]:
    """Frameworks the suite knows that have no record here (not selected, or not installable there)."""
    measured = {entry["scenario"]["framework"] for entry in (*run["records"], *run.get("fits", []))}
    return [name for name in run.get("frameworks_known", []) if name not in measured]


def _commits_line(run: dict) -> list[str]:
    """Which commits the records were measured at: one, or a merged run's several (each with its count); nothing
    where no record says (a fit run written before its probes kept their records): the commit line names the run's."""
    found = runfile.commits(run)
    if not found:
        return []
    if len(found) == 1:
        return [f"- every record measured at commit `{next(iter(found))[:10]}`"]
    return ["- **records from several commits** (a merged run): "
            + ", ".join(f"`{commit[:10]}` ({count})" for commit, count in found.items())]


def _tables(items: list[T], framework: Callable[[T], str]) -> list[list[T]]:
    """Columns of a wide table split into tables of at most COLUMNS - 1 (a row reads on one screen): by framework,
    each kept whole where it fits (its techniques or batches side by side) and small ones packed together; a table
    that fits stays one, in run order."""
    room = COLUMNS - 1
    if len(items) <= room:
        return [items]
    groups: dict[str, list[T]] = {}
    for item in items:
        groups.setdefault(framework(item), []).append(item)
    tables: list[list[T]] = []
    for group in groups.values():
        parts = -(-len(group) // room)  # a framework too wide for one table: in parts of about the same width
        for chunk in (group[len(group) * part // parts:len(group) * (part + 1) // parts] for part in range(parts)):
            if tables and len(tables[-1]) + len(chunk) <= room:
                tables[-1] = tables[-1] + chunk
            else:
                tables.append(chunk)
    return tables


def markdown(run: dict) -> str:
    lines = [
        f"# footprint: suite `{run['suite']}`",
        "",
        f"- device: {run['device_description']}",
        f"- commit: `{run['git_commit']}`, started {run['started_at']}, complete: {run['complete']}",
        *_commits_line(run),
        f"- machine: {run['machine']['cpus']} CPUs{_cpu_model(run['machine'])}, "
        f"{run['machine']['memory_bytes'] / 2**30:.0f} GiB, {run['machine']['platform']}",
        f"- not measured in this run: {', '.join(_not_measured(run)) or 'none'}",
        "",
        "Each cell is the peak inside the phase, in MiB, as *holds / needs*: what the process holds "
        + ("(host RSS of the worker process)" if run["device"] == "cpu"
           else "(NVML's figure for the worker's processes, a preallocated pool included)")
        + " and what the model needs (the allocator's own peak inside the phase; `p`: XLA's static plan where"
        " JAX's counter did not rise in the phase; '-': the framework has no allocator figure here). Seconds in"
        " brackets. Rows marked 'allocator' are the framework's own figures, with their semantics: reset = peak"
        " since the phase began, at most = a cumulative counter that did not rise in the phase, cumulative = peak"
        " since the process began, end of phase = one reading when the phase ended.",
    ]
    lines += headline.section(run)
    panels = plots.panels(run["records"])
    probes = [key for key in panels if key[0] in PROBES]
    for model, kind in [key for key in panels if key not in probes] + probes:  # the probes last, as fixed costs
        records = panels[model, kind]
        if probes and (model, kind) == probes[0]:
            lines += ["", "## Fixed costs: the probes", "",
                      "The probe nets are tiny: what they hold is what a framework costs before any model, and their "
                      "constants go into every estimate (results/constants-<device>.json). No floor ratio here: "
                      "their floor is a few KiB."]
        spec = Scenario.from_dict(records[0]["scenario"]).spec  # from the scenario: a record cut short has no more
        lines += ["", f"{'###' if model in PROBES else '##'} {model}, {kind} (batch {records[0]['scenario']['batch']}, "
                  f"{records[0]['scenario']['optimizer'] if kind == 'train' else 'no optimizer'}; "
                  f"{spec.param_count:,} parameters, {_weights(spec.weight_bytes())} of weights)"]
        for table in _tables(records, lambda record: record["scenario"]["framework"]):
            lines += ["", *_panel_table(table, kind, floor=model not in PROBES)]
    lines += (_error_summary(run) + _keras_section(run) + _execution_section(run) + _savings_section(run)
              + _sweeps_section(run)
              + _fits_section(run) + _time_section(run) + _missing_section(run) + _failed_section(run))
    return "\n".join(lines) + "\n"


def _cpu_model(machine: dict) -> str:
    """The CPU's model and AVX-512 where the run recorded them (runs before 64's fix did not)."""
    cpu = machine.get("cpu")
    if not cpu:
        return ""
    avx512 = {True: ", AVX-512", False: ", no AVX-512"}.get(cpu["avx512"], "")
    return f" ({cpu['model']}{avx512})"


def _weights(size: int) -> str:
    """A model's weights to the report's precision (figures.mib); a probe's few KiB in KiB, not as 0.0 MiB."""
    return f"{mib(size)} MiB" if round(size / MIB, 1) else f"{size / 2**10:,.1f} KiB"


def _panel_table(records: list[dict], kind: str, floor: bool) -> list[str]:
    """One table of a model and kind's records, a column each: per phase holds / needs, then the other figures."""
    lines = ["| phase | " + " | ".join(plots.variant(r) for r in records) + " |", "|---" * (len(records) + 1) + "|"]
    for name in PHASES[kind]:
        lines.append(f"| {name} | " + " | ".join(_holds_needs(record, name) for record in records) + " |")
    lines += _host_rows(records, kind)
    lines += _allocator_rows(records, kind)
    reasons = [figures.no_allocator_figures(record) or "" for record in records]
    if any(reasons):  # once per table, not in each phase's '-'
        lines.append("| needs | " + " | ".join(reasons) + " |")
    lines += _nvml_rows(records, kind)
    lines += _estimate_rows(records, kind, floor)
    lines.append("| allocator mode | " + " | ".join(
        r.get("allocator", {}).get("mode", "default")
        + ("" if r.get("allocator", {}).get("applicable", True) else " (not applicable: CPU)")
        for r in records) + " |")
    lines.append("| status | " + " | ".join(_status(r) for r in records) + " |")
    lines.append("| framework's parameter count | " + " | ".join(
        f"{r['framework'].get('param_count', '-'):,}" if "param_count" in r["framework"] else "-"
        for r in records) + " |")
    return lines


def _time_section(run: dict) -> list[str]:
    """Where a run's time goes, per framework: each phase's seconds summed over its scenarios, the compile helper's,
    and the workers' wall time (the rest is starting the interpreter and writing the record)."""
    frameworks: dict[str, dict[str, float]] = {}
    for record in run["records"]:
        seconds = frameworks.setdefault(record["scenario"]["framework"], {"scenarios": 0})
        seconds["scenarios"] += 1
        for measured in record.get("phases", []):
            seconds[measured["name"]] = seconds.get(measured["name"], 0.0) + measured["seconds"]
        helper = (record.get("worker") or {}).get("compile_helper") or {}
        seconds["compile helper"] = seconds.get("compile helper", 0.0) + helper.get("seconds", 0.0)
        seconds["worker wall"] = seconds.get("worker wall", 0.0) + worker_seconds(record)
    if not frameworks:
        return []
    columns = ["scenarios", *PHASES["train"], "allocate", "compile helper", "worker wall"]
    columns = [c for c in columns if any(c in seconds for seconds in frameworks.values())]
    lines = ["", "## Time per framework and phase", "",
             "Seconds summed over each framework's scenarios: each phase, the compile helper (before the phases, "
             "where one guards the step from compile scratch) and the workers' wall time, less a worker's wait at its "
             "gate while the one before it measured (the rest is the interpreter's start and the record's "
             "writing).", "",
             "| framework | " + " | ".join(columns) + " |", "|---" + "|---:" * len(columns) + "|"]
    for framework, seconds in frameworks.items():
        lines.append(f"| {framework} | {seconds['scenarios']} | "
                     + " | ".join(f"{seconds.get(c, 0.0):,.1f}" for c in columns[1:]) + " |")
    return lines


def _missing_section(run: dict) -> list[str]:
    """The scenarios the run was asked for and has no record of (stopped, or a write failed): `--resume` runs them."""
    if not run.get("missing"):
        return []
    return ["", f"## Missing: {len(run['missing'])} of the scenarios asked for have no record", "",
            "Run the same command with `--resume` to measure only these.", "",
            *(f"- {_missing_label(entry)}" for entry in run["missing"])]


def _failed_section(run: dict) -> list[str]:
    """The scenarios the bench failed (what a status cell only names), each with its message and, under it, where
    it was raised."""
    failed = [record for record in run["records"] if readout.needs_a_look(record)]
    if not failed:
        return []
    lines = ["", f"## Failed: {len(failed)} scenarios, with where each was raised", ""]
    for record in failed:
        lines.append(f"- {readout.label(Scenario.from_dict(record['scenario']))}: {readout.failure_line(record)}")
        where = readout.frame_lines(record["failure"], indent="  ")
        lines += ["", "  ```", *where, "  ```"] if where else []
    return lines


def _missing_label(entry: dict) -> str:
    """A missing scenario's label; a fit question's with its budget."""
    scenario = {key: value for key, value in entry.items() if key != "fit_budget_bytes"}
    budget = entry.get("fit_budget_bytes")
    asked = f": does it fit in {fit.budget_text(budget)}?" if budget else ""
    return readout.label(Scenario.from_dict(scenario)) + asked


def _status(record: dict) -> str:
    """ok, or the failure with its phase, and its known cause where it has one."""
    if not record["failure"]:
        return record["status"]
    cause, where = known.classify(record), record["failure"].get("phase")
    return record["status"] + (f" in {where}" if where else "") + (f" (known cause: {cause})" if cause else "")


def _holds_needs(record: dict, name: str) -> str:
    """One phase of one record: holds / needs (MiB) and its seconds."""
    measured = phase(record, name)
    if not measured:
        return record["status"] if name == (record["failure"] or {}).get("phase") else "-"
    holds = driver_peak(measured, record["scenario"]["device"])[0]
    needed, label = need(record, name)
    return (f"{mib(holds)} / {mib(needed)}"
            f"{' p' if label == STATIC_PLAN else ''} ({measured['seconds']:.2f} s)")


def _signed(value: int | None) -> str:
    return "-" if value is None else ("+" if value >= 0 else "-") + mib(abs(value))


def _keras_section(run: dict) -> list[str]:
    """Per model and kind, what Keras adds on each backend per phase: holds / needs minus the raw framework's."""
    found = across_records.keras_overhead(run)
    if not found:
        return []
    lines = ["", "## What Keras adds on each backend", "",
             "Per phase, the Keras record's figure minus its raw backend's (same model, kind, batch and settings), "
             "in MiB, as *holds / needs* (see the tables above). Keras on TensorFlow has no raw column here: it is "
             "this suite's TensorFlow idiom."]
    for (model, kind) in dict.fromkeys((o.model, o.kind) for o in found):
        lines += ["", f"**{model}, {kind}**"]
        for mine in _tables([o for o in found if (o.model, o.kind) == (model, kind)], lambda o: o.keras):
            header = " | ".join(f"{o.keras} - {o.raw}" for o in mine)
            lines += ["", f"| phase | {header} |", "|---" * (len(mine) + 1) + "|"]
            for name in PHASES[kind]:
                cells = [" / ".join(_signed(v) for v in o.phases[name]) if name in o.phases else "-" for o in mine]
                lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _execution_section(run: dict) -> list[str]:
    """Per model and kind, each framework's modes: the peak and seconds of every phase from compile on, and what
    the steady phase holds against the framework's default mode."""
    found = across_records.execution_modes(run)
    if not found:
        return []
    lines = ["", "## What compiling costs and saves", "",
             "Per phase, what the process and its children held at the peak (MiB, the driver's view) and the "
             "phase's seconds. torch compiles the inference graph in `compile` (one forward pass) and the training "
             "graph in `train_step_1`; JAX and Keras compile at the first call. Last column: the steady phase "
             "(`train_step_2`, or `inference` for an infer scenario) against the same framework's default mode; "
             "negative: the mode held less."]
    for model, kind in dict.fromkeys((m.model, m.kind) for m in found):
        names = [name for name in across_records.COMPILED_PHASES if name in PHASES[kind]]
        lines += ["", f"**{model}, {kind}**", "",
                  "| framework | mode | " + " | ".join(names) + " | steady vs default |",
                  "|---|---|" + "---:|" * (len(names) + 1)]
        for mode in (m for m in found if (m.model, m.kind) == (model, kind)):
            label = mode.execution + (" (default)" if mode.default else "")
            if mode.status != "ok":
                lines.append(f"| {mode.framework} | {label} | {mode.status} |" + " |" * len(names))
                continue
            cells = [f"{mib(mode.peaks[name])} ({mode.seconds[name]:.1f} s)" if mode.peaks.get(name) else "-"
                     for name in names]
            lines.append(f"| {mode.framework} | {label} | " + " | ".join(cells)
                         + f" | {_signed(mode.steady_versus_default)} |")
    return lines


def _savings_section(run: dict) -> list[str]:
    """Per technique and framework: bytes and share saved at the peak, the prediction, the time cost."""
    found = across_records.savings(run)
    if not found:
        return []
    lines = ["", "## What each technique saves", "",
             "Against the same framework's baseline (no technique, Adam, same model and batch) at the training "
             "peak (inference peak for `tracked`), in the view of the estimate table above. Negative: it cost "
             "memory. Time: the steady step's seconds over the baseline's.", "",
             "| technique | model | framework | saved (MiB) | saved | predicted (MiB) | step time |",
             "|---|---|---|---:|---:|---:|---:|"]
    caveats = list(dict.fromkeys(saving.caveat for saving in found if saving.caveat))
    for saving in sorted(found, key=lambda s: (s.technique, s.model, s.framework)):
        technique = saving.technique + (f" [{caveats.index(saving.caveat) + 1}]" if saving.caveat else "")
        if saving.unavailable:
            lines.append(f"| {technique} | {saving.model} | {saving.framework} | not available: "
                         f"{saving.unavailable} | | | |")
            continue
        lines.append(f"| {technique} | {saving.model} | {saving.framework} | {mib(saving.measured)} | "
                     f"{_share(saving.measured_share)} | {mib(saving.predicted)} | "
                     + (f"{saving.time_ratio:.2f}x |" if saving.time_ratio else "- |"))
    notes = [f"[{number}] Not the same arithmetic: {caveat}." for number, caveat in enumerate(caveats, start=1)]
    return lines + (["", *notes] if notes else [])


def _fits_section(run: dict) -> list[str]:
    """Each fit question's answer, then its probes."""
    if not run.get("fits"):
        return []
    lines = ["", "## Does it fit?", ""]
    for result in run["fits"]:
        lines += [f"**{result['question']}**", "", "```", fit.describe(result), "```", ""]
    return lines


def _sweeps_section(run: dict) -> list[str]:
    """The fitted growth with batch and depth."""
    lines = []
    for axis in ("batch", "depth"):
        for growth in across_records.sweep_fits(run, axis):
            if not lines:
                lines = ["", "## Growth with batch and depth", "",
                         "Fitted y = c + b x^k by least squares (k in steps of 0.01), and the linear slope. "
                         "Batch: each swept model's training peak. Depth: plain-N's activation memory: in the "
                         "allocator's view, what the steady step added to what the allocator held when it began; "
                         "in the driver's view, the peak minus the measured constant and the weights, gradients, "
                         "optimizer state, inputs and update temporaries. A straight line is drawn only where every "
                         "point lies within 5 % (or 4 MiB) of it; elsewhere the rises beyond its slope are named "
                         "(TensorFlow's allocator grows in steps; checkpointing grows as a square root).", "",
                         "| sweep | model | framework | technique | exponent k | offset c | straight line | "
                         "points (x: MiB) |", "|---|---|---|---|---:|---:|---|---|"]
            unit = "example" if axis == "batch" else "layer"
            line = (f"{growth.slope / 2**20:.2f} MiB per {unit}, within {mib(growth.residual)} MiB" if growth.linear
                    else f"does not fit (off by up to {mib(growth.residual)} MiB); "
                    + ", ".join(f"{a} to {b}: +{mib(excess)} MiB beyond the slope" for a, b, excess in growth.steps))
            lines.append(f"| {axis} | {growth.model} | {growth.framework} | {growth.technique} ({growth.view}) | "
                         f"{growth.exponent:.2f} | {mib(growth.offset)} | {line} | "
                         + ", ".join(f"{x}: {mib(y)}" for x, y in growth.points) + " |")
    return lines


def _phase_rows(records: list[dict], kind: str, label: str, cell: Callable[[dict, str], str]) -> list[str]:
    """One row per phase of `kind` with a cell per record; a phase where every cell is '-' is left out."""
    rows = []
    for name in PHASES[kind]:
        cells = [cell(record, name) for record in records]
        if any(text != "-" for text in cells):
            rows.append(f"| {name}: {label} | " + " | ".join(cells) + " |")
    return rows


def _estimate_cell(record: dict, name: str) -> str:
    """Each view's estimate against its measurement, and the framework's own estimate where it has one."""
    views = record.get("comparison", {}).get(name, {})
    parts = [f"{view}: {mib(figures['estimate'])} vs {mib(figures['measured'])} "
             f"({_share(figures['relative_error'])})"
             + (f"; own {mib(figures['framework_estimate'])} ({_share(figures['framework_relative_error'])})"
                if "framework_estimate" in figures else "")
             for view, figures in views.items() if "estimate" in figures]
    return "<br>".join(parts) or "-"


def _estimate_rows(records: list[dict], kind: str, floor: bool) -> list[str]:
    """Per phase the estimate against the measurement in each view, then the floor (`floor`) and the peak's
    breakdown."""
    rows = _phase_rows(records, kind, "estimate vs measured", _estimate_cell)
    if floor:
        rows.append("| peak / floor | " + " | ".join(_floor_cell(r.get("floor", {})) for r in records) + " |")
    rows.append(f"| where the peak goes ({', '.join(f'{mark} {basis}' for basis, mark in BASIS_MARKS.items())}) | "
                + " | ".join(_breakdown_cell(r) for r in records) + " |")
    return rows


def _floor_cell(floor: dict) -> str:
    """Holds and needs as multiples of the physical floor."""
    if "ratio" not in floor:
        return "-"
    text = f"holds {floor['ratio']:,.2f}x ({floor.get('ratio_over_context', 0):,.2f}x over the context)"
    if "need_ratio" in floor:
        text += f", needs {floor['need_ratio']:,.2f}x"
    return f"{text}; floor {mib(floor['bytes'])}"


def _breakdown_cell(record: dict) -> str:
    """The breakdown at the phase the record is summed up by (figures.summary_phase), as the headline and the plot
    show it, each part marked by its basis (BASIS_MARKS)."""
    parts = record.get("breakdown", {})
    if not parts:
        return "-"
    name = figures.summary_phase(record)
    return f"{name}: " + ", ".join(f"{category} {mib(part['bytes'])} {BASIS_MARKS[part['basis']]}"
                                   for category, part in parts[name].items() if part["bytes"])


def _error_summary(run: dict) -> list[str]:
    """Median and max absolute relative error of the estimate per framework and view, without the probes."""
    summary = errors.summary(errors.rows(run))
    if not summary:
        return []
    lines = ["", "## Estimate vs measurement", "",
             "Estimate = the analytic bytes of `python -m suites estimate` plus the measured constants of the probe "
             "model and, where the depth probe ran, its runtime per layer times the net's layers beyond the probe's "
             "(results/constants-<device>.json). Views: *driver* = the phase's peak above the context phase "
             "(host RSS on the CPU, NVML on a GPU); *allocator* = the framework allocator's peak. *framework* rows "
             "use the framework's own estimate (JAX's compiled memory_analysis(), torch's mem_tracker) with the "
             "same constants. Absolute relative error over every phase after the context, probes excluded.", "",
             "| framework | view | estimate | phases | median error | max error |", "|---|---|---|---:|---:|---:|"]
    for (framework, view, source), found in summary.items():
        lines.append(f"| {framework} | {view} | {source} | {found['n']} | {found['median']:.1%} | "
                     f"{found['max']:.1%} |")
    return lines

def _host_cell(record: dict, name: str) -> str:
    """The CPU's repeatable figure (anonymous RSS, sampled) beside the file-backed pages that VmHWM also counts."""
    host = (phase(record, name) or {}).get("host", {})
    if "sampled_peak_rss_anon" not in host:
        return "-"
    return (f"anonymous {mib(host['sampled_peak_rss_anon']['bytes'])} (sampled peak); "
            f"file-backed {mib(host['end_rss_file_bytes'])} (at the end)")


def _host_rows(records: list[dict], kind: str) -> list[str]:
    """On the CPU, per phase: the figure that repeats run to run, and the file-backed part of the exact peak."""
    return _phase_rows(records, kind, "host RSS", _host_cell) if records[0]["scenario"]["device"] != "cuda" else []


def _allocator_cell(record: dict, name: str) -> str:
    measured = phase(record, name) or {"allocator": {}}
    return ", ".join(f"{counter} {mib(figure['bytes'])} ({figure['semantics']})"
                     for counter, figure in measured["allocator"].items()) or "-"


def _allocator_rows(records: list[dict], kind: str) -> list[str]:
    """The frameworks' own figures (MiB, with their semantics), one row per phase that has any."""
    return _phase_rows(records, kind, "allocator", _allocator_cell)


def _nvml_rows(records: list[dict], kind: str) -> list[str]:
    """NVML's process (or device) peak per phase, and how it was sampled; nothing for CPU runs."""
    if not any(r.get("nvml", {}).get("samples") for r in records):
        return []
    rows = []
    for name in PHASES[kind]:
        cells = []
        for record in records:
            sampled = (phase(record, name) or {}).get("nvml", {})
            figures = [f"{key} {mib(sampled[key]['bytes'])}"
                       for key in ("process_peak", "device_peak") if key in sampled]
            cells.append(", ".join(figures) or sampled.get("note", "-"))
        rows.append(f"| {name}: NVML | " + " | ".join(cells) + " |")
    rows.append("| NVML sampling | " + " | ".join(
        f"{r['nvml'].get('view', '-')}, {r['nvml'].get('rate_hz')} Hz, {r['nvml'].get('read_cost_ms')} ms a read"
        + (f"; {len(r['nvml']['warnings'])} warning(s)" if r["nvml"].get("warnings") else "")
        for r in records) + " |")
    return rows


def render(path: Path) -> list[Path]:
    run = runfile.load(path)
    run["records"] = accounting.reaccount(run)
    run["fits"] = [fit.reread(result) for result in run.get("fits", [])]
    report = path.with_suffix(".md")
    text = markdown(run)
    atomic_write(report, lambda handle: handle.write(text.encode()))
    drawn = plots.save(plots.figures(run, path.with_suffix(".png")))
    return [drawn[0], report, *drawn[1:]]
