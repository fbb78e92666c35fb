"""The estimate's measured constants: what each framework holds beyond the model's own tensors.

A spec cannot say how much the interpreter, the framework's runtime, its compiled code or a GPU
library's workspace take. The probe model (one small layer of each kind) runs first in every suite;
per framework, scenario kind and phase, its measured figure minus its few analytic tensor bytes is
that framework's fixed cost on this device. The depth probe follows it: the same tiny tensors through
about a hundred layers; what it holds beyond the probe, divided by the layers it has more, is the
runtime each further layer costs (XLA's compiled code, TensorFlow's traced graph), which the estimate
adds per layer of a net. A run's constants are computed where the run is read (`of_run`); those of the
published run per device (`PUBLISHED`) are kept in its folder as constants-<device>.json, with where, when and
with which versions they were measured, and always labelled as measured.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

from models import allocator_modes
from models.catalogue import KIND_COST_PROBES
from models.estimate import HOST_ONLY, Estimate, estimate
from models.record import SCHEMA_VERSION, STATIC_PLAN, atomic_write_json, load_json
from models.scenario import Scenario
from suites.analysis import depth, figures, kind_costs, margins
from suites.run import runfile
from suites.run.registry import ROOT

PROBE, DEEP_PROBE = "probe", "probe-deep"
FIRST_PROBES = (PROBE, DEEP_PROBE)  # every suite runs them first: their constants feed the estimates of the rest
PROBES = (*FIRST_PROBES, *KIND_COST_PROBES)  # every model whose records give constants, never a net's figures
KIND = "footprint.constants"
TRAILS = ("cuda",)  # the devices whose driver reading of a new context can trail it (NVML; host RSS does not)


# The published run whose probes give each device's constants: `estimate` reads these unless told otherwise, so a
# local `make bench` never changes what it says.
PUBLISHED = {"cpu": ROOT / "results" / "cpu-a4d9e61", "cuda": ROOT / "results" / "h100-ec3adfa"}


# Each device's published kinds run (the kinds suite: suites.analysis.kind_costs), whose constants file gives the
# kind costs `load` adds beside the published probes' constants.
KIND_COSTS = {"cpu": ROOT / "results" / "cpu-88d5f5d-kinds"}


def path(resolved_device: str) -> Path:
    return PUBLISHED[resolved_device] / f"constants-{resolved_device}.json"


def analytic_estimate(scenario: Scenario, known: dict | None = None) -> Estimate:
    """The scenario's estimate with the BLAS workspace its framework's constants measured on the device, and its
    pool grown as needed where its mode turns the default pool off (JAX's noprealloc, TensorFlow's growth)."""
    return estimate(scenario.spec, scenario.kind, scenario.batch, scenario.optimizer, scenario.dtype,
                    scenario.framework, scenario.device, scenario.technique, (known or {}).get("blas_workspace", 0),
                    pool_grows=allocator_modes.is_without_pool(scenario.framework, scenario.allocator))


def blas_workspace(record: dict) -> int | None:
    """One BLAS workspace's bytes, from a probe: its allocator figure at inference beyond its tensors, divided by the
    workspaces the rules place there (one per thread that multiplied in its dense layer). The probe's tensors are a
    few hundred bytes, and nothing else its allocator counts stays: torch's rounding of them is the few KiB this
    keeps. None where the rules place none on the device."""
    scenario = Scenario.from_dict(record["scenario"])
    found = measured_views(record, analytic_estimate(scenario)).get("inference", {}).get("allocator")
    if found is None or found[0] <= found[1]:
        return None
    beyond = found[0] - found[1]
    # with workspaces of that size the probe's peak is where the most of them are held: count them there
    count = analytic_estimate(scenario, {"blas_workspace": beyond}).phase("inference").items.get(
        "library_workspace", 0) // beyond
    return beyond // count if count else None


def measured_views(record: dict, analytic: Estimate) -> dict[str, dict[str, tuple[int, int]]]:
    """Per phase after the context and per view, (measured bytes, the analytic bytes it is compared with).

    driver: the phase's peak above the context phase (host RSS on the CPU, NVML on a GPU); left out where a
    preallocated pool fills the driver's figure, which then says nothing about the model.
    allocator: the allocator's peak inside the phase, where the framework has one that says so.
    """
    resolved = record["scenario"]["device"]
    base = None if figures.preallocated(record) else figures.baseline(record, resolved)
    views: dict[str, dict[str, tuple[int, int]]] = {}
    for measured in record.get("phases", []):
        predicted = analytic.phase(measured["name"])
        if predicted is None or measured["name"] in ("import", "context"):
            continue
        found: dict[str, tuple[int, int]] = {}
        driver, _ = figures.driver_peak(measured, resolved)
        if driver is not None and base is not None:
            found["driver"] = (driver - base, predicted.total)
        need, label = figures.need(record, measured["name"])
        if need is not None and label != STATIC_PLAN:  # a plan is no measurement to test an estimate against
            found["allocator"] = (need, predicted.total - sum(predicted.items.get(c, 0) for c in HOST_ONLY))
        views[measured["name"]] = found
    return views


def from_probe(record: dict, measured_at: str | None = None, workspace: int | None = None) -> dict:
    """One probe record's constants: the context, the BLAS workspace (`workspace`, else the probe's own), and per
    phase and view the bytes beyond the tensors, the workspaces among them.

    A framework that maps a pool when the device starts (JAX's default) has it in the context phase's driver figure:
    the context is taken without it, and the pool kept apart (`pool`, None where the framework does not say its
    size) with the memory of the card it was mapped on (`card_bytes`, NVML's total), since its size follows the card
    and the setting, not the model: the estimate sizes it for the card asked about (`pool_on`)."""
    scenario = Scenario.from_dict(record["scenario"])
    workspace = blas_workspace(record) if workspace is None else workspace
    known = {"blas_workspace": workspace} if workspace else {}
    views = measured_views(record, analytic_estimate(scenario, known))
    context = figures.context_alone(record, scenario.device)
    if figures.preallocated(record):
        known |= {"pool": figures.pool_size(record),
                  "card_bytes": (record.get("nvml", {}).get("gpu") or {}).get("total_bytes")}
    return known | {
        "layers": len(scenario.spec.layers),
        "context": context,
        "context_read": context,  # the probe's own reading: `context` is the one `_rebase` measures above
        "phases": {name: {view: measured - tensors for view, (measured, tensors) in found.items()}
                   for name, found in views.items()},
        "versions": record["framework"].get("versions", {}),
        "measured_on": _measured_on(record),
        "git_commit": record.get("run", {}).get("git_commit"),
        "measured_at": measured_at or time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def _measured_on(record: dict) -> str:
    """The machine a probe ran on, in words: the GPU with its driver, or the CPU machine."""
    gpu = record.get("nvml", {}).get("gpu")
    if gpu:
        return f"{gpu['name']}, driver {gpu['driver']}, {int(gpu['total_bytes']) / 2**30:,.0f} GiB"
    machine = record.get("run", {}).get("machine", {})
    return f"CPU, {machine.get('cpus', '?')} cores, {machine.get('memory_bytes', 0) / 2**30:,.0f} GiB"


def per_layer(probe: dict, deep_record: dict, measured_at: str | None = None) -> dict:
    """What each layer beyond the probe's adds, per phase and view: the depth probe's bytes beyond its tensors,
    less the probe's, divided by the layers it has more. Where the driver's context reading trails (`TRAILS`), the
    depth probe's driver figures are first measured above the probe's context, so a reading that trailed in either
    does not tilt the slope."""
    scenario = Scenario.from_dict(deep_record["scenario"])
    deep = from_probe(deep_record, measured_at, probe.get("blas_workspace", 0))
    extra_layers = len(scenario.spec.layers) - probe["layers"]
    shift = {"driver": (deep["context"] or 0) - (probe["context"] or 0) if scenario.device in TRAILS else 0}
    return {"model": DEEP_PROBE, "probe_layers": probe["layers"], "extra_layers": extra_layers,
            "context_read": deep["context"],
            "phases": {name: {view: round((found + shift.get(view, 0) - probe["phases"][name][view]) / extra_layers)
                              for view, found in views.items() if view in probe["phases"].get(name, {})}
                       for name, views in deep["phases"].items()},
            "git_commit": deep["git_commit"], "measured_at": deep["measured_at"]}


def _rebase(kinds: dict, device: str) -> None:
    """Where the driver's reading trails (`TRAILS`), measures every kind's driver figures above one context: the
    highest any of the framework's probes read (host RSS does not trail; its context differs by kind with the pages
    each maps).

    NVML's reading of a new CUDA context can trail it by a few hundred milliseconds: in the H100 run at
    ec3adfa, 3 of 16 probes ended their context phase at 32-104 MiB where the others read 518-520 MiB, and their
    build phase then counted the rest of the context as the model's. A trailing reading is only ever low, so the
    highest is the context; the figures above it keep their whole (context plus rise) unchanged. A preallocating
    framework's readings are taken without its pool (`from_probe`), so the highest is its context, never a pool.
    """
    if device not in TRAILS:
        return
    readings = [known["context_read"] for known in kinds.values()] + [
        known["per_layer"]["context_read"] for known in kinds.values() if "per_layer" in known]
    readings = [reading for reading in readings if reading is not None]
    if not readings:
        return
    context = max(readings)
    for known in kinds.values():
        shift = (known["context"] or 0) - context
        for views in known["phases"].values():
            if "driver" in views:
                views["driver"] += shift
        known["context"] = context


def overhead(known: dict | None, phase: str, view: str, analytic: Estimate) -> int | None:
    """The measured bytes a net holds beyond its tensors in one phase and view: the probe's fixed cost plus what
    grows with its layers beyond the probe's.

    Where the kind probes ran (`kind_costs`), each layer costs what its kind's probes measured, distinct or
    repeating (suites.analysis.kind_costs); where the zoo's tuned half measured how that carries to real nets
    (`depth`, from suites.analysis.depth), that sum is scaled and a cost per byte of full conv kernels added.
    Without kind probes, the tuned half's cost per net, per distinct layer (code compiled for it) and per layer
    that repeats an earlier one; else, where the depth probe ran, its one cost per layer (a runtime that does not
    grow with depth, measured as a small negative, adds nothing)."""
    fixed = ((known or {}).get("phases", {}).get(phase) or {}).get(view)
    if fixed is None:
        return None
    fitted = ((known or {}).get("depth", {}).get("phases", {}).get(phase) or {}).get(view) or {}
    layers = kind_costs.beyond_probe((known or {}).get("kind_costs"), analytic.kinds, phase, view)
    if layers is not None:
        return fixed + round(fitted.get("kind_scale", 1) * layers
                             + fitted.get("per_kernel_byte", 0) * analytic.full_conv_kernel_bytes)
    if "per_distinct" in fitted:
        extra_distinct = max(analytic.distinct_layers - known["depth"]["probe_distinct"], 0)
        repeats = analytic.layers - analytic.distinct_layers
        return fixed + round(fitted.get("per_net", 0) + fitted["per_distinct"] * extra_distinct
                             + fitted["per_repeat"] * repeats)
    depth = (known or {}).get("per_layer") or {}
    slope = (depth.get("phases", {}).get(phase) or {}).get(view)
    if slope is None:
        return fixed
    return fixed + max(slope, 0) * max(analytic.layers - depth["probe_layers"], 0)


def _plain_name(resolved_device: str) -> str:
    """The device's published constants file, relative to the project: what a depth fit above them alone names."""
    return str(path(resolved_device).relative_to(ROOT))


def published_name(resolved_device: str) -> str:
    """The device's published constants, relative to the project, as a depth fit names its base: with the kind
    costs where they are published for the device (`KIND_COSTS`), since the zoo fits above them."""
    plain, kinds = _plain_name(resolved_device), KIND_COSTS.get(resolved_device)
    if not kinds:
        return plain
    return f"{plain} with the kind costs of {(kinds / path(resolved_device).name).relative_to(ROOT)}"


def _with_kind_costs(data: dict, resolved_device: str) -> dict | None:
    """The published constants with each framework's kind costs from the device's published kinds run beside its
    probe's (`KIND_COSTS`); None where none are published or readable."""
    kinds = KIND_COSTS.get(resolved_device)
    try:
        measured = load_json(kinds / path(resolved_device).name) if kinds else None
    except (OSError, ValueError):
        return None
    if not isinstance(measured, dict):
        return None
    result = copy.deepcopy(data)
    for framework, by_kind in measured.get("frameworks", {}).items():
        for kind, known in by_kind.items():
            if "kind_costs" in known and kind in result["frameworks"].get(framework, {}):
                result["frameworks"][framework][kind]["kind_costs"] = known["kind_costs"] | {
                    "source": str((kinds / path(resolved_device).name).relative_to(ROOT))}
    return result


def load(resolved_device: str, source: Path | None = None, with_depth: bool = True) -> dict | None:
    """The device's published constants, or those in `source` (a constants file, or a run file whose probes give
    them); None where there are none.

    The published ones carry the published zoo's depth costs where it measured them above these constants
    (suites.analysis.depth), and the published kind costs (`KIND_COSTS`) only where the zoo measured its depth
    costs above them, so the estimate is always the rule the published zoo evaluated. `with_depth` False: the
    probes' alone, with the kind costs where published (what the zoo fits its depth costs above)."""
    published = source is None or source.resolve() == path(resolved_device).resolve()
    source = source or path(resolved_device)
    try:
        data = load_json(source)
    except (OSError, ValueError):
        return None
    if isinstance(data, dict) and (data.get("kind"), data.get("schema_version")) == (KIND, SCHEMA_VERSION):
        if not published:
            return data
        with_kinds = _with_kind_costs(data, resolved_device)
        if not with_depth:
            return with_kinds or data
        fitted = (margins.published_zoo() or {}).get("depth") or {}
        for base, name in ((with_kinds, published_name(resolved_device)), (data, _plain_name(resolved_device))):
            if base is not None and fitted.get("measured_on") == name:
                return depth.merged(base, fitted, name)
        return data
    try:
        return of_run(runfile.read(data))[0]
    except ValueError:  # neither a constants file nor a run file
        return None


def merge(data: dict, record: dict, measured_at: str | None = None) -> bool:
    """Adds a finished probe's constants to `data`, replacing that framework's and kind's earlier ones; a depth
    probe's cost per layer joins the probe's constants it was measured against (none without them). False where
    the record gives nothing."""
    if record["status"] != "ok":
        return False
    scenario = Scenario.from_dict(record["scenario"])
    kinds = data["frameworks"].setdefault(_key(scenario.framework, scenario.allocator), {})
    if scenario.model == PROBE:
        kinds[scenario.kind] = from_probe(record, measured_at) | {
            key: kinds[scenario.kind][key] for key in ("kind_probes", "kind_costs")  # differences between kind probes
            if key in kinds.get(scenario.kind, {})}
    elif not kinds.get(scenario.kind, {}).get("layers"):
        return False
    elif scenario.model == DEEP_PROBE:
        kinds[scenario.kind]["per_layer"] = per_layer(kinds[scenario.kind], record, measured_at)
    else:
        _add_kind_probe(kinds[scenario.kind], record, measured_at)
    _rebase(kinds, scenario.device)
    return True


def _add_kind_probe(known: dict, record: dict, measured_at: str | None) -> None:
    """A kind probe's bytes beyond its tensors, kept with the probe's constants, and the kinds' costs solved again
    once every kind probe is in (suites.analysis.kind_costs). Where the driver's context reading trails (`TRAILS`),
    its figures are first measured above the probe's context, as the depth probe's are."""
    scenario = Scenario.from_dict(record["scenario"])
    found = from_probe(record, measured_at, known.get("blas_workspace", 0))
    shift = {"driver": (found["context"] or 0) - (known["context"] or 0) if scenario.device in TRAILS else 0}
    known.setdefault("kind_probes", {})[scenario.model] = {
        "phases": {name: {view: value + shift.get(view, 0) for view, value in views.items()}
                   for name, views in found["phases"].items()},
        "git_commit": found["git_commit"], "measured_at": found["measured_at"], "versions": found["versions"]}
    solved = kind_costs.solve({name: probe["phases"] for name, probe in known["kind_probes"].items()})
    if solved:
        known["kind_costs"] = solved


def _empty(record: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "device": record["scenario"]["device"],
            "device_description": _measured_on(record), "machine": record.get("run", {}).get("machine"),
            "model": PROBE, "frameworks": {}}


def card(data: dict) -> str:
    """The card (or machine) a constants file, or one framework's constants in it, was measured on, without its
    driver and size."""
    return str(data.get("device_description") or data.get("measured_on", "")).split(", driver")[0]


def pool_on(known: dict, card_bytes: int | None) -> int | None:
    """The pool a preallocating framework maps by default on a card of `card_bytes`: the measured pool's share of
    the probe's card, applied to it (JAX's default takes a fraction of the card, not a size); None where the pool's
    size or either card's memory is not known."""
    if known.get("pool") is None or not known.get("card_bytes") or card_bytes is None:
        return None
    return round(known["pool"] * card_bytes / known["card_bytes"])


def other_card(data: dict, wanted: str | None) -> str | None:
    """Why a GPU's estimate may not hold for `wanted`: its constants were measured on another card; None where
    they were measured on it or no card is named."""
    if not wanted or wanted.strip().lower() == card(data).lower():
        return None
    return (f"the constants were measured on {card(data)}, not {wanted}: the context, the kernel modules and the "
            f"libraries' workspaces differ by card, driver and versions; run the probes there "
            f"(python -m suites bench --suite default --device cuda) for constants of its own")


def _key(framework: str, allocator: str) -> str:
    """Where a probe's constants are kept: under its framework, or `jax noprealloc` for a mode other than the
    default (a pool-off twin's probe measures what the card loses without the pool; it never replaces the default's)."""
    return framework if allocator == "default" else f"{framework} {allocator}"


def lookup(constants: dict | None, framework: str, kind: str, allocator: str = "default") -> dict | None:
    """The constants for one framework, allocator mode and scenario kind: the mode's own probe's where it ran, else
    the default mode's; None where they were never measured."""
    measured = (constants or {}).get("frameworks", {})
    return (measured.get(_key(framework, allocator)) or {}).get(kind) or (measured.get(framework) or {}).get(kind)


def of_run(run: dict) -> tuple[dict | None, list[str]]:
    """The constants a run file's own probes give, with the probes taken as labels; None where it has none.
    Only probe and depth-probe records are read: a net's record never shapes the constants it is estimated with."""
    data, taken = None, []
    for record in sorted(run["records"], key=lambda r: r["scenario"]["model"] != PROBE):  # each probe before the rest
        if record["scenario"]["model"] in PROBES and record["status"] == "ok":
            data = data or _empty(record)
            merge(data, record, f"{run['started_at']} (the run's start)" if "started_at" in run else None)
            taken.append(Scenario.from_dict(record["scenario"]).label)
    return data, taken


def from_run(run: dict, target: Path) -> list[str]:
    """The constants of a run file's probes, written to `target` (a GPU run's constants, committed, let a machine
    without one estimate for that GPU); the probes taken, as labels."""
    data, taken = of_run(run)
    if data is not None:
        atomic_write_json(target, data)
    return taken
