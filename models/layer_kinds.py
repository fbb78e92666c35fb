"""Which probe measures what a layer of each kind costs a compiling framework beyond its tensors.

XLA (JAX, Keras on JAX) compiles and keeps code and buffers for each layer that differs from those before it, and
Keras on TensorFlow keeps a traced graph per layer; what that costs depends on the layer's kind by a factor of fifty
and more on the CPU (docs/estimate.md): a batch norm's training step far more than a ReLU's. The kind probes
(models.catalogue `probe-kind-*`) measure one cost per probed kind for a distinct layer and one for a layer that
repeats an earlier one (suites.analysis.kind_costs); every spec kind is measured by the probe of the kind whose
code is most like its own, so a kind without a probe of its own is named here, never guessed in silence.
"""

from __future__ import annotations

from models.spec import Conv2D, ModelSpec

# The probed kinds: each is a block of the kind probes, and the kind whose cost each spec kind borrows.
PROBED = ("conv", "depthwise", "elementwise", "silu", "gelu", "dropout", "layernorm", "batchnorm")
# Spec kinds measured by another kind's probe: a dense layer is a matrix product, as a 1x1 conv is, and a transposed
# conv a conv (of its input spread apart); the smooth
# activations and hard swish compute more than one op per value, as SiLU does; group and instance norm reduce each
# channel's pixels for their statistics in training as batch norm does; everything else not listed (ReLU, PReLU,
# add, concat, pools, padding, reshapes) costs what a ReLU does, an element-wise op the compiler fuses.
MEASURED_BY = {"dense": "conv", "conv_transpose2d": "conv", "batchnorm": "batchnorm", "layernorm": "layernorm",
               "dropout": "dropout", "gelu": "gelu", "silu": "silu", "sigmoid": "silu", "hard_sigmoid": "silu",
               "hard_swish": "silu", "groupnorm": "batchnorm", "instancenorm": "batchnorm"}


def probe_kind(layer: object) -> str:
    """The probed kind whose costs a layer takes."""
    if isinstance(layer, Conv2D):
        return "depthwise" if layer.groups > 1 else "conv"
    return MEASURED_BY.get(getattr(layer, "kind", ""), "elementwise")


def census(spec: ModelSpec) -> dict[str, list[int]]:
    """Per probed kind, [distinct layers, layers that repeat an earlier one]: a layer is distinct where no layer
    before it is compiled as it is (`LayerShapes.compiled_as`, as `ModelSpec.distinct_layers` counts)."""
    seen: set = set()
    found = {kind: [0, 0] for kind in PROBED}
    for shapes in spec.walk():
        found[probe_kind(shapes.layer)][shapes.compiled_as in seen] += 1
        seen.add(shapes.compiled_as)
    return {kind: counts for kind, counts in found.items() if any(counts)}


def full_conv_kernel_values(spec: ModelSpec) -> int:
    """The kernel values of convs that are neither depthwise nor 1x1: on XLA's CPU a training step holds beyond
    the rules about two bytes per byte of them (fitted on the zoo's tuned half; its mechanism is not pinned down)."""
    return sum(shapes.param_count for shapes in spec.walk() if isinstance(shapes.layer, Conv2D)
               and shapes.layer.groups == 1 and shapes.layer.kernel not in (1, (1, 1)))
