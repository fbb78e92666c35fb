"""Plots from run files only (never live objects), one function per kind of plot."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from models.scenario import PHASES, Scenario  # noqa: E402
from suites import analysis, errors  # noqa: E402
from suites.figures import allocator_peak, driver_peak, headline  # noqa: E402

MIB = 2**20


def variant(record: dict) -> str:
    return Scenario.from_dict(record["scenario"]).variant


def panels(records: list[dict]) -> dict[tuple[str, str], list[dict]]:
    """Records grouped by (model, kind), in run order."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for record in records:
        grouped.setdefault((record["scenario"]["model"], record["scenario"]["kind"]), []).append(record)
    return grouped


def _grid(rows: int, columns: int) -> tuple[plt.Figure, list]:
    figure, axes = plt.subplots(rows, columns, figsize=(7 * columns, 3.6 * rows), squeeze=False)
    return figure, axes


def _finish(figure: plt.Figure, run: dict, what: str, names: list[str], path: Path) -> Path:
    figure.suptitle(f"footprint, suite {run['suite']}: {what}\n{run['device_description']}", fontsize=11)
    handles = [plt.Rectangle((0, 0), 1, 1, color=f"C{index}") for index in range(len(names))]
    figure.legend(handles, names, loc="upper right", ncol=min(len(names), 6), fontsize=8)
    figure.tight_layout(rect=(0, 0, 1, 0.93))
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def _bars(axis: plt.Axes, phases: tuple[str, ...], series: list[dict[str, float]], width_share: float = 0.8,
          **style: object) -> None:
    """One bar per series at each phase, series side by side; series[i] maps phase -> MiB."""
    width = width_share / max(len(series), 1)
    for index, values in enumerate(series):
        offset = (index - (len(series) - 1) / 2) * width
        axis.bar([i + offset for i in range(len(phases))], [values.get(name, 0) for name in phases], width,
                 color=f"C{index}", **style)
    axis.set_xticks(range(len(phases)), phases, rotation=30, ha="right", fontsize=8)
    axis.set_ylabel("peak in phase (MiB)")
    axis.grid(axis="y", alpha=0.3)


def _failures(records: list[dict]) -> str:
    failed = [f"{variant(r)}: {r['status']} in {r['failure']['phase']}" for r in records if r["status"] != "ok"]
    return f" ({'; '.join(failed)})" if failed else ""


def phase_peaks(run: dict, path: Path) -> Path:
    """Each model and kind: the headline peak per phase, one bar per framework (or variant)."""
    grouped = panels(run["records"])
    names = list(dict.fromkeys(variant(r) for r in run["records"]))
    models = list(dict.fromkeys(model for model, _ in grouped))
    kinds = [kind for kind in PHASES if any(k == kind for _, k in grouped)]
    figure, axes = _grid(len(models), len(kinds))
    for row, model in enumerate(models):
        for column, kind in enumerate(kinds):
            records = {variant(r): r for r in grouped.get((model, kind), [])}
            series = [{p["name"]: headline(p, run["device"])[0] / MIB for p in records[name]["phases"]}
                      if name in records else {} for name in names]
            _bars(axes[row][column], PHASES[kind], series)
            axes[row][column].set_title(f"{model}, {kind}{_failures(list(records.values()))}", fontsize=10)
    what = "host peak RSS per phase" if run["device"] == "cpu" else "peak per phase (NVML process, else allocator)"
    return _finish(figure, run, what, names, path)


