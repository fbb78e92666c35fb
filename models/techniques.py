"""The memory-saving techniques users try (story 2), as data: what each is, where it cannot apply, and why.

Each adapter implements a technique in its framework's own idiom; where a framework has no such
thing, the scenario is recorded as unavailable with the reason below, never run as something else.
"""

from __future__ import annotations

import math

TECHNIQUES = {
    "none": "the baseline",
    "inplace": "in-place activations",
    "checkpoint": "gradient checkpointing: every segment of sqrt(N) layers recomputed in the backward pass",
    "fp16": "mixed precision fp16 with loss scaling (fp32 master weights)",
    "bf16": "mixed precision bf16 (fp32 master weights)",
    "accumulate": "gradient accumulation over micro-batches",
    "empty_cache": "the allocator's cache emptied after each step",
    "tracked": "inference in eval mode with gradient tracking left on (the mistake no_grad avoids)",
}
ACCUMULATION_STEPS = 4
HALF_PRECISION = {"fp16": 2, "bf16": 2}
TRAIN_ONLY = ("checkpoint", "fp16", "bf16", "accumulate", "empty_cache")
INFER_ONLY = ("tracked",)
LOSS_SCALE = 2.0**10  # JAX has no loss-scale helper in optax: a static scale, as the mixed-precision guides show

KERAS_INPLACE = "Keras layers have no in-place activations; the backend decides buffer reuse"
JAX_NO_EMPTY_CACHE = "JAX has no call that returns its allocator's pool (jax.clear_caches drops executables)"
UNAVAILABLE = {
    ("jax", "inplace"): "JAX arrays are immutable: XLA decides buffer reuse inside a compiled step",
    ("jax", "empty_cache"): JAX_NO_EMPTY_CACHE,
    ("keras-tensorflow", "inplace"): KERAS_INPLACE,
    ("keras-jax", "inplace"): KERAS_INPLACE,
    ("keras-torch", "inplace"): KERAS_INPLACE,
    ("keras-tensorflow", "empty_cache"): "TensorFlow has no call that returns its allocator's memory to the device",
    ("keras-jax", "empty_cache"): JAX_NO_EMPTY_CACHE,
    ("keras-torch", "empty_cache"): "Keras has no call for it: the torch column measures torch.cuda.empty_cache",
    ("keras-jax", "tracked"): "JAX has no tape: a forward pass keeps residuals only under jax.vjp, which the jax "
                              "column measures",
}


def unavailable(framework: str, technique: str, kind: str, device: str) -> str | None:
    """Why a technique cannot run in this framework, scenario kind and device; None where it can."""
    if technique in TRAIN_ONLY and kind != "train":
        return f"{technique} applies to training only"
    if technique in INFER_ONLY and kind != "infer":
        return f"{technique} applies to inference scenarios only"
    if (framework, technique) in UNAVAILABLE:
        return UNAVAILABLE[(framework, technique)]
    if technique == "empty_cache" and device != "cuda":
        return "there is no device allocator cache on the CPU (torch.cuda.empty_cache has nothing to free)"
    return None


def segments(layer_count: int) -> list[range]:
    """Checkpoint segments: consecutive runs of ceil(sqrt(N)) layers, every one recomputed in the backward pass."""
    size = math.ceil(math.sqrt(layer_count))
    return [range(start, min(start + size, layer_count)) for start in range(0, layer_count, size)]
