"""Every record's estimate beside its measurement: the error per phase, the measured breakdown, the floor.

Computed where a run is read (the report, `errors`, `compare`, the terminal), never by the run machinery, from
the record and the measured constants alone: the run's own probes where it has them, else the published ones.
Older run files stored their estimate; the constants they name are used again, with today's rules.
"""

from __future__ import annotations

from models import allocator_modes
from models.estimate import RULES, Estimate
from models.record import STATIC_PLAN, one_line
from models.record import phase as named_phase
from models.scenario import Scenario
from suites.analysis import constants, figures

MEASURED, DERIVED, ESTIMATED = "measured", "derived", "estimated"
# What the driver holds beyond the parts below it. On a GPU whose allocator reports its pool, every byte the allocator
# held is below it, so the rest is CUDA's own; elsewhere the rest holds what the allocator kept unreported too.
KERNEL_MODULES = ("kernel_modules", "the driver's figure beyond the context and the allocator's pool: CUDA modules "
                                    "loaded lazily since the context, library handles")
RUNTIME = {
    "cuda": ("runtime", "the driver's figure beyond the context and the model's need: CUDA modules, library handles "
                        "and what the allocator held that its counters do not show (TensorFlow's pool, an older "
                        "jaxlib's, the buffers of XLA's platform allocator)"),
    "cpu": ("runtime", "host RSS beyond the context and the model's tensors: framework runtime, compiler, "
                       "malloc caches"),
}
# The estimate's categories that name part of a need beyond autograd's saved tensors: the chunks a growing pool did not
# split first (simulated), the BLAS workspaces next (their size is measured), then the optimizer update's temporaries,
# then what is in flight (a backward's gradient pair; Keras's Functional holding every layer's output until its call
# returns). XLA's temp buffers hold all of them but the unsplit chunks (BEYOND_PLAN), the allocator's own counting.
BEYOND_PLAN = ("unsplit_chunks",)  # what an allocator counts beyond every buffer a compiled plan names
NAMED_BY_ESTIMATE = {"unsplit_chunks": "the estimate's chunks a growing BFC pool did not split, counted as in use "
                                       "(models.estimate.bfc, simulated over the allocation order)",
                     "library_workspace": "the estimate's BLAS workspaces (a probe's measured size, per thread that "
                                          "multiplied)",
                     "update_temporaries": "the estimate's optimizer update temporaries (the framework's rules)",
                     "transient": "the estimate's tensors in flight at the peak (the framework's rules: a gradient "
                                  "pair; Keras's Functional holding the layer outputs no backward needs)"}


def relative_error(estimate: int, measured: int) -> float | None:
    return round((estimate - measured) / measured, 4) if measured > 0 else None


def framework_tensors(record: dict) -> dict[str, tuple[int, str]]:
    """The framework's own prediction of a phase's tensor bytes, where it has one: (bytes, source)."""
    found: dict[str, tuple[int, str]] = {}
    compile_phase = named_phase(record, "compile") or {"notes": {}, "tensors": {}}
    plans = compile_phase["notes"].get("memory_analysis", {})

    def total(plan: dict) -> int:
        return sum(plan[name]["bytes"] for name in ("argument", "temp", "output")) - plan["alias"]["bytes"]

    source = "jax: compiled memory_analysis()"
    if "train_step" in plans:
        for name in ("train_step_1", "train_step_2"):
            found[name] = (total(plans["train_step"]), source)
    if "forward" in plans:  # in a train scenario the optimizer state is live beside the forward's buffers
        state = (compile_phase.get("tensors") or {}).get("optimizer_state") or 0
        found["inference"] = (total(plans["forward"]) + state, source)
    tracker = (record.get("framework_estimate") or {}).get("mem_tracker")
    if tracker:
        found[tracker["phase"]] = (tracker["peak_bytes"], "torch: mem_tracker on FakeTensors")
    return found


def comparison(record: dict, analytic: Estimate, known: dict | None) -> dict[str, dict]:
    """Per phase and view: measured, estimate (analytic + measured constant), relative error; and the
    framework's own estimate with the same constant, where it has one."""
    own = framework_tensors(record)
    result: dict[str, dict] = {}
    for name, views in constants.measured_views(record, analytic).items():
        entry: dict[str, dict] = {}
        for view, (measured, tensors) in views.items():
            overhead = constants.overhead(known, name, view, analytic)
            figures_of_view = {"measured": measured, "tensors": tensors, "constant": overhead}
            if overhead is not None:
                predicted = tensors + overhead
                figures_of_view |= {"estimate": predicted, "relative_error": relative_error(predicted, measured)}
            if name in own and overhead is not None:
                theirs = own[name][0] + overhead
                figures_of_view |= {"framework_estimate": theirs, "framework_source": own[name][1],
                                    "framework_relative_error": relative_error(theirs, measured)}
            entry[view] = figures_of_view
        result[name] = entry
    return result


