"""Which figure of a phase stands for what, one rule for progress lines, plots, reports and the fit finder.

Two figures per phase, side by side everywhere: what the process *holds* (the driver's view: NVML on a
GPU, pools included; host RSS on the CPU) and what the model *needs* (the allocator's own peak inside the
phase, or XLA's static plan where JAX's counter cannot say). A preallocating framework holds its pool
from the first phase on, so only the second figure compares frameworks' models.
"""

from __future__ import annotations

from collections.abc import Callable

from models import allocator_modes
from models.record import PEAK_SINCE_PHASE_START, STATIC_PLAN
from models.record import phase as named_phase
from models.scenario import Scenario

# The allocator's own peak, in the order the adapters name it (torch, TensorFlow, JAX).
ALLOCATOR_PEAKS = ("reserved_peak", "allocator_peak", "peak_bytes_in_phase", "peak_bytes_in_use")
# The bytes handed to tensors at most (torch's reserved peak also counts its cache).
ALLOCATED_PEAKS = ("allocated_peak", "allocator_peak", "peak_bytes_in_phase", "peak_bytes_in_use")
MIB = 2**20


def mib(value: int | None) -> str:
    """Bytes as MiB for tables and lines: whole MiB from 100 up, one decimal below, '-' for no figure."""
    if value is None:
        return "-"
    return f"{value / MIB:,.0f}" if value / MIB >= 100 else f"{value / MIB:.1f}"


def highest(record: dict, figure: Callable[[str], int | None]) -> tuple[int, str] | None:
    """The largest of a per-phase figure over the record's phases, with its phase; None where no phase has it."""
    found = [(value, measured["name"]) for measured in record.get("phases", [])
             if (value := figure(measured["name"])) is not None]
    return max(found) if found else None


def peaks(record: dict) -> tuple[tuple[int, str] | None, tuple[int, str] | None]:
    """(holds, needs) at their highest phase, each with the phase: the most the process held (`driver_peak`) and
    the most the model needed (`need`); None where no phase has the figure."""
    device = record["scenario"]["device"]
    return (highest(record, lambda name: driver_peak(named_phase(record, name), device)[0]),
            highest(record, lambda name: need(record, name)[0]))


def summary_phase(record: dict) -> str | None:
    """The one phase a record is summed up by, in the headline's table, its sentence and the plot alike: where the
    process holds most without a pool (its accounted breakdown less `pool_unused`); on a tie (a cache keeps a step's
    memory into the phases after it) the phase with the model's own need, then the earliest, where it was reached.
    None where the record has no breakdown."""
    parts = record.get("breakdown") or {}
    if not parts:
        return None
    order = [p["name"] for p in record.get("phases", [])]
    return max(parts, key=lambda name: (sum(value["bytes"] for part, value in parts[name].items()
                                            if part != "pool_unused"),
                                        need(record, name)[0] is not None,
                                        -order.index(name) if name in order else -len(order)))


def driver_peak(phase: dict, device: str) -> tuple[int | None, str]:
    """What the system gave the process: NVML on a GPU (the process, else the device), host RSS on the CPU."""
    if device != "cuda":
        host = phase["host"]
        children = sum(host.get(name, {}).get("bytes", 0) for name in ("children_peak_rss", "finished_child_peak_rss"))
        counted = host.get("processes_counted", 1)
        return host["peak_rss"]["bytes"] + children, "host peak RSS" + (f" ({counted} processes)" if children else "")
    sampled = phase.get("nvml", {})
    for name, label in (("process_peak", "NVML process peak"), ("device_peak", "NVML device peak")):
        if name in sampled:
            return sampled[name]["bytes"], label
    return None, "no NVML sample"


def allocator_peak(phase: dict) -> tuple[int | None, str]:
    """What the framework's allocator says it held at most, with the counter's semantics."""
    for name in ALLOCATOR_PEAKS:
        if name in phase["allocator"]:
            figure = phase["allocator"][name]
            return figure["bytes"], f"{name} ({figure['semantics']})"
    return None, "no allocator peak"


