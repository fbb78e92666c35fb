"""Every record's estimate beside its measurement: the error per phase, the measured breakdown, the floor.

Added by the orchestrator to each record it returns, from the record and the measured constants alone,
so a record read years later still says what was predicted, with which rules and which constants.
"""

from __future__ import annotations

from models.estimate import RULES, Estimate
from models.record import PEAK_SINCE_PHASE_START, STATIC_PLAN
from models.record import phase as named_phase
from models.scenario import Scenario
from suites import constants, figures

MEASURED, DERIVED = "measured", "derived"
POOL_OR_OVERHEAD = {
    "cuda": "NVML minus the context and the allocator's reserved bytes: pool, preallocation, library workspace",
    "cpu": "host RSS not held by the model's tensors: framework runtime, compiler, malloc caches",
}


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
        state = compile_phase["tensors"].get("optimizer_state") or 0
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
            overhead = ((known or {}).get("phases", {}).get(name) or {}).get(view)
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


def _part(value: int | None, basis: str, source: str) -> dict:
    return {"bytes": value, "basis": basis, "source": source}


def breakdown(record: dict, analytic: Estimate) -> dict[str, dict]:
    """Each phase's driver peak split by where the bytes go, each part marked measured or derived.

    The parts add up to the driver's peak: the last one is what is left, so it absorbs any error in the others.
    """
    resolved = record["scenario"]["device"]
    base = figures.baseline(record, resolved)
    compile_phase = named_phase(record, "compile") or {"notes": {}}
    plans = compile_phase["notes"].get("memory_analysis", {})
    result = {}
    for measured in record.get("phases", []):
        predicted = analytic.phase(measured["name"])
        driver, driver_label = figures.driver_peak(measured, resolved)
        if predicted is None or measured["name"] in ("import", "context") or driver is None or base is None:
            continue
        tensors = measured.get("tensors") or {}
        parts = {"context": _part(base, MEASURED, f"{driver_label} of the context phase")}
        for name in ("weights", "optimizer_state", "inputs"):
            parts[name] = _part(tensors.get(name) or 0, MEASURED, "the framework's tensors at the end of the phase")
        if tensors.get("gradients"):
            parts["gradients"] = _part(tensors["gradients"], MEASURED, "the framework's gradients after the phase")
        else:
            parts["gradients"] = _part(predicted.items.get("gradients", 0), DERIVED,
                                       "the estimate's rule: the framework does not expose them")
        held = sum(part["bytes"] for name, part in parts.items() if name != "context")
        allocated, semantics = figures.allocated_peak(measured)
        reserved = measured["allocator"].get("reserved_peak", {}).get("bytes")
        if allocated is not None and semantics == PEAK_SINCE_PHASE_START:
            parts["activations_and_temporaries"] = _part(allocated - held, DERIVED,
                                                         "the allocator's peak minus the tensors above")
            if reserved is not None:
                parts["allocator_cache"] = _part(reserved - allocated, MEASURED, "reserved peak minus allocated peak")
        elif "saved_activation_bytes" in measured["notes"]:
            parts["activations_and_temporaries"] = _part(measured["notes"]["saved_activation_bytes"], MEASURED,
                                                         "tensors autograd saved for the backward pass")
        elif measured["name"].startswith("train_step") and "train_step" in plans:
            temp = plans["train_step"]["temp"]["bytes"] - parts["gradients"]["bytes"]
            parts["activations_and_temporaries"] = _part(temp, STATIC_PLAN, "XLA's temp buffers minus the gradients")
        elif measured["name"] == "inference" and "forward" in plans:
            parts["activations_and_temporaries"] = _part(plans["forward"]["temp"]["bytes"], STATIC_PLAN,
                                                         "XLA's temp buffers of the forward pass")
        accounted = sum(part["bytes"] for part in parts.values())
        parts["pool_or_overhead"] = _part(driver - accounted, DERIVED, POOL_OR_OVERHEAD.get(resolved, ""))
        result[measured["name"]] = parts
    return result


def floor(record: dict, analytic: Estimate) -> dict:
    """The scenario's measured peak as a multiple of the physical floor, with and without the context."""
    resolved = record["scenario"]["device"]
    peaks = [figures.driver_peak(p, resolved)[0] for p in record.get("phases", [])]
    peak = max((p for p in peaks if p is not None), default=None)
    base = figures.baseline(record, resolved)
    result: dict = {"bytes": analytic.floor, "peak_bytes": peak}
    if peak is not None and analytic.floor:
        result["ratio"] = round(peak / analytic.floor, 3)
        if base is not None:
            result["ratio_over_context"] = round((peak - base) / analytic.floor, 3)
    return result


def account(record: dict, known_constants: dict | None) -> dict:
    """The estimate, comparison, breakdown and floor for one record (nothing for internal scenario kinds)."""
    scenario = Scenario.from_dict(record["scenario"])
    if scenario.kind not in ("train", "infer"):
        return {}
    analytic = constants.analytic_estimate(scenario)
    known = constants.lookup(known_constants, scenario.framework, scenario.kind)
    source = constants.path(scenario.device).name
    return {
        "estimate": analytic.to_dict() | {
            "rules_why": RULES[analytic.rules].why,
            "constants": ({"source": source, "context": known["context"], "phases": known["phases"],
                           "git_commit": known["git_commit"], "measured_at": known["measured_at"]}
                          if known else {"missing": f"no probe of {scenario.framework} ({scenario.kind}) in {source}"}),
        },
        "comparison": comparison(record, analytic, known),
        "breakdown": breakdown(record, analytic),
        "floor": floor(record, analytic),
    }
