"""A FAKE of NVML's Python binding (nvidia-ml-py) with two made-up GPUs, for testing the Ray executor's pinning on
a machine without a GPU. Put this folder first on PYTHONPATH to use it; nothing else imports it."""

from __future__ import annotations

from types import SimpleNamespace

GPUS = ("GPU-00000000-fake-0000-0000-000000000000", "GPU-11111111-fake-1111-1111-111111111111")
USED_BYTES = 500 * 2**20


class NVMLError(Exception):
    pass


def nvmlInit() -> None:  # noqa: N802 (NVML's names)
    pass


def nvmlShutdown() -> None:  # noqa: N802
    pass


def nvmlDeviceGetCount() -> int:  # noqa: N802
    return len(GPUS)


def nvmlDeviceGetHandleByIndex(index: int) -> int:  # noqa: N802
    if not 0 <= index < len(GPUS):
        raise NVMLError(f"no GPU {index}")
    return index


def nvmlDeviceGetHandleByUUID(uuid: str) -> int:  # noqa: N802
    return GPUS.index(uuid)


def nvmlDeviceGetIndex(handle: int) -> int:  # noqa: N802
    return handle


def nvmlDeviceGetUUID(handle: int) -> str:  # noqa: N802
    return GPUS[handle]


def nvmlDeviceGetName(handle: int) -> str:  # noqa: N802
    return "Fake GPU"


def nvmlDeviceGetMemoryInfo(handle: int) -> SimpleNamespace:  # noqa: N802
    return SimpleNamespace(total=80 * 2**30, used=USED_BYTES, free=80 * 2**30 - USED_BYTES)


def nvmlDeviceGetComputeRunningProcesses(handle: int) -> list:  # noqa: N802
    return []


def nvmlSystemGetDriverVersion() -> str:  # noqa: N802
    return "fake"
