"""Two run files side by side: per scenario (matched by identity) and phase, how each peak moved, and whether any
grew past a threshold: the gate a pull request's footprint goes through, ending in a one-line verdict.

The gated figures are the ones that repeat run to run: on a GPU what the model needs (the allocator's peak) and
what the process holds (NVML); on the CPU what the model needs and the process's anonymous resident memory
(sampled). The CPU's exact peak (VmHWM) is shown but not gated: its file-backed pages (shared libraries, the
page cache) differ from run to run by more than a model change worth catching.

How far a view moves between two runs of the same code differs by framework (JAX's heap on the CPU moves by
about 10 %, torch's by 0.3 %), so a run file may carry its measured spread as the optional top-level field
`repeat_spread`: {"against": the other run's file, relative to this one's folder, "by": {framework: {view:
the largest move of that view over every scenario and phase both runs have, as a fraction of the smaller
figure}}}, written by `compare RUN REPEAT --store-spread` (schema version 1 still: older readers ignore it).
`--repeat` measures the same spread on the fly. With a spread, a view that repeats only beyond the threshold is
not gated for that framework, and a gated figure fails only past the threshold plus its view's spread: one
comparison of two runs carries the same noise that the spread's pair of runs showed.

A gate that gates nothing cannot fail, so it fails: where no figure is gated, because the runs share no scenario
(a fit run against a default run, two runs of different models), because none they share is `ok` in both with a
figure both measured, or because every view they both have is out of the gate (an older run without the sampled
anonymous memory, a view whose spread exceeds the threshold), the verdict is FAIL and says which.

The output is read by a person before a CI log: it lists only what the verdict rests on (the gated figures that
grew, else one line of counts) unless `--all`, names each scenario in a few words, keeps every line within
WIDTH characters and ends with the verdict.
"""

from __future__ import annotations

import json
import math
import os
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

from models import backends
from models.record import atomic_write_json, phase
from models.scenario import Scenario
from models.spec import SpecError
from suites.analysis.figures import MIB, driver_peak, mib, need
from suites.run.runfile import identity

SPREAD_FIELD = "repeat_spread"
PACKAGES_NAMED = 6  # the packages a "not like for like" line names on each side, then a count of the rest
WIDTH = 200  # the longest line compare prints (a table row aside): the verdict names failing figures up to it
Spread = dict[str, dict[str, float]]  # framework -> view -> largest relative move between two runs of one code


def _anonymous(record: dict, name: str) -> int | None:
    sampled = (phase(record, name) or {}).get("host", {}).get("sampled_peak_rss_anon")
    return sampled["bytes"] if sampled else None


def _holds(record: dict, name: str) -> int | None:
    measured = phase(record, name)
    return driver_peak(measured, record["scenario"]["device"])[0] if measured else None


# name -> (reading, gated on the CPU, gated on a GPU)
FIGURES = {"holds": (_holds, False, True), "needs": (lambda r, n: need(r, n)[0], True, True),
           "anonymous": (_anonymous, True, False)}
# why a view is never gated on a device, for the verdict
UNGATED = {(True, "holds"): "the CPU's VmHWM: its file-backed pages move between runs",
           (False, "anonymous"): "host memory beside the GPU's figures"}


@dataclass(frozen=True)
class Change:
    scenario: str  # in a few words (`name`), so a table row or the verdict says which scenario moved
    phase: str
    figure: str
    base: int
    new: int
    gated: bool  # by the device's rule (FIGURES); a measured spread may still take it out of the gate
    framework: str = ""
    spread: float | None = None  # how far this view moves for this framework between two runs of the same code

    @property
    def relative(self) -> float:
        return (self.new - self.base) / self.base if self.base else 0.0

    def counts(self, threshold: float) -> bool:
        """Gated: a view the device's rule gates, unless its measured spread says it repeats only beyond the
        threshold (it would fail runs of the same code)."""
        return self.gated and (self.spread is None or self.spread <= threshold)

    def beyond(self, threshold: float) -> bool:
        """Past the threshold on top of the view's run-to-run spread, where one was measured."""
        return abs(self.relative) > threshold + (self.spread or 0.0)