def _part(value: int, basis: str, source: str) -> dict:
    return {"bytes": value, "basis": basis, "source": source}


def _activations(record: dict, measured: dict, held: int, need: int | None) -> tuple[int, str, str] | None:
    """What the phase kept for the backward pass or in flight: autograd's saved tensors, XLA's temp buffers,
    or the allocator's peak beyond the tensors; None where nothing says."""
    if "saved_activation_bytes" in measured["notes"]:
        return measured["notes"]["saved_activation_bytes"], MEASURED, "tensors autograd saved for the backward pass"
    plan = figures.plan(record, measured["name"])
    if plan:
        return (plan["temp"]["bytes"], STATIC_PLAN,
                "XLA's temp buffers: activations, gradients in flight and library workspace")
    if need is not None:
        return need - held, DERIVED, "the allocator's peak minus the tensors: activations, gradients, temporaries"
    return None


def _pool(record: dict, measured: dict, preallocated: int | None) -> tuple[str, int, str, str] | None:
    """The allocator's pool in a phase, where the allocator says, as the name of its unused rest, its bytes, basis and
    what it is: a preallocated pool (`pool_unused`), or a pool grown with the model's use, whose unused rest is the
    allocator's cache (torch's reserved peak, JAX's BFC pool); None where the allocator does not say (TensorFlow's, an
    older jaxlib's, one whose statistics mean nothing in its mode: torch's without caching)."""
    counters, scenario = measured["allocator"], record["scenario"]
    if preallocated is not None:
        return "pool_unused", preallocated, DERIVED, "the preallocated pool"
    if not allocator_modes.counted(scenario["framework"], scenario["allocator"]):
        return None
    if "reserved_peak" in counters:
        return "allocator_cache", counters["reserved_peak"]["bytes"], MEASURED, "the reserved peak"
    if "peak_pool_bytes" in counters:
        return ("allocator_cache", counters["peak_pool_bytes"]["bytes"], MEASURED,
                "the BFC pool at its largest by the phase's end (it only grows, but on an out-of-memory retry)")
    return None


def _rest_of_need(rest: int, items: dict[str, int], label: str) -> list[tuple[str, int, str, str]]:
    """The need beyond the tensors and activations: the estimate's parts in `items` (each cut to what is left, and
    saying so), then what no rule explains."""
    parts = []
    for category, source in NAMED_BY_ESTIMATE.items():
        value = min(items.get(category, 0), rest)
        if value > 0:
            cut = f" (cut from {items[category] / figures.MIB:,.1f} MiB to what the need leaves)"
            parts.append((category, value, ESTIMATED, source + (cut if value < items[category] else "")))
            rest -= value
    return [*parts, ("unexplained", rest, DERIVED, f"what the model used ({label}) beyond its tensors, activations"
                     + (" and the estimate's parts" if parts else "") + ": no rule names it")]


def breakdown(record: dict, analytic: Estimate) -> dict[str, dict]:
    """Each phase's driver peak split by where the bytes go, each part marked measured, derived, static plan or
    estimated.

    The parts add up to the driver's peak and none is negative: each takes at most what the parts below it
    left of the peak (one cut is said in its source), and the last, what the driver saw beyond the context
    and the allocator (kernel modules on a GPU whose allocator reports its pool, runtime elsewhere), is what is left.
    """
    resolved = record["scenario"]["device"]
    context = figures.context_alone(record, resolved)
    preallocated = figures.pool_size(record)
    result = {}
    for measured in record.get("phases", []):
        driver, driver_label = figures.driver_peak(measured, resolved)
        if measured["name"] in ("import", "context") or driver is None or context is None:
            continue
        tensors = measured.get("tensors") or {}
        need, need_label = figures.need(record, measured["name"])
        wanted = [("context", context, MEASURED, f"{driver_label} of the context phase"
                   + (", less the preallocated pool" if preallocated else ""))]
        wanted += [(name, tensors[name], MEASURED, "the framework's tensors at the end of the phase")
                   for name in ("weights", "gradients", "optimizer_state", "inputs") if tensors.get(name)]
        held = sum(value for _, value, _, _ in wanted[1:])
        activations = _activations(record, measured, held, need)
        if activations:
            wanted.append(("activations", *activations))
        pool = _pool(record, measured, preallocated)
        # with no need in the phase, what the pool holds is measured by the allocator's peak so far, never left over
        used = figures.pool_used(record, measured["name"]) if pool else need
        if used is not None:
            estimated, planned, basis = {}, analytic.phase(measured["name"]), activations and activations[1]
            if planned and basis == MEASURED:
                estimated = planned.items
            elif planned and basis == STATIC_PLAN:  # a plan's temp holds every part but what the allocator adds
                estimated = {category: planned.items[category] for category in BEYOND_PLAN
                             if category in planned.items}
            wanted += _rest_of_need(used - held - (activations[0] if activations else 0), estimated,
                                    need_label if need is not None else "the allocator's peak so far")
            if pool:
                name, size, basis, what = pool
                wanted.append((name, size - used, basis, f"{what} beyond what the model used ("
                               + ("its need)" if need is not None else "the allocator's peak so far)")))
        parts, left = {}, driver
        for name, value, basis, source in wanted:
            taken = min(max(value, 0), left)
            if taken < value:
                source += f" (cut from {value / figures.MIB:,.1f} MiB to what the driver's peak leaves)"
            parts[name] = _part(taken, basis, source)
            left -= taken
        residual_name, residual_source = (KERNEL_MODULES if pool and used is not None and resolved == "cuda"
                                          else RUNTIME.get(resolved, RUNTIME["cpu"]))
        parts[residual_name] = _part(left, DERIVED, residual_source)
        result[measured["name"]] = parts
    return result


