"""Which figure of a phase stands for what, one rule for progress lines, plots and reports."""

from __future__ import annotations

from models.record import phase as named_phase

# The allocator's own peak, in the order the adapters name it (torch, TensorFlow, JAX).
ALLOCATOR_PEAKS = ("reserved_peak", "allocator_peak", "peak_bytes_in_use")
# The bytes handed to tensors at most (torch's reserved peak also counts its cache).
ALLOCATED_PEAKS = ("allocated_peak", "allocator_peak", "peak_bytes_in_use")


def driver_peak(phase: dict, device: str) -> tuple[int | None, str]:
    """What the system gave the process: NVML on a GPU (the process, else the device), host RSS on the CPU."""
    if device != "cuda":
        return phase["host"]["peak_rss"]["bytes"], "host peak RSS"
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
    """The most bytes the allocator handed to tensors, and the counter's semantics (reset or cumulative)."""
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
    before any model exists. Phase rises are measured above it."""
    context = named_phase(record, "context")
    return driver_peak(context, device)[0] if context else None


def headline(phase: dict, device: str) -> tuple[int, str]:
    """One number per phase: the driver's view, else the allocator's, else the host's."""
    for value, label in (driver_peak(phase, device), allocator_peak(phase)):
        if value is not None:
            return value, label
    return phase["host"]["peak_rss"]["bytes"], "host peak RSS"
