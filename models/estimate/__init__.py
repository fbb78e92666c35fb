"""The analytic estimate: what a scenario holds at the peak of each phase, from the spec alone.

Pure arithmetic over the spec's shapes, plus each framework's documented habits (RULES): which
tensors its backward pass keeps, when its optimizer state appears, what its update step allocates.
Figures that cannot be derived from a spec (the CUDA context, runtime overhead) are measured, and
`suites.analysis.constants` adds them, labelled; nothing here imports a framework.

Its modules, each importing only those listed before it (and models/):
- rules.py: the rules per framework (`Rules`, `RULES`) and the sizes they count in;
- tensors.py: the steps a framework runs for a spec and the tensors they make (`Step`, `Tensors`);
- saved.py: the tensors each step keeps for the backward, and the activations' peaks (`activations`);
- blocks.py, bfc.py, caching.py: the simulated allocators (XLA's BFC, torch's caching allocator) and the blocks
  both keep;
- eager.py: the order in which an eager framework allocates and frees (`eager_order`), which the caching
  allocator replays;
- phases.py: the peaks per phase (`estimate`, `Estimate`), the physical floor (`floor`) and the hand count.
The names below are the estimate's public ones: callers import them from `models.estimate`.
"""

from models.estimate.eager import CAST_STEPS, eager_order
from models.estimate.phases import (
    CATEGORIES,
    HOST_ONLY,
    NEW_TENSOR_STEPS,
    Estimate,
    PhaseEstimate,
    estimate,
    floor,
    hand_count,
)
from models.estimate.rules import (
    BN_CHANNELS,
    BOOL,
    EVAL_SAVES,
    FLOAT32,
    INT64,
    JAX_ACTIVATIONS,
    JAX_CUDA_SAVES,
    NEUTRAL_SAVES,
    NORMALIZE_DIVISOR,
    OPTIMIZER_STATE_COPIES,
    RULES,
    SAVED_KINDS,
    TORCH_LAYERNORM,
    Rules,
)
from models.estimate.saved import Activations, activations, kept_by_layer
from models.estimate.tensors import Step, steps

__all__ = ["BN_CHANNELS", "BOOL", "CAST_STEPS", "CATEGORIES", "EVAL_SAVES", "FLOAT32", "HOST_ONLY", "INT64",
           "JAX_ACTIVATIONS", "JAX_CUDA_SAVES", "NEUTRAL_SAVES", "NEW_TENSOR_STEPS", "NORMALIZE_DIVISOR",
           "OPTIMIZER_STATE_COPIES", "RULES", "SAVED_KINDS", "TORCH_LAYERNORM", "Activations", "Estimate",
           "PhaseEstimate", "Rules", "Step", "activations", "eager_order", "estimate", "floor", "hand_count",
           "kept_by_layer", "steps"]