def spread(run: dict, repeat: dict) -> Spread:
    """Per framework and view, the largest move between two runs of the same code over every scenario and phase
    both have, relative to the smaller figure so that it bounds the change read either way round (rounded up)."""
    by: Spread = {}
    for c in changes(run, repeat)[0]:
        move = math.ceil(abs(c.new - c.base) / max(min(c.base, c.new), 1) * 10**4) / 10**4
        views = by.setdefault(c.framework, {})
        views[c.figure] = max(views.get(c.figure, 0.0), move)
    return {framework: dict(sorted(views.items())) for framework, views in sorted(by.items())}


def stored_spread(run: dict, path: str) -> tuple[Spread, str] | None:
    """The spread a run file carries (`compare --store-spread`), and where it comes from, for the verdict."""
    field = run.get(SPREAD_FIELD)
    if not field:
        return None
    try:
        by = {backends.current(framework): {view: float(moved) for view, moved in views.items()}
              for framework, views in field["by"].items()}
        return by, f"stored in {path}, measured against {field['against']}"
    except (AttributeError, KeyError, TypeError, ValueError) as error:  # one line, as any bad input
        raise SpecError(f"{path}: {SPREAD_FIELD} is not {{'against': ..., 'by': {{framework: {{view: fraction}}}}}} "
                        f"({type(error).__name__}: {error})") from None


def store_spread(path: Path, against: Path, by: Spread) -> None:
    """Adds the spread to the run file as it is on disk (nothing else in it changes), naming the other run."""
    data = json.loads(path.read_text())
    data[SPREAD_FIELD] = {"against": os.path.relpath(against.resolve(), path.resolve().parent), "by": by}
    atomic_write_json(path, data)


def with_spread(found: list[Change], by: Spread) -> list[Change]:
    """`found` with each change's view's spread for its framework (None where that pair was not measured)."""
    return [replace(c, spread=by.get(c.framework, {}).get(c.figure)) for c in found]


def name(scenario: Scenario) -> str:
    """A scenario in a few words a reader tells apart: framework, model, kind, batch and each setting not at its
    default (the full label repeats the defaults and runs past a line)."""
    framework, *extras = scenario.variant_parts
    batch = f"b{scenario.batch}"
    return " ".join([framework, scenario.model, scenario.kind, batch, *(extra for extra in extras if extra != batch)])


def changes(base: dict, new: dict) -> tuple[list[Change], list[str], list[str]]:
    """Every figure both runs have for a scenario they share, and the scenarios only one of them has."""
    earlier = {identity(record["scenario"]): record for record in base["records"] if record["status"] == "ok"}
    found, matched = [], set()
    for record in new["records"]:
        key = identity(record["scenario"])
        if record["status"] != "ok" or key not in earlier:
            continue
        matched.add(key)
        scenario, cpu = Scenario.from_dict(record["scenario"]), record["scenario"]["device"] != "cuda"
        for phase_name in scenario.phases:
            for figure, (reading, on_cpu, on_gpu) in FIGURES.items():
                before, after = reading(earlier[key], phase_name), reading(record, phase_name)
                if before is not None and after is not None:
                    found.append(Change(name(scenario), phase_name, figure, before, after, on_cpu if cpu else on_gpu,
                                        scenario.framework))
    only_base = [name(Scenario.from_dict(r["scenario"])) for k, r in earlier.items() if k not in matched]
    only_new = [name(Scenario.from_dict(r["scenario"])) for r in new["records"]
                if r["status"] == "ok" and identity(r["scenario"]) not in matched]
    return found, only_base, only_new


def differences(base: dict, new: dict) -> list[str]:
    """What makes the two runs not like for like: the device, a framework's version, TensorFlow's oneDNN, the packages
    a scenario's worker imported."""
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
    return found + onednn_differences(base, new) + imported_differences(base, new)


def onednn_differences(base: dict, new: dict) -> list[str]:
    """Per framework, oneDNN on in one run and off in the other (`framework.onednn`, where both recorded it): it changes
    TensorFlow's CPU kernels and its allocator's figures, and TensorFlow's default for it differs by CPU."""
    states: list[dict[str, set[str]]] = [{}, {}]
    for seen, run in zip(states, (base, new), strict=True):
        for record in run["records"]:
            onednn = record.get("framework", {}).get("onednn")
            if onednn:
                seen.setdefault(record["scenario"]["framework"], set()).add("on" if onednn["enabled"] else "off")
    return [f"{framework} oneDNN: {' or '.join(sorted(states[0][framework]))} vs "
            f"{' or '.join(sorted(states[1][framework]))}"
            for framework in sorted(states[0].keys() & states[1].keys())
            if states[0][framework] != states[1][framework]]


