"""Which device a run uses, decided from the driver (NVML) without importing a framework."""

from __future__ import annotations


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
