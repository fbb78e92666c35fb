"""Failures whose cause is known and is not this suite's: recorded with the explanation, not as a fault to chase.

A failure matches when every marker appears in its message or in the worker's last output. It keeps its
status (error, crashed); the explanation rides beside it, and the suite does not fail the run for it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownFailure:
    framework: str
    markers: tuple[str, ...]
    explanation: str


KNOWN = (
    KnownFailure(
        "jax", ("cudnn status: 5003",),
        "XLA runs the jitted step as a CUDA graph (command buffers), and cuDNN's convolution frees its workspace "
        "while the stream is being captured; with XLA_PYTHON_CLIENT_ALLOCATOR=platform that free is a cudaFree, "
        "which a capturing stream refuses (the worker's log: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "
        "'Failed to synchronize before device memory deallocation'), and cuDNN reports 5003, "
        "CUDNN_STATUS_EXECUTION_FAILED_CUDART. An XLA/cuDNN limitation of the platform allocator, not of the "
        "model; XLA_FLAGS=--xla_gpu_enable_command_buffer= (no CUDA graphs) is the workaround to try."),
)


def classify(record: dict) -> str | None:
    """The explanation of a failed record's known cause, or None."""
    failure = record.get("failure") or {}
    text = f"{failure.get('message', '')}\n{record.get('run', {}).get('output_tail', '')}".lower()
    framework = record["scenario"]["framework"]
    return next((known.explanation for known in KNOWN
                 if known.framework == framework and all(marker.lower() in text for marker in known.markers)), None)