def allocator_modes(run: dict, path: Path) -> Path:
    """Per model and framework, each mode's driver peak (wide, pale) with its allocator peak (narrow, solid)."""
    train = [r for r in run["records"] if r["scenario"]["kind"] == "train"]
    models = list(dict.fromkeys(r["scenario"]["model"] for r in train))
    frameworks = list(dict.fromkeys(r["scenario"]["framework"] for r in run["records"]))
    context = [r for r in run["records"] if r["scenario"]["kind"] == "infer"]
    figure, axes = _grid(len(models) + 1, len(frameworks))
    driver = "host RSS" if run["device"] == "cpu" else "NVML"
    for row, model in enumerate(models):
        for column, framework in enumerate(frameworks):
            records = [r for r in train if r["scenario"]["model"] == model and r["scenario"]["framework"] == framework]
            axis = axes[row][column]
            by_phase = [{p["name"]: (driver_peak(p, run["device"])[0] or 0) / MIB for p in r["phases"]}
                        for r in records]
            _bars(axis, PHASES["train"], by_phase, alpha=0.35)
            held = [{p["name"]: (allocator_peak(p)[0] or 0) / MIB for p in r["phases"]} for r in records]
            _bars(axis, PHASES["train"], held, width_share=0.4)
            modes = ", ".join(f"C{i}={r['scenario']['allocator']}" for i, r in enumerate(records))
            axis.set_title(f"{model}, {framework}: {modes}{_failures(records)}", fontsize=8)
    for column, framework in enumerate(frameworks):
        axis = axes[-1][column]
        records = [r for r in context if r["scenario"]["framework"] == framework]
        labels = [r["scenario"]["cuda_module_loading"] for r in records]
        values = [(driver_peak(r["phases"][1], run["device"])[0] or 0) / MIB if len(r["phases"]) > 1 else 0
                  for r in records]
        axis.bar(labels, values, color="C7")
        axis.set_title(f"{framework}: context phase alone ({driver} peak)", fontsize=9)
        axis.set_ylabel("MiB")
    what = f"{driver} peak (pale) vs allocator peak (solid) per phase and mode"
    names = [f"C{i}: mode {i + 1} of the panel" for i in range(max(len(frameworks), 1))]
    return _finish(figure, run, what, names, path)


def estimate_vs_measured(run: dict, path: Path) -> Path:
    """One panel per view: each phase's estimate against its measurement, log-log, with y = x and +-25 %."""
    found = [row for row in errors.rows(run) if row.source == "footprint" and row.measured > 0]
    views = [view for view in errors.VIEW_NAMES if any(row.view == view for row in found)]
    frameworks = list(dict.fromkeys(row.framework for row in found))
    models = list(dict.fromkeys(row.model for row in found))
    figure, axes = _grid(1, len(views))
    for axis, view in zip(axes[0], views, strict=True):
        chosen = [row for row in found if row.view == view]
        for row in chosen:
            axis.scatter(row.measured / MIB, max(row.estimate, 1) / MIB, color=f"C{frameworks.index(row.framework)}",
                         marker="os^vDP"[models.index(row.model) % 6], s=28, alpha=0.8)
        low = min(min(r.measured, max(r.estimate, 1)) for r in chosen) / MIB / 1.5
        high = max(max(r.measured, r.estimate) for r in chosen) / MIB * 1.5
        for factor, style in ((1.0, "-"), (1.25, ":"), (0.75, ":")):
            axis.plot([low, high], [low * factor, high * factor], style, color="grey", linewidth=0.8)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel(f"measured: {errors.VIEW_NAMES[view]} (MiB)")
        axis.set_ylabel("estimate (MiB)")
        axis.set_title(f"{view}: markers " + ", ".join(f"{'os^vDP'[i % 6]} {m}" for i, m in enumerate(models)),
                       fontsize=9)
        axis.grid(alpha=0.3)
    return _finish(figure, run, "estimate vs measurement per phase (lines: equal, +-25 %)", frameworks, path)


