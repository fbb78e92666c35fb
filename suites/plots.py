"""Plots from run files only: peak memory per phase, one bar per framework, a panel per model and kind."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from models.scenario import PHASES  # noqa: E402
from suites.figures import headline  # noqa: E402


def _panels(run: dict) -> dict[tuple[str, str], list[dict]]:
    panels: dict[tuple[str, str], list[dict]] = {}
    for record in run["records"]:
        panels.setdefault((record["scenario"]["model"], record["scenario"]["kind"]), []).append(record)
    return panels


def phase_peaks(run: dict, path: Path) -> Path:
    panels = _panels(run)
    models = sorted({model for model, _ in panels})
    kinds = [kind for kind in PHASES if any(k == kind for _, k in panels)]
    names = sorted({record["scenario"]["framework"] for record in run["records"]})
    colours = {name: f"C{index}" for index, name in enumerate(names)}
    width = 0.8 / max(len(names), 1)
    figure, axes = plt.subplots(len(models), len(kinds), figsize=(7 * len(kinds), 3.6 * len(models)), squeeze=False)
    for row, model in enumerate(models):
        for column, kind in enumerate(kinds):
            axis, phases, failures = axes[row][column], PHASES[kind], []
            for record in panels.get((model, kind), []):
                framework = record["scenario"]["framework"]
                offset = (names.index(framework) - (len(names) - 1) / 2) * width
                measured = {p["name"]: headline(p, run["device"])[0] / 2**20 for p in record["phases"]}
                axis.bar([i + offset for i in range(len(phases))], [measured.get(name, 0) for name in phases],
                         width, color=colours[framework])
                if record["status"] != "ok":
                    failures.append(f"{framework}: {record['status']} in {record['failure']['phase']}")
            axis.set_xticks(range(len(phases)), phases, rotation=30, ha="right", fontsize=8)
            axis.set_title(f"{model}, {kind}" + (f" ({'; '.join(failures)})" if failures else ""), fontsize=10)
            axis.set_ylabel("peak in phase (MiB)")
            axis.grid(axis="y", alpha=0.3)
    what = "host peak RSS per phase" if run["device"] == "cpu" else "allocator peak per phase"
    figure.suptitle(f"footprint, suite {run['suite']}: {what}\n{run['device_description']}", fontsize=11)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in names]
    figure.legend(handles, names, loc="upper right", ncol=len(names), fontsize=9)
    figure.tight_layout(rect=(0, 0, 1, 0.95))
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
