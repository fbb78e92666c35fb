"""Which device a run uses, decided from the driver (NVML) without importing a framework."""

from __future__ import annotations

import os


def _gpus() -> tuple[list[str], str]:
    """The GPUs NVML sees and, where it sees none, why in NVML's own words (no library, no driver, no GPU)."""
    try:
        import pynvml
    except ImportError:
        return [], "NVML's Python binding, nvidia-ml-py, is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return [], f"NVML: {error}"
    try:
        names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
                 for i in range(pynvml.nvmlDeviceGetCount())]
    finally:
        pynvml.nvmlShutdown()
    return names, "" if names else "NVML sees no GPU"


def gpu_names() -> list[str]:
    """The GPUs NVML sees; empty where there is no driver, no library or no GPU."""
    return _gpus()[0]


def no_gpu(device: str) -> str | None:
    """Why a run on `device` cannot start on this machine for want of a GPU, in one line with NVML's reason; None
    where it can. Asked before any CUDA interpreter is looked for: without a GPU `make envs` builds none, so "no
    interpreter" would send a person the wrong way. (`estimate` never asks: it sizes a card from constants.)"""
    if device != "cuda":
        return None
    names, why = _gpus()
    return None if names else f"--device cuda, but no GPU is visible ({why}): run on the CPU with --device cpu"


def resolve(requested: str) -> str:
    """'auto' becomes 'cuda' where NVML sees a GPU, else 'cpu'."""
    if requested != "auto":
        return requested
    return "cuda" if gpu_names() else "cpu"


def describe(device: str, gpus: list[str] | None = None) -> str:
    """What the run's memory figures are, in words, for output, files and plot titles: on the GPUs named (a record
    measured elsewhere names its own), else on those NVML sees here."""
    if device == "cpu":
        return "CPU (no GPU used): host memory (RSS) and framework CPU allocators, not GPU memory"
    return f"GPU ({', '.join(gpu_names() if gpus is None else gpus) or 'CUDA'}): device memory"


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
