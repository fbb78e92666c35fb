"""Two run files side by side: per scenario (matched by identity) and phase, how each peak moved, and whether any
grew past a threshold: the gate a pull request's footprint goes through.

The gated figures are the ones that repeat run to run: what the model needs (the allocator's peak) everywhere,
and what the process holds on a GPU (NVML) or, on the CPU, its anonymous resident memory (sampled). The CPU's
exact peak (VmHWM) is shown but not gated: its file-backed pages (shared libraries, the page cache) differ
from run to run by more than a model change worth catching.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from models.record import phase
from models.scenario import Scenario
from suites.analysis.figures import driver_peak, need
from suites.run.runfile import identity

MIB = 2**20


def _anonymous(record: dict, name: str) -> int | None:
    sampled = (phase(record, name) or {}).get("host", {}).get("sampled_peak_rss_anon")
    return sampled["bytes"] if sampled else None


def _holds(record: dict, name: str) -> int | None:
    measured = phase(record, name)
    return driver_peak(measured, record["scenario"]["device"])[0] if measured else None


# name -> (reading, gated on the CPU, gated on a GPU)
FIGURES = {"holds": (_holds, False, True), "needs": (lambda r, n: need(r, n)[0], True, True),
           "anonymous": (_anonymous, True, False)}


@dataclass(frozen=True)
class Change:
    scenario: str
    phase: str
    figure: str
    base: int
    new: int
    gated: bool
    spread: float | None = None  # how far the base moved between two runs of the same code, where measured

    @property
    def relative(self) -> float:
        return (self.new - self.base) / self.base if self.base else 0.0

    def beyond(self, threshold: float) -> bool:
        """Past the threshold, and past the run-to-run spread where a repeat of the base measured it."""
        return abs(self.relative) > max(threshold, self.spread or 0.0)


def with_spread(found: list[Change], repeat: list[Change]) -> list[Change]:
    """`found` with each figure's run-to-run spread: how far a repeat of the base run moved from it."""
    spread = {(c.scenario, c.phase, c.figure): abs(c.relative) for c in repeat}
    return [replace(c, spread=spread.get((c.scenario, c.phase, c.figure))) for c in found]


def changes(base: dict, new: dict) -> tuple[list[Change], list[str], list[str]]:
    """Every figure both runs have for a scenario they share, and the scenarios only one of them has."""
    earlier = {identity(record["scenario"]): record for record in base["records"] if record["status"] == "ok"}
    found, matched = [], set()
    for record in new["records"]:
        key = identity(record["scenario"])
        if record["status"] != "ok" or key not in earlier:
            continue
        matched.add(key)
        label, cpu = Scenario.from_dict(record["scenario"]).label, record["scenario"]["device"] != "cuda"
        for name in Scenario.from_dict(record["scenario"]).phases:
            for figure, (reading, on_cpu, on_gpu) in FIGURES.items():
                before, after = reading(earlier[key], name), reading(record, name)
                if before is not None and after is not None:
                    found.append(Change(label, name, figure, before, after, on_cpu if cpu else on_gpu))
    only_base = [Scenario.from_dict(r["scenario"]).label for k, r in earlier.items() if k not in matched]
    only_new = [Scenario.from_dict(r["scenario"]).label for r in new["records"]
                if r["status"] == "ok" and identity(r["scenario"]) not in matched]
    return found, only_base, only_new


def differences(base: dict, new: dict) -> list[str]:
    """What makes the two runs not like for like: the device, the machine's memory, a framework's version."""
    found = []
    if base["device"] != new["device"]:
        found.append(f"device: {base['device']} vs {new['device']}")
    versions: list[dict[str, set[str]]] = [{}, {}]
    for seen, run in zip(versions, (base, new), strict=True):
        for record in run["records"]:
            if record.get("framework", {}).get("versions"):
                seen.setdefault(record["scenario"]["framework"], set()).add(
                    json.dumps(record["framework"]["versions"], sort_keys=True))
    for framework in sorted(versions[0].keys() & versions[1].keys()):
        if versions[0][framework] != versions[1][framework]:
            found.append(f"{framework} versions: {' or '.join(sorted(versions[0][framework]))} vs "
                         f"{' or '.join(sorted(versions[1][framework]))}")
    return found


def render(found: list[Change], only_base: list[str], only_new: list[str], threshold: float,
           every: bool = False) -> str:
    """The largest move per phase and figure (gated figures marked *), then each change past the threshold (every
    change with `every`)."""
    figures = list(FIGURES)
    phases = list(dict.fromkeys(change.phase for change in found))
    gated = {c.figure for c in found if c.gated}
    lines = [f"Largest change per phase over {len({c.scenario for c in found})} scenarios both runs have "
             "(* gated):", "", "| phase | " + " | ".join(f + ("*" if f in gated else "") for f in figures) + " |",
             "|---" + "|---:" * len(figures) + "|"]
    for name in phases:
        cells = []
        for figure in figures:
            moves = [c.relative for c in found if c.phase == name and c.figure == figure]
            cells.append(f"{max(moves, key=abs):+.1%}" if moves else "-")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    shown = [c for c in found if every or c.beyond(threshold)]
    spread = any(c.spread is not None for c in found)
    lines += ["", f"{'Every change' if every else f'Changes beyond {threshold:.1%}'}"
              + (" and beyond the run-to-run spread" if spread and not every else "") + f": {len(shown) or 'none'}"]
    if shown:
        lines += ["", "| scenario | phase | figure | base MiB | new MiB | change | spread |",
                  "|---|---|---|---:|---:|---:|---:|"]
        lines += [f"| {c.scenario} | {c.phase} | {c.figure}{'*' if c.gated else ''} | {c.base / MIB:,.1f} | "
                  f"{c.new / MIB:,.1f} | {c.relative:+.1%} | {'-' if c.spread is None else f'{c.spread:.1%}'} |"
                  for c in sorted(shown, key=lambda c: -abs(c.relative))]
    lines += [f"only in the base run: {label}" for label in only_base]
    lines += [f"only in the new run: {label}" for label in only_new]
    return "\n".join(lines)


def grew(found: list[Change], threshold: float) -> bool:
    return any(change.gated and change.relative > 0 and change.beyond(threshold) for change in found)
