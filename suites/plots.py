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
    figure, axes = plt.subplots(len(models), len(kinds), figsize=(7 * len(kinds), 3.6 * len(models)), squeeze=False)
    for row, model in enumerate(models):
        for column, kind in enumerate(kinds):
            axis, records = axes[row][column], panels.get((model, kind), [])
            phases = PHASES[kind]
            width = 0.8 / max(len(records), 1)
            for index, record in enumerate(sorted(records, key=lambda r: r["scenario"]["framework"])):
                measured = {p["name"]: headline(p, run["device"])[0] / 2**20 for p in record["phases"]}
                label = record["scenario"]["framework"]
                if record["status"] != "ok":
                    label += f" ({record['status']} in {record['failure']['phase']})"
                positions = [i + (index - (len(records) - 1) / 2) * width for i in range(len(phases))]
                axis.bar(positions, [measured.get(name, 0) for name in phases], width, label=label)
            axis.set_xticks(range(len(phases)), phases, rotation=30, ha="right", fontsize=8)
            axis.set_title(f"{model}, {kind}", fontsize=10)
            axis.set_ylabel("peak in phase (MiB)")
            axis.legend(fontsize=8)
            axis.grid(axis="y", alpha=0.3)
    what = "host peak RSS per phase" if run["device"] == "cpu" else "allocator peak per phase"
    figure.suptitle(f"footprint, suite {run['suite']}: {what}\n{run['device_description']}", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