def technique_savings(run: dict, path: Path) -> Path:
    """Per technique, each framework's measured saving at the training peak (bars) and the predicted (marks)."""
    found = [s for s in analysis.savings(run) if s.unavailable is None]
    frameworks = list(dict.fromkeys(s.framework for s in analysis.savings(run)))
    labels = list(dict.fromkeys(s.technique for s in analysis.savings(run)))
    figure, axes = _grid(1, 2)
    width = 0.8 / max(len(frameworks), 1)
    for index, framework in enumerate(frameworks):
        mine = {s.technique: s for s in found if s.framework == framework}
        xs = [i + (index - (len(frameworks) - 1) / 2) * width for i in range(len(labels))]
        axes[0][0].bar(xs, [mine[t].measured / MIB if t in mine else 0 for t in labels], width, color=f"C{index}")
        axes[0][0].scatter([x for x, t in zip(xs, labels, strict=True) if t in mine],
                           [mine[t].predicted / MIB for t in labels if t in mine], color="black", marker="_", s=90)
        axes[0][1].bar(xs, [mine[t].time_ratio or 0 if t in mine else 0 for t in labels], width, color=f"C{index}")
    for axis, label in zip(axes[0], ("memory saved at the peak (MiB); black: predicted", "step time / baseline"),
                           strict=True):
        axis.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        axis.set_ylabel(label)
        axis.axhline(0 if "memory" in label else 1, color="grey", linewidth=0.8)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_title("missing bar: not available in that framework (see the report)", fontsize=8)
    return _finish(figure, run, "what each technique saves against Adam with no technique", frameworks, path)


def sweeps(run: dict, path: Path) -> Path:
    """Memory against batch (keras-small) and depth (plain-N, with and without checkpointing), with fitted slopes."""
    frameworks = list(dict.fromkeys(r["scenario"]["framework"] for r in run["records"]))
    figure, axes = _grid(1, 2)
    for axis, axis_name in zip(axes[0], ("batch", "depth"), strict=True):
        for fit in analysis.sweep_fits(run, axis_name):
            xs, ys = zip(*fit.points, strict=True)
            style = "--" if fit.technique == "checkpoint" else "-"
            axis.plot(xs, [max(y, 1) / MIB for y in ys], style, marker="o", color=f"C{frameworks.index(fit.framework)}",
                      label=f"{fit.framework} {fit.technique} ({fit.view}): exponent {fit.exponent:.2f}, "
                            f"{fit.slope / MIB:.2f} MiB per {'example' if axis_name == 'batch' else 'layer'}")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("batch (keras-small)" if axis_name == "batch" else "depth N (plain-N, batch 8)")
        axis.set_ylabel("training peak (MiB)" if axis_name == "batch" else "activation memory at the peak (MiB)")
        axis.legend(fontsize=7)
        axis.grid(alpha=0.3)
    return _finish(figure, run, "growth with batch and depth; dashed: checkpointing every sqrt(N) layers",
                   frameworks, path)


def fit_answers(run: dict, path: Path) -> Path:
    """Per question and framework, the largest batch within the budget (none: not even batch 1)."""
    fits = run.get("fits", [])
    frameworks = list(dict.fromkeys(f["scenario"]["framework"] for f in fits))
    figure, axes = _grid(1, 1)
    labels = [f"{f['scenario']['framework']}: {f['scenario']['model']} {f['scenario']['kind']} "
              f"{f['scenario']['optimizer']} {f['scenario']['technique']} ({f['budget_bytes'] / 2**20:,.0f} MiB)"
              for f in fits]
    values = [f["largest_batch"] or 0 for f in fits]
    axes[0][0].barh(range(len(fits)), values, color=[f"C{frameworks.index(f['scenario']['framework'])}" for f in fits])
    axes[0][0].set_yticks(range(len(fits)), labels, fontsize=7)
    for index, value in enumerate(values):
        axes[0][0].text(value, index, f" {value or 'does not fit'}", va="center", fontsize=7)
    axes[0][0].set_xlabel("largest batch within the budget")
    axes[0][0].invert_yaxis()
    return _finish(figure, run, "does it fit? largest batch per framework", frameworks, path)


PLOTS = {"default": phase_peaks, "allocators": allocator_modes, "techniques": technique_savings, "sweeps": sweeps,
         "fit": fit_answers}
