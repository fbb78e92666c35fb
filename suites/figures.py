"""Which figure of a phase stands for what, one rule for progress lines, plots and reports."""

from __future__ import annotations

# The allocator's own peak, in the order the adapters name it (torch, TensorFlow, JAX).
ALLOCATOR_PEAKS = ("reserved_peak", "allocator_peak", "peak_bytes_in_use")


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


def headline(phase: dict, device: str) -> tuple[int, str]:
    """One number per phase: the driver's view, else the allocator's, else the host's."""
    for value, label in (driver_peak(phase, device), allocator_peak(phase)):
        if value is not None:
            return value, label
    return phase["host"]["peak_rss"]["bytes"], "host peak RSS"