def imported_differences(base: dict, new: dict) -> list[str]:
    """Per framework, the packages that the same scenario's worker imported in one run only (`imported_packages`;
    a record without it, from older code, is not compared): Keras in one interpreter holding scikit-learn imports it,
    SciPy and matplotlib, 30-100 MiB of import a tox env does not hold. Each side names PACKAGES_NAMED at most."""
    earlier = {identity(r["scenario"]): set(r["framework"]["imported_packages"]) for r in base["records"]
               if "imported_packages" in r.get("framework", {})}
    only: dict[str, tuple[set[str], set[str], set[str]]] = {}  # framework -> (base only, new only, scenarios)
    for record in new["records"]:
        key, imported = identity(record["scenario"]), record.get("framework", {}).get("imported_packages")
        if imported is None or key not in earlier or earlier[key] == set(imported):
            continue
        base_only, new_only, scenarios = only.setdefault(record["scenario"]["framework"], (set(), set(), set()))
        base_only |= earlier[key] - set(imported)
        new_only |= set(imported) - earlier[key]
        scenarios.add(key)
    return [f"{framework} imported other packages in {len(scenarios)} scenarios both runs have: base only: "
            f"{_named(base_only)}; new only: {_named(new_only)}"
            for framework, (base_only, new_only, scenarios) in sorted(only.items())]


def _named(packages: set[str]) -> str:
    """Packages, sorted, the first PACKAGES_NAMED named and the rest counted."""
    named = sorted(packages, key=str.lower)[:PACKAGES_NAMED]
    rest = len(packages) - len(named)
    return (", ".join(named) or "none") + (f" and {rest} more" if rest else "")


def _table(rows: list[Change], threshold: float) -> list[str]:
    """Changes as a Markdown table, each row naming its scenario (figures in the gate marked *)."""
    return ["", "| scenario | phase | figure | base MiB | new MiB | change | spread |",
            "|---|---|---|---:|---:|---:|---:|",
            *(f"| {c.scenario} | {c.phase} | {c.figure}{'*' if c.counts(threshold) else ''} | {c.base / MIB:,.1f} | "
              f"{c.new / MIB:,.1f} | {c.relative:+.1%} | {'-' if c.spread is None else f'{c.spread:.1%}'} |"
              for c in rows), ""]


def render(found: list[Change], only_base: list[str], only_new: list[str], threshold: float,
           every: bool = False) -> str:
    """What the verdict rests on: a line of counts and the gated figures that grew past the threshold. With `every`,
    all of it: the largest move per phase and figure, every change and the scenarios only one run has."""
    if not every:
        failed, gated = grew(found, threshold), sum(c.counts(threshold) for c in found)
        shrank = sum(c.counts(threshold) and c.relative < 0 and c.beyond(threshold) for c in found)
        loose = sum(not c.counts(threshold) and c.beyond(threshold) for c in found)
        rest = ([f"{shrank} shrank"] if shrank else []) + ([f"{loose} changes in ungated views"] if loose else [])
        rest += [f"{len(only)} scenarios only in the {which} run" for only, which in ((only_base, "base"),
                                                                                     (only_new, "new")) if only]
        spread = " and beyond the run-to-run spread" if any(c.spread is not None for c in found) else ""
        summary = (f"Changes beyond {threshold:.1%}{spread}: {len(failed) or 'none'} of {gated} gated figures grew"
                   + (f"; {', '.join(rest)}: --all lists them" if rest else ""))
        return "\n".join([*_wrapped(summary), *(_table(failed, threshold) if failed else [])])
    largest = [max(moves, key=lambda c: abs(c.relative)) for at in dict.fromkeys(c.phase for c in found)
               for figure in FIGURES if (moves := [c for c in found if c.phase == at and c.figure == figure])]
    lines = [f"Largest change per phase and figure over {len({c.scenario for c in found})} scenarios both runs have "
             "(* gated):", *_table(largest, threshold), f"Every change: {len(found) or 'none'}"]
    lines += _table(sorted(found, key=lambda c: -abs(c.relative)), threshold) if found else []
    lines += [f"only in the base run: {label}" for label in only_base]
    lines += [f"only in the new run: {label}" for label in only_new]
    return "\n".join(lines).rstrip()


