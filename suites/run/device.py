"""Which device a run uses, decided from the driver (NVML) without importing a framework."""

from __future__ import annotations

import os


def gpu_names() -> list[str]:
    """The GPUs NVML sees; empty where there is no driver, no library or no GPU."""
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return []
    try:
        return [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()


def resolve(requested: str) -> str:
    """'auto' becomes 'cuda' where NVML sees a GPU, else 'cpu'."""
    if requested != "auto":
        return requested
    return "cuda" if gpu_names() else "cpu"


def describe(device: str) -> str:
    """What the run's memory figures are, in words, for output, files and plot titles."""
    if device == "cpu":
        return "CPU (no GPU used): host memory (RSS) and framework CPU allocators, not GPU memory"
    return f"GPU ({', '.join(gpu_names()) or 'CUDA'}): device memory"


def capacity(device: str) -> int | None:
    """The device's whole memory in bytes: the machine's RAM, or the visible GPU's; None where it cannot be read."""
    if device == "cpu":
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    from suites.run import nvml  # a GPU run only: the CPU path needs no NVML library

    try:
        source = nvml.NvmlSource(nvml.visible_gpu_index())
    except Exception:  # no library, no driver: the worker will say so
        return None
    try:
        return int(source.describe()["total_bytes"])
    finally:
        source.close()