def floor_of_record(record: dict, analytic: Estimate) -> dict:
    """A record's "floor": its measured peak (and the model's need) as a multiple of the physical floor, the bytes
    `models.estimate.floor` gives."""
    resolved = record["scenario"]["device"]
    peaks = [figures.driver_peak(p, resolved)[0] for p in record.get("phases", [])]
    peak = max((p for p in peaks if p is not None), default=None)
    base = figures.baseline(record, resolved)
    needs = [figures.need(record, p["name"])[0] for p in record.get("phases", [])]
    need = max((n for n in needs if n is not None), default=None)
    result: dict = {"bytes": analytic.floor, "peak_bytes": peak, "need_bytes": need}
    if peak is not None and analytic.floor:
        result["ratio"] = round(peak / analytic.floor, 3)
        if base is not None:
            result["ratio_over_context"] = round((peak - base) / analytic.floor, 3)
    if need is not None and analytic.floor:
        result["need_ratio"] = round(need / analytic.floor, 3)
    return result


def account(record: dict, known_constants: dict | None, source: str = "") -> dict:
    """The estimate, comparison, breakdown and floor for one record (nothing for internal scenario kinds)."""
    scenario = Scenario.from_dict(record["scenario"])
    known = constants.lookup(known_constants, scenario.framework, scenario.kind, scenario.allocator)
    return _account(record, known, source or published(scenario.device))


def published(resolved_device: str) -> str:
    """The published constants' file, as the report names it."""
    return str(constants.path(resolved_device).relative_to(constants.ROOT))


def refresh(record: dict) -> dict:
    """`account` again, with the constants the record was measured with where it stored them (an older run file),
    else with the published ones: a report shows today's arithmetic over the same measurements."""
    stored = (record.get("estimate") or {}).get("constants") or {}
    if not stored:
        return account(record, constants.load(record["scenario"]["device"]))
    known = None if "missing" in stored else stored
    return _account(record, known, stored.get("source", ""))


def reaccount(run: dict, known: dict | None = None, source: str = "") -> list[dict]:
    """A run file's records accounted again with today's rules: with `known` (constants data, read from `source`)
    where given, else with the constants its own probes give where it has them (never from the records being
    estimated), else with those each record was measured with."""
    taken, labels = (known, []) if known is not None else constants.of_run(run)
    source = source if known is not None else f"the run's {len(labels)} probe records"

    def accounted(record: dict) -> dict:
        try:
            return record | (refresh(record) if taken is None else account(record, taken, source))
        except Exception as error:  # a record the arithmetic cannot read is still shown, with the reason
            return record | {"accounting_error": one_line(error)}

    return [accounted(record) for record in run["records"]]


def _account(record: dict, known: dict | None, source: str) -> dict:
    scenario = Scenario.from_dict(record["scenario"])
    if scenario.kind not in ("train", "infer"):
        return {}
    analytic = constants.analytic_estimate(scenario, known)
    kept = ("layers", "per_layer", "depth", "kind_costs", "blas_workspace")
    return {
        "estimate": analytic.to_dict() | {
            "rules_why": RULES[analytic.rules].why,
            "constants": ({"source": source, "context": known["context"], "phases": known["phases"],
                           "git_commit": known["git_commit"], "measured_at": known["measured_at"]}
                          | {key: known[key] for key in kept if key in known}
                          if known else {"missing": f"no probe of {scenario.framework} ({scenario.kind}) in {source}"}),
        },
        "comparison": comparison(record, analytic, known),
        "breakdown": breakdown(record, analytic),
        "floor": floor_of_record(record, analytic),
    }