def grew(found: list[Change], threshold: float) -> list[Change]:
    """The gated figures that grew past the threshold (and their view's spread), the largest growth first."""
    return sorted((c for c in found if c.counts(threshold) and c.relative > 0 and c.beyond(threshold)),
                  key=lambda c: -c.relative)


def _wrapped(text: str) -> list[str]:
    """A line of prose within WIDTH characters, continued on indented lines (a path is never split)."""
    return textwrap.wrap(text, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False)


def _percent(fraction: float) -> str:
    return f"{fraction * 100:.1f} %"


def _held(run: dict, which: str) -> str:
    """How many scenarios a run has records of, and the fit answers it holds, which compare does not read."""
    fits = len(run.get("fits", []))
    return (f"{which} has {len(run['records'])} scenario records"
            + (f" (and {fits} fit answers, not read)" if fits else ""))


def nothing_gated(base: dict, new: dict) -> str:
    """Why two runs gave no gated figure: they share no scenario, or those they share gave none."""
    keys = [{identity(r["scenario"]): r["status"] for r in run["records"]} for run in (base, new)]
    shared = keys[0].keys() & keys[1].keys()
    if not shared:
        return f"the two runs share no scenario: {_held(base, 'the base run')}, {_held(new, 'the new run')}"
    ok = sum(keys[0][key] == keys[1][key] == "ok" for key in shared)
    return f"the {len(shared)} scenarios both runs have ({ok} ok in both) give no figure to gate"


def verdict(base: dict, new: dict, found: list[Change], threshold: float,
            spread_from: str | None) -> tuple[int, list[str]]:
    """The exit status and the lines compare ends with: which views are not gated and why, and where the spread
    comes from, then the verdict, the one line a CI log ends with, within WIDTH: pass, or FAIL naming the failing
    figures that fit (growth and bytes; the table above lists them all) then a count, with how many figures were
    gated; FAIL too where nothing was gated, saying why (a gate that cannot fail)."""
    failed, cpu = grew(found, threshold), base["device"] != "cuda"
    bar = f"{threshold * 100:g} %" + (" plus its view's run-to-run spread" if spread_from else "")
    ungated = [f"{figure} ({why})" for (on_cpu, figure), why in UNGATED.items()
               if on_cpu == cpu and any(c.figure == figure for c in found)]
    loose: dict[tuple[str, str], float] = {}
    for c in found:
        if c.gated and not c.counts(threshold) and c.spread is not None:
            loose[c.framework, c.figure] = c.spread
    ungated += [f"{framework} {figure} (repeats only within {_percent(moved)})"
                for (framework, figure), moved in sorted(loose.items())]
    gated = sum(c.counts(threshold) for c in found)
    notes = [f"not gated: {', '.join(ungated)}"] if ungated else []
    if spread_from and found:
        notes.append(f"spread {spread_from}")
    elif cpu and gated:
        notes.append("no run-to-run spread (neither run stores one, no --repeat; `compare RUN REPEAT "
                     "--store-spread` stores one): every framework's anonymous and allocator figures gated")
    lines = _wrapped("; ".join(notes))
    if not gated:
        return 1, [*lines, f"verdict: FAIL (exit 1): nothing gated, a gate that cannot fail: "
                           f"{nothing_gated(base, new)}"]
    if not failed:
        return 0, [*lines, f"verdict: pass: no gated figure grew beyond {bar} ({gated} figures gated)"]
    head = f"verdict: FAIL (exit 1): {len(failed)} gated figure{'s' * (len(failed) != 1)} grew beyond {bar}: "
    tail, named = f" ({gated} figures gated)", []
    for c in failed:  # the first always; each further one while the line, with its count of the rest, fits
        more = len(failed) - len(named) - 1
        figure = f"{c.scenario} {c.phase} {c.figure} {c.relative * 100:+.1f} % ({mib(c.base)} -> {mib(c.new)} MiB)"
        if named and len(head + ", ".join([*named, figure]) + (f" and {more} more" if more else "") + tail) > WIDTH:
            break
        named.append(figure)
    more = f" and {len(failed) - len(named)} more" if len(failed) > len(named) else ""
    return 1, [*lines, f"{head}{', '.join(named)}{more}{tail}"]
