"""The memory-saving techniques users try (story 2), as data: what each is, where it cannot apply, and why.

Each adapter implements a technique in its framework's own idiom; where a framework has no such
thing, the scenario is recorded as unavailable with the reason below, never run as something else.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.spec import ModelSpec

TECHNIQUES = {
    "none": "the baseline",
    "inplace": "in-place activations (where nothing else reads the activation's input)",
    "checkpoint": "gradient checkpointing: each block the spec names (a residual or dense block), or else every "
                  "segment of sqrt(N) layers, recomputed in the backward pass",
    "bnrelu": "batch norm and ReLU recomputed in the backward pass from the conv output before them: each "
              "BN-ReLU pair checkpointed with the conv that reads it, so only conv outputs are kept",
    "efficient": "DenseNet's memory-efficient bottleneck: each dense layer's concatenation, batch norm, ReLU and "
                 "1x1 conv recomputed in the backward pass, so the concatenations are never kept",
    "fp16": "mixed precision fp16 with loss scaling (fp32 master weights)",
    "bf16": "mixed precision bf16 (fp32 master weights)",
    "accumulate": "gradient accumulation over micro-batches",
    "empty_cache": "the allocator's cache emptied after each step",
    "tracked": "inference in eval mode with gradient tracking left on (the mistake no_grad avoids)",
}
ACCUMULATION_STEPS = 4
HALF_PRECISION = {"fp16": 2, "bf16": 2}
TRAIN_ONLY = ("checkpoint", "bnrelu", "efficient", "fp16", "bf16", "accumulate", "empty_cache")
RECOMPUTING = ("checkpoint", "bnrelu", "efficient")  # the techniques that recompute segments (see `segments`)
RECOMPUTE_WITH_BATCH_NORM_ON_TORCH = ("torch.utils.checkpoint re-runs the forward pass in training mode during the "
                                     "backward pass, so each recomputed batch norm updates its running statistics "
                                     "twice a step (num_batches_tracked reads 2 after one step)")
ACCUMULATE_WITH_BATCH_NORM = ("batch norm normalizes each micro-batch by its own statistics and updates the running "
                              "statistics once per micro-batch: the arithmetic is not the full batch's")
INFER_ONLY = ("tracked",)
# fp16's loss scale: JAX's, static (optax has no loss-scale helper), and torch's GradScaler's first, which it then
# adapts; GradScaler's own default (2**16) overflowed resnet50's fp16 gradients on the H100 at ec3adfa in both measured
# steps, so neither updated (the Adam state was never made and the loss did not move)
LOSS_SCALE = 2.0**10

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


def unavailable(framework: str, technique: str, kind: str, device: str, spec: ModelSpec | None = None) -> str | None:
    """Why a technique cannot run in this framework, scenario kind, device and net; None where it can."""
    if technique in TRAIN_ONLY and kind != "train":
        return f"{technique} applies to training only"
    if technique in INFER_ONLY and kind != "infer":
        return f"{technique} applies to inference scenarios only"
    if (framework, technique) in UNAVAILABLE:
        return UNAVAILABLE[(framework, technique)]
    if technique == "empty_cache" and device != "cuda":
        return "there is no device allocator cache on the CPU (torch.cuda.empty_cache has nothing to free)"
    if spec is not None and technique in ("bnrelu", "efficient") and not segments(spec, technique):
        return NOTHING_TO_RECOMPUTE[technique]
    return None


NOTHING_TO_RECOMPUTE = {"bnrelu": "the net has no batch norm followed by a ReLU",
                        "efficient": "the net has no concatenation feeding a batch norm, ReLU and conv (a dense layer)"}


def segments(spec: ModelSpec, technique: str = "checkpoint") -> list[range]:
    """The runs of consecutive layers a technique recomputes in the backward pass; layers outside run as usual.

    checkpoint: the spec's blocks where it names them, else runs of ceil(sqrt(N)) layers; bnrelu: a batch norm,
    the ReLU that alone reads it and the conv that alone reads that (without the conv, the conv's saved input is
    the ReLU's output and nothing is saved); efficient: a concatenation and the batch norm, ReLU and conv after it.
    """
    count, readers = len(spec.layers), spec.consumers()
    if technique == "checkpoint" and spec.blocks and any(spec.blocks):
        runs: list[range] = []
        for index, block in enumerate(spec.blocks):
            if block and runs and spec.blocks[runs[-1].start] == block and runs[-1].stop == index:
                runs[-1] = range(runs[-1].start, index + 1)
            elif block:
                runs.append(range(index, index + 1))
        return runs
    if technique == "checkpoint":
        size = math.ceil(math.sqrt(count))
        return [range(start, min(start + size, count)) for start in range(0, count, size)]
    pattern = {"bnrelu": ("batchnorm", ("relu", "relu6"), "conv2d"),
               "efficient": ("concat", "batchnorm", ("relu", "relu6"), "conv2d")}.get(technique, ())
    runs = []
    for start in range(count):
        length = 0
        while length < len(pattern) and start + length < count and \
                spec.layers[start + length].kind in pattern[length] and \
                (length == 0 or readers[start + length - 1] == [start + length]):
            length += 1
        if length == len(pattern) and not (runs and runs[-1].stop > start):
            runs.append(range(start, start + length))
    return runs


def boundary(spec: ModelSpec, run: range) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """What a recomputed run reads from outside (layer indices, -1 for the model's input) and what of it is read
    after it (the net's outputs count as read: the loss reads them)."""
    sources = tuple(dict.fromkeys(source for index in run for source in spec.layer_inputs(index) if source not in run))
    readers = spec.consumers()
    outputs = tuple(index for index in run if any(reader not in run for reader in readers[index]))
    return sources, outputs


def in_place(spec: ModelSpec, technique: str) -> set[int]:
    """The activation layers run in place: with the inplace technique, those whose input nothing else reads and is
    no crop or channel slice (torch's slice is a view: writing it would write the tensor it was cut from, which
    others may read); through a flatten or reshape (views too), the tensor they view must be read by them alone,
    and be no model input."""
    if technique != "inplace":
        return set()
    readers = spec.consumers()

    def writable(reader: int, source: int) -> bool:
        if source < 0 or readers[source] != [reader] or spec.layers[source].kind in ("crop2d", "channel_slice"):
            return False
        return spec.layers[source].kind not in ("flatten", "reshape") or writable(source, spec.layer_inputs(source)[0])

    return {index for index, layer in enumerate(spec.layers) if layer.kind in ("relu", "relu6")
            and all(writable(index, source) for source in spec.layer_inputs(index))}