def allocated_peak(phase: dict) -> tuple[int | None, str | None]:
    """The most bytes the allocator handed to tensors, and the counter's semantics (reset, at most, cumulative)."""
    for name in ALLOCATED_PEAKS:
        if name in phase["allocator"]:
            return phase["allocator"][name]["bytes"], phase["allocator"][name]["semantics"]
    return None, None


def allocated_now(phase: dict) -> int | None:
    """The allocator's bytes in tensors when the phase ended (torch, TensorFlow, JAX names)."""
    for name in ("allocated", "allocator_current", "bytes_in_use"):
        if name in phase["allocator"]:
            return phase["allocator"][name]["bytes"]
    return None


def baseline(record: dict, device: str) -> int | None:
    """The driver's figure for the context phase: the interpreter, the framework and the device runtime,
    before any model exists, plus any pool mapped when the device started. Phase rises are measured above it."""
    context = named_phase(record, "context")
    return driver_peak(context, device)[0] if context else None


def preallocated(record: dict) -> bool:
    """Whether the driver's figures hold a pool mapped when the device started (read from the scenario, so
    records written before the allocator settings said so are read the same way)."""
    return Scenario.from_dict(record["scenario"]).preallocates


def pool_size(record: dict) -> int | None:
    """The preallocated pool's bytes: JAX's bytes_limit, TensorFlow's limit mode; None where not preallocated
    or where the framework does not say (TensorFlow's default)."""
    if not preallocated(record):
        return None
    context = named_phase(record, "context") or {"allocator": {}}
    if "bytes_limit" in context["allocator"]:
        return context["allocator"]["bytes_limit"]["bytes"]
    mode, _, megabytes = record["scenario"]["allocator"].partition("=")
    return int(megabytes) * MIB if mode == "limit" else None


def pool_used(record: dict, name: str) -> int | None:
    """What the model used of a preallocated pool in a phase: its need, or where the allocator cannot say for the
    phase alone, its peak so far (an upper bound)."""
    measured = named_phase(record, name)
    if measured is None:
        return None
    found = need(record, name)[0]
    return found if found is not None else allocated_peak(measured)[0]


def context_alone(record: dict, device: str) -> int | None:
    """The context phase's driver figure without a preallocated pool: the CUDA context and the runtime."""
    base, pool = baseline(record, device), pool_size(record)
    if base is None or (preallocated(record) and pool is None):
        return None
    return base - (pool or 0)


def plan(record: dict, name: str) -> dict | None:
    """XLA's static plan of the executable a phase runs (the train step, or the forward pass), if any."""
    plans = (named_phase(record, "compile") or {"notes": {}})["notes"].get("memory_analysis", {})
    return plans.get("train_step" if name.startswith("train_step") else "forward" if name == "inference" else "")


def _plan_need(record: dict, name: str) -> int | None:
    """XLA's plan for a step or the forward pass, on top of what was live when the phase began."""
    planned = plan(record, name)
    names = [p["name"] for p in record["phases"]]
    if not planned or name not in names or names.index(name) == 0:
        return None
    before = allocated_now(record["phases"][names.index(name) - 1])
    if before is None:
        return None
    return before + planned["temp"]["bytes"] + planned["output"]["bytes"] - planned["alias"]["bytes"]


def no_allocator_figures(record: dict) -> str | None:
    """Why the framework's allocator gave no figures in any phase ("not available: ..."), where the worker found it
    keeps none (TensorFlow's plain CPU allocator, oneDNN off); None otherwise."""
    return (record.get("framework") or {}).get("allocator_figures")


def need(record: dict, name: str) -> tuple[int | None, str]:
    """What the model needed at most in the phase: the allocator's in-phase peak, else XLA's plan, with a label."""
    measured = named_phase(record, name)
    if measured is None:
        return None, "phase not reached"
    scenario = record["scenario"]
    if not allocator_modes.counted(scenario["framework"], scenario["allocator"]):
        return None, "the allocator keeps no statistics in this mode"
    if missing := no_allocator_figures(record):
        return None, missing
    allocated, semantics = allocated_peak(measured)
    if allocated is not None and semantics == PEAK_SINCE_PHASE_START:
        return allocated, "allocator peak in the phase"
    planned = _plan_need(record, name)
    if planned is not None:
        return planned, STATIC_PLAN
    return None, "no in-phase allocator peak" if allocated is not None else "no allocator figure"
