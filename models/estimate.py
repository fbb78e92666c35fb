"""The analytic estimate: what a scenario holds at the peak of each phase, from the spec alone.

Pure arithmetic over the spec's shapes, plus each framework's documented habits (RULES): which
tensors its backward pass keeps, when its optimizer state appears, what its update step allocates.
Figures that cannot be derived from a spec (the CUDA context, runtime overhead) are measured, and
`suites.analysis.constants` adds them, labelled; nothing here imports a framework.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from itertools import accumulate

from models import bfc, caching, eager, techniques
from models.scenario import DTYPES, PHASES
from models.spec import ELEMENTWISE, INPUT, AvgPool2D, Conv2D, LayerShapes, MaxPool2D, ModelSpec, same_padding

CATEGORIES = ("weights", "gradients", "accumulated_gradients", "optimizer_state", "inputs", "saved_activations",
              "half_weights", "transient", "update_temporaries", "init_temporaries", "library_workspace",
              "unsplit_chunks", "retained_pages")
HOST_ONLY = ("retained_pages",)  # what the process keeps and its framework's allocator no longer counts
OPTIMIZER_STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2}
INT64, BOOL, FLOAT32 = 8, 1, 4
# What a layer's backward may keep: "input" (every input tensor), "output" (its output tensor), "mask" (a bool of the
# output's size), "indices" (int64 of the output's size), "residual" (a new tensor of the output's size in the
# activations' dtype, made inside the layer), "channels" (one float32 vector of the output's channels, whatever the
# batch), "copy" (a re-laid-out copy of its input, made inside the layer: Keras's channels-first copy on torch),
# "kernel" (a re-laid-out copy of its kernel, whatever the batch), "positions" (one float32 per position of the
# output, its values over its channels: layer norm's per-position statistics). A tensor two layers keep is counted
# once. A per-example dropout's mask or noise is one value per example, not per output value.
SAVED_KINDS = ("input", "output", "mask", "indices", "residual", "channels", "copy", "kernel", "positions")


@dataclass(frozen=True)
class Rules:
    """One framework's habits, each checked against its source or its saved tensors (see `why`)."""

    saves: dict[str, tuple[str, ...]]  # layer kind -> what its backward keeps (SAVED_KINDS)
    cuda_saves: dict[str, tuple[str, ...]]  # the kinds whose CUDA kernel keeps something else, and what
    in_place_saves: dict[str, tuple[str, ...]]  # the activations that keep something else when run in place
    label_bytes: int  # one integer class label
    explicit_padding: bool  # asymmetric 'same' padding is a padded copy of the input
    pixel_padding: bool  # a conv's or max-pool's padding in pixels is a padded copy of the input (Keras's layers)
    optimizer_state_phase: str  # the phase in which the optimizer state is allocated
    state_before_step: bool  # in that phase it is made before the step's forward pass (Keras's build)
    keeps_gradients: bool  # gradients stay allocated after the step, until the next one clears them
    streams_on: tuple[str, ...]  # the devices where each update runs once its gradient exists: few are live at once
    init_copies: int  # temporaries of the largest random tensor (a parameter or the batch) while it is drawn
    accumulator_copies: int  # gradient accumulation: 0 where gradients add up in place (torch's .grad)
    update_temporaries: dict[tuple[str, str], tuple[str, int]]  # (optimizer, device) -> (of "largest"|"all", copies)
    why: str
    holds_outputs: bool = False  # the model's call keeps every layer's output until it returns (Keras run eagerly)
    recomputes_on: tuple[str, ...] = ("cpu", "cuda")  # the devices whose compiler keeps a checkpoint's recomputation
    keeps_pages_on: tuple[str, ...] = ()  # the devices where what a phase freed stays with the process
    # technique -> the layer kinds whose outputs a checkpoint policy over the whole net keeps; all else is recomputed
    policy_keeps: dict[str, tuple[str, ...]] = field(default_factory=dict)
    in_flight: int = 1  # where updates stream, the gradients (of the largest weight's size) live at once
    cuda_init_copies: int | None = None  # init_copies on a GPU, where it differs
    # the batch is drawn after the weights, straight into its tensor: only the weights' draws make temporaries, and
    # the build's peak is the larger of those (beside the weights) and the batch
    batch_drawn_directly: bool = False
    # what a forward pass tracked for a backward (tracked inference) keeps beyond EVAL_SAVES, where it differs
    tracked_saves: dict[str, tuple[str, ...]] = field(default_factory=dict)
    holds_run_inputs: bool = False  # a recomputed run's inputs stay to the backward's end, not until it passes them
    # the devices where a thread's first matrix multiply allocates a BLAS workspace that then stays allocated
    blas_workspaces_on: tuple[str, ...] = ()
    # the devices whose allocator is XLA's BFC, which counts unsplit chunks when its pool grows (models.bfc)
    bfc_on: tuple[str, ...] = ()
    # how the optimizer's slots are allocated: "at_once" (one compiled init, whose outputs XLA's buffer assignment
    # allocates largest first) or "per_weight" (each weight's slots in turn)
    state_made: str = "at_once"
    # the devices whose allocator is torch's caching allocator, whose segments the driver sees (models.caching)
    caching_on: tuple[str, ...] = ()
    # the techniques whose allocation order `eager_order` follows there; the others keep `_pages_kept`'s floor
    ordered_techniques: tuple[str, ...] = ("none", "inplace", "empty_cache", "accumulate", "tracked")


NEUTRAL_SAVES = {"conv2d": ("input",), "dense": ("input",), "batchnorm": ("input",), "relu": ("output",),
                 "relu6": ("output",), "maxpool2d": ("input",), "avgpool2d": (), "global_avg_pool": (),
                 "dropout": ("mask",), "add": (), "concat": (), "pad": (), "flatten": (), "silu": ("input",),
                 "sigmoid": ("output",), "gelu": ("input",), "layernorm": ("input",), "rescale": (), "normalize": (),
                 "zeropad2d": (), "upsample2d": (), "reshape": (), "multiply": ("input",)}
# In evaluation mode (tracked inference) batch norm normalizes by its running statistics and keeps its input only
# (torch's native_batch_norm with training=False: its save_mean and save_invstd are empty); dropout is the identity.
EVAL_SAVES = {"batchnorm": ("input",)}
BN_CHANNELS = ("channels",) * 4  # the per-channel vectors a composed batch norm's gradient reads (Keras)
TORCH_LAYERNORM = ("input", "positions", "positions")  # native_layer_norm: its input, mean and rstd (torch, Keras)
# jax.vjp's residuals of jax.nn's activations (JAX and Keras on JAX): silu its input, the sigmoid and its derivative;
# sigmoid the derivative (not its output); the exact gelu erfc, exp and a product (not its input)
JAX_ACTIVATIONS = {"silu": ("input", "residual", "residual"), "sigmoid": ("residual",), "gelu": ("residual",) * 3}
# XLA's GPU fusions recompute batch norm's normalized values and ReLU's mask in the backward (JAX and Keras on JAX)
JAX_CUDA_SAVES = {"batchnorm": ("input",), "relu": ("output",), "relu6": ("output",)}
NORMALIZE_DIVISOR = ("channels",)  # the (1, 1, 1, C) max(sqrt(variance), 1e-7) a composed normalization divides by
RULES = {
    "neutral": Rules(
        saves=NEUTRAL_SAVES, cuda_saves={}, in_place_saves={}, label_bytes=INT64, explicit_padding=False,
        pixel_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=False, keeps_gradients=False, streams_on=(),
        init_copies=0, accumulator_copies=0, update_temporaries={},
        why="no framework named: what a backward pass needs at least: each weighted layer (conv, dense, batch norm)"
            " keeps its input, ReLU and ReLU6 their output, max-pool its input, dropout a boolean mask (one per example"
            " when per example); SiLU and GELU their input, sigmoid its output, layer norm its input, multiply its"
            " inputs; average pooling, the global mean, add, concat, rescale, normalize (its statistics fixed), zero"
            " padding, upsampling and reshape are linear and keep nothing; every gradient is live at the update, which"
            " allocates nothing"),
    "torch": Rules(
        saves=NEUTRAL_SAVES | {"maxpool2d": ("input", "indices"), "relu6": ("input",), "avgpool2d": ("input",),
                               "batchnorm": ("input", "channels", "channels"), "dropout": ("residual",),
                               "layernorm": TORCH_LAYERNORM, "normalize": NORMALIZE_DIVISOR},
        cuda_saves={"dropout": ("mask",)}, in_place_saves={"relu6": ("residual",)}, label_bytes=INT64,
        explicit_padding=True, pixel_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=False, keeps_gradients=True, streams_on=(),
        init_copies=0, blas_workspaces_on=("cuda",), keeps_pages_on=("cuda",), caching_on=("cuda",),
        ordered_techniques=tuple(techniques.TECHNIQUES),  # checkpoint and autocast as autograd runs them
        accumulator_copies=0, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("all", 1)},
        why="saved tensors as listed by autograd's saved_tensors_hooks: conv (depthwise too) and linear keep their"
            " input, ReLU its output, max_pool2d its input and int64 indices (its padding is inside the op);"
            " native_batch_norm its input and the per-channel save_mean and save_invstd (its weight and running"
            " statistics are the module's own); hardtanh (ReLU6) its input, and in place (hardtanh_, whose formula"
            " reads the original input) a clone of it, so in place it keeps as much (relu_ keeps its result);"
            " avg_pool2d its input; add, cat and the mean over H and W nothing; dropout on the CPU multiplies by a"
            " float noise tensor it keeps, on CUDA the fused native_dropout keeps a bool mask (torchgen's"
            " derivatives.yaml: result1; not run here), per example (a mul by (N, 1, 1, 1) noise) the noise only;"
            " silu and gelu keep their input, sigmoid its output, native_layer_norm its input and per-position mean"
            " and rstd, mul both inputs (a broadcast one is small), a normalization its per-channel divisor (its"
            " statistics fixed); a scalar affine, constant_pad_nd, upsample_nearest2d, upsample_bilinear2d and a"
            " view keep nothing but shapes, avg_pool2d its input with its padding inside (measured with the hooks on"
            " the CPU, no GPU figure yet); ZeroPad2d's padded copy replaces the conv input where 'same' is"
            " uneven, integer padding is inside the conv; Adam's state arrives in the first step(); on the CPU Adam"
            " runs per tensor (sqrt and divide make two temporaries of the largest parameter), on CUDA it is foreach"
            " (_foreach_sqrt makes one temporary of every parameter); gradients stay until zero_grad; these are the"
            " eager rules: under torch.compile Inductor's partitioner chooses what the backward keeps (it may"
            " recompute cheap ops instead), reduce-overhead adds CUDA graphs' private pool, and compiled code and"
            " compile children add host memory, none of which the rules count (the report's error per mode shows"
            " the difference); on CUDA a thread's first matrix multiply (linear) takes a cuBLAS workspace from the"
            " caching allocator that stays allocated (ATen's CublasHandlePool keeps one per handle and stream;"
            " autograd runs the backward on a device thread of its own, so training holds two, the backward's from"
            " the last linear layer's gradient on); its size is the card's (32 MiB on an H100: the probe's allocator"
            " figure beyond its tensors, which the constants measure) and convolutions take none; on CUDA the"
            " driver sees the caching allocator's segments, simulated (models.caching) over the order the eager"
            " step allocates in (models.eager), so a phase holds the blocks the ones before it freed and the"
            " segments its own order splits, unless empty_cache returned them (cuDNN's workspaces are not in the"
            " order; the recomputing and casting techniques keep the phase before's peak as the least)"),
    "keras-tensorflow": Rules(
        saves=NEUTRAL_SAVES | {"maxpool2d": ("input", "output"), "batchnorm": ("input", *BN_CHANNELS),
                               "gelu": ("residual",) * 3, "layernorm": ("input", "residual", *("positions",) * 3),
                               "normalize": NORMALIZE_DIVISOR},
        cuda_saves={}, in_place_saves={}, label_bytes=4, explicit_padding=False, pixel_padding=True,
        keeps_pages_on=("cpu",), holds_run_inputs=True, bfc_on=("cuda",), state_made="per_weight",
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False, streams_on=("cpu", "cuda"),
        init_copies=2,
        accumulator_copies=1, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("largest", 2),
                            ("sgd", "cpu"): ("largest", 1), ("sgd", "cuda"): ("largest", 1),
                            ("momentum", "cpu"): ("largest", 1), ("momentum", "cuda"): ("largest", 1)},
        why="gradient functions (nn_grad.py, math_grad.py; the forward tensors the traced step's gradient ops read):"
            " Conv2D, DepthwiseConv2dNative and MatMul keep their input, Relu and Relu6 their output, MaxPool its input"
            " and output, AvgPool, Mean, AddV2 and ConcatV2 only shapes; Keras's BatchNormalization is composed"
            " (tf.nn.moments, tf.nn.batch_normalization): SquaredDifference and Mul keep its input plus per-channel"
            " mean, rsqrt and scale (not the fused kernel; grappler might still rewrite it); stateless_dropout keeps"
            " the bool keep-mask of its SelectV2 (per example, an (N, 1, 1, 1) one); silu's custom gradient keeps its"
            " input, SigmoidGrad the output; Keras's composed ops (the forward tensors the traced step's gradient"
            " reads, on the CPU): gelu erfc and two products, layer norm its input, its scale times rsqrt (of the"
            " input's size) and three per-position tensors, normalization its per-channel divisor, Mul both inputs;"
            " Pad, Tile (nearest upsampling), Reshape and the mean nothing (bilinear's ResizeBilinearGrad reads its"
            " input for the shape, which the rules do not count); Keras pads integer padding (a conv's, an average"
            " pool's) with ZeroPadding2D and max-pool padding"
            " with a -inf pad layer, padded copies whose Pad gradient keeps nothing (XLA, where Keras compiles with it,"
            " may fold them into the conv); Keras builds the optimizer's variables at the first train_on_batch, before"
            " the step runs (Trainer._symbolic_build); the traced step is a dataflow graph, so each variable's update"
            " runs once its gradient exists and gradients are not all live at once (one largest in flight); measured"
            " on the CPU, cause not found: the process keeps the pages a phase freed (resnet50 at batch 8: RSS stays"
            " at the train step's 2.0 GiB while the allocator's current bytes fall to 330 MiB; in the 54 committed CPU"
            " records no phase's peak fell more than 73 MiB below an earlier one's), so a phase's host peak is taken"
            " as at least the one before it"
            " (retained pages; not in the allocator's view); Keras's"
            " Adam update keeps two temporaries of a variable; drawing a random tensor (initializer or batch) makes two"
            " temporaries of it; measured on the CPU, a recomputed run's inputs (tf.recompute_grad's) stay until the"
            " backward ends (resnet50's checkpoint step: 673 MiB, 711 estimated so, 577 if each were freed once the"
            " backward passed it)"),
    "jax": Rules(
        saves=NEUTRAL_SAVES | {"relu": ("mask",), "relu6": ("mask",), "batchnorm": ("residual",) * 3, **JAX_ACTIVATIONS,
                               "layernorm": ("residual",) * 3 + ("positions",) * 3, "normalize": NORMALIZE_DIVISOR},
        cuda_saves=JAX_CUDA_SAVES, in_place_saves={},
        label_bytes=4, explicit_padding=False, pixel_padding=False, in_flight=5, cuda_init_copies=0, bfc_on=("cuda",),
        optimizer_state_phase="compile", state_before_step=False, keeps_gradients=False, streams_on=("cuda",),
        init_copies=2,
        accumulator_copies=1, update_temporaries={}, policy_keeps={"bnrelu": ("conv2d",)}, recomputes_on=("cuda",),
        tracked_saves={"batchnorm": ("residual", "channels", "channels"), "relu": ("mask", "residual")},
        why="jax.vjp residuals (jax.ad_checkpoint.print_saved_residuals): conv (grouped too) and dot keep their input,"
            " relu's and relu6's jvp a boolean mask, reduce_window max its operand (padding inside); avg pooling, the"
            " mean, add and concatenate are linear and keep nothing; dropout's where keeps its bool mask; the plain-jnp"
            " batch norm keeps three tensors of its size (2(x - mean) from the variance's square, x - mean, and the"
            " normalized x), which XLA's CPU buffers confirm (+3 activations per batch norm, per-channel vectors"
            " negligible); measured on XLA's CPU, ReLU after batch norm costs nothing and a lone ReLU a float"
            " activation rather than a bool mask, dropout about two: the rules keep the residuals; the newer kinds'"
            " residuals (measured on the CPU, no GPU figure yet): silu its input, the sigmoid and its derivative,"
            " sigmoid the derivative, the exact gelu three tensors of its size (erfc, exp, a product; the tanh gelu its"
            " input and four), the plain-jnp layer norm three of its size and three per position (XLA's CPU plan keeps"
            " about one: the rules keep the residuals), normalize its per-channel divisor, mul both inputs; the scalar"
            " affine, pad, resize (its index or weight vectors are small) and reshape nothing; a per-example dropout"
            " mask is one value per example (XLA fuses its broadcast: +0 activations in the plan), and an average"
            " pool's jnp.pad fuses into reduce_window (the plan's temp grows 0.06 of the map), so its padding is inside"
            " the op; bnrelu is estimated"
            " by the adapter's policy: one jax.checkpoint over the net keeping only conv outputs, everything else"
            " recomputed one layer at a time; XLA on the CPU keeps what jax.checkpoint would recompute (its own"
            " memory_analysis() plans the same temp bytes with and without: resnet50 1,450 and 1,454 MiB, densenet121"
            " 1,976 both; on the H100 plain-16's fell from 136 to 50 MiB), so there the recomputing techniques are"
            " estimated as none; optax's state is created in compile (optimizer.init); the update is"
            " fused into the jitted step with parameters and state donated, so it adds no temporaries; jax.random"
            " makes bits then floats: two temporaries of the tensor drawn at build; these are the rules of the"
            " jitted step: op by op (jax.disable_jit) nothing is fused, and the rules do not count what that adds;"
            " on a GPU XLA's plan differs (compiled memory_analysis() in the H100 run at ec3adfa, which the"
            " allocator's peak matches to the byte): its fusions recompute batch norm's normalized values and ReLU's"
            " mask in the backward pass, so a batch norm keeps only its input and a ReLU its output (the next conv's"
            " input); each parameter's update runs once its gradient exists, with about five gradients of the"
            " largest weight's size in flight (the plans' temp beyond the activations: 4.7 on keras200m, 5.2 and"
            " 5.7 on resnet50 at batch 16 and 8; fitted there, not derived); and the random draws are fused into one"
            " kernel that writes the tensor, so drawing makes no temporary; with the pool off (noprealloc) the BFC"
            " allocator's in-use figure counts the chunks it did not split (models.bfc, simulated in the adapter's"
            " order: each layer's weights, the batch, optax's state as one program's outputs, largest first);"
            " tracked inference (jax.vjp over the jitted forward) keeps every residual partial evaluation names, none"
            " fused away: a batch norm in evaluation mode its scaled difference and two per-channel vectors, a ReLU"
            " its mask and a zero tensor of its size (jax.nn.relu's jvp selects from one); resnet50's pullback at"
            " batch 2 holds 262,900,224 bytes beyond the weights and the batch, the estimate's figure, and the H100"
            " peaked at the weights, the batch and 2,004 MiB of them at batch 16"),
    "keras-jax": Rules(
        saves=NEUTRAL_SAVES | {"relu": ("mask",), "relu6": ("mask",), **JAX_ACTIVATIONS,
                               "layernorm": ("input", "residual", "residual", *("positions",) * 4),
                               "normalize": NORMALIZE_DIVISOR},
        cuda_saves=JAX_CUDA_SAVES, in_place_saves={}, label_bytes=4, explicit_padding=False, pixel_padding=True,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False,
        streams_on=("cuda",), in_flight=5, init_copies=2, cuda_init_copies=0, accumulator_copies=1,
        update_temporaries={}, recomputes_on=("cuda",), bfc_on=("cuda",), state_made="per_weight",
        why="JAX's autodiff under Keras: the jax rules for what is saved, except batch norm: Keras's composed"
            " batch_normalization (x * inv + (offset - mean * inv)) keeps its input; jnp.var also leaves x - mean as a"
            " residual, which XLA recomputes from the input (on its CPU buffers: +1 activation per batch norm, not 2);"
            " dropout's lax.select keeps the bool mask (per example, its broadcast, which XLA fuses); Keras's"
            " activations as the jax rules'; its composed layer norm (print_saved_residuals on the CPU) keeps its"
            " input, x - mean, its scale times rsqrt (of the input's size) and four per-position tensors, its"
            " normalization the per-channel divisor; keras.remat is jax.checkpoint, which XLA on the CPU does not"
            " honour (see jax); Keras pads integer padding (a conv's, an average pool's) with ZeroPadding2D and"
            " max-pool"
            " padding with a -inf pad layer, padded copies (XLA may fold a zero pad into the conv); Keras builds the"
            " optimizer's variables at the first train_on_batch, before the step runs; its JAX trainer jits loss,"
            " gradients and the optimizer's stateless update into one step, so the update adds no temporaries;"
            " keras.random on JAX draws bits then floats: two temporaries of the tensor drawn; on a GPU (the H100 run"
            " at c3d4247, where Keras on JAX was measured right) the step is XLA's plan as in jax: batch norm keeps"
            " its input, ReLU its output, about five gradients of the largest weight are in flight, the draws write"
            " their tensor directly (keras200m's train step 2,541 MiB measured, 2,545 so estimated; 3,152 with every"
            " gradient live), and the optimizer makes each weight's slots in turn (add_optimizer_variables)"),
    "keras-torch": Rules(
        saves=NEUTRAL_SAVES | {"conv2d": ("copy", "kernel"), "maxpool2d": ("copy", "indices"), "relu6": ("input",),
                               "avgpool2d": ("copy",), "batchnorm": ("input", "residual", *BN_CHANNELS[:3]),
                               "layernorm": TORCH_LAYERNORM, "normalize": NORMALIZE_DIVISOR},
        cuda_saves={}, in_place_saves={}, label_bytes=4, explicit_padding=True, pixel_padding=True, holds_outputs=True,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=True,
        streams_on=(), init_copies=2, batch_drawn_directly=True, accumulator_copies=1, blas_workspaces_on=("cuda",),
        keeps_pages_on=("cuda",),
        caching_on=("cuda",),
        update_temporaries={("adam", "cpu"): ("all", 3), ("adam", "cuda"): ("all", 3)},
        why="torch's autograd under Keras (saved_tensors_hooks on each Keras layer): the torch rules for dense,"
            " ReLU, ReLU6, add and concat; a conv (depthwise too) or a pool keeps Keras's channels-first copy of its"
            " input and of its kernel (keras/src/backend/torch/nn.py: permute, then a contiguous channels_last"
            " copy), tensors of their own beside the"
            " channels-last input a ReLU may keep too (for an uneven 'same' padding, the padded copy made from it);"
            " run eagerly, Keras's Functional keeps every layer's output in its tensor_dict until the call returns"
            " (keras/src/ops/function.py, _run_through_graph), so inference holds them all at once and training holds"
            " the unsaved ones too at the forward's end; Keras's composed batch norm keeps its input for the"
            " variance's square, a clone of x - mean (the in-place mul_ needs the original) and three per-channel"
            " vectors;"
            " the seeded dropout is torch.where on a"
            " bool mask, which it keeps (per example, an (N, 1, 1, 1) one); SiLU, GELU, sigmoid and multiply as"
            " torch's; LayerNormalization calls torch's layer_norm (input, per-position mean and rstd); Normalization"
            " keeps its per-channel divisor, Rescaling a scalar; ZeroPadding2D, UpSampling2D and Reshape nothing (hooks"
            " on the CPU, no GPU figure yet); Keras pads uneven 'same' convolutions, integer padding (ZeroPadding2D, an"
            " average pool's too) and"
            " max-pool padding (a -inf pad layer) explicitly; Keras builds the optimizer's variables at the first"
            " train_on_batch, before the step runs; gradients stay in .grad until the next step zeroes them; Keras's"
            " torch Adam runs torch._foreach ops over every variable: three temporaries of every parameter live at once"
            " (taken from keras200m's measured step on the CPU, 5,589 MiB against 4,743 with two); keras.random on"
            " torch draws then scales: two temporaries; on CUDA its matrix multiplies take torch's cuBLAS"
            " workspaces (see torch)"),
}


@dataclass(frozen=True)
class Step:
    """One operation as a framework runs it: elements per example in and out, its weight bytes."""

    kind: str
    layer: int  # the spec layer it belongs to
    inputs: int  # every input together
    outputs: int
    weight_bytes: int  # trainable
    largest_weight: int
    sources: tuple[int, ...] = (INPUT,)  # the steps it reads (INPUT: the model's input)
    channels: int = 0  # the output's last axis


def _padding(layer: LayerShapes, rules: Rules) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(top, bottom), (left, right) where the framework pads a copy of the layer's input; None where the op pads."""
    op = layer.layer
    if isinstance(op, Conv2D) and op.padding == "same" and rules.explicit_padding:
        (top, bottom), (left, right) = (same_padding(size, op.kernel, op.stride) for size in layer.input_shape[:2])
        return ((top, bottom), (left, right)) if (top, left) != (bottom, right) else None
    pixels = op.padding if isinstance(op, (Conv2D, MaxPool2D, AvgPool2D)) and not isinstance(op.padding, str) else 0
    return ((pixels, pixels), (pixels, pixels)) if rules.pixel_padding and pixels else None


def steps(spec: ModelSpec, rules: Rules, bytes_per_value: int) -> list[Step]:
    """The spec's layers as the framework runs them: a padding copy before a layer where the framework makes one
    (torch where 'same' is uneven, Keras for padding in pixels)."""
    result: list[Step] = []
    made = {INPUT: INPUT}  # spec layer -> the step that makes its output
    for layer in spec.walk():
        sources = tuple(made[source] for source in layer.inputs)
        inputs = sum(math.prod(shape) for shape in layer.input_shapes)
        padding = _padding(layer, rules)
        if padding:
            (top, bottom), (left, right) = padding
            h, w, c = layer.input_shape
            result.append(Step("pad", layer.index, inputs, (h + top + bottom) * (w + left + right) * c, 0, 0,
                               sources, c))
            sources, inputs = (len(result) - 1,), result[-1].outputs
        weights = [math.prod(shape) * bytes_per_value for shape in layer.params.values()]
        result.append(Step(layer.layer.kind, layer.index, inputs, math.prod(layer.output_shape), sum(weights),
                           max(weights, default=0), sources, layer.output_shape[-1]))
        made[layer.index] = len(result) - 1
    return result


@dataclass(frozen=True)
class _Tensors:
    """The tensors a run of steps makes, each named by the step that makes it (INPUT: the model's input); a view
    or in-place step makes none: its output is its input."""

    reads: list[tuple[int, ...]]  # per step, the tensors it reads
    makes: list[int]  # per step, the tensor its output is
    elements: dict[int, int]  # per example
    last_reader: dict[int, int]  # the last step reading each tensor; the net's output is read by the loss, after all
    first_reader: dict[int, int]  # the first step reading each tensor; the loss's, after all, if none reads the output


def _tensors(spec: ModelSpec, ops: list[Step], views: set[int]) -> _Tensors:
    reads: list[tuple[int, ...]] = []
    makes: list[int] = []
    for index, op in enumerate(ops):
        reads.append(tuple(INPUT if source == INPUT else makes[source] for source in op.sources))
        makes.append(reads[-1][0] if index in views else index)
    elements = {INPUT: math.prod(spec.input_shape)} | {index: op.outputs for index, op in enumerate(ops)
                                                       if index not in views}
    last_reader = {tensor: -1 for tensor in elements}
    first_reader: dict[int, int] = {}
    for index, tensors in enumerate(reads):
        for tensor in tensors:
            first_reader.setdefault(tensor, index)
            last_reader[tensor] = index
    last_reader[makes[-1]] = len(ops)
    first_reader.setdefault(makes[-1], len(ops))
    return _Tensors(reads, makes, elements, last_reader, first_reader)


def _views(spec: ModelSpec, ops: list[Step], technique: str, training: bool) -> set[int]:
    """The steps that make no tensor: flatten and reshape, the activations run in place, dropout where it is the
    identity."""
    in_place = techniques.in_place(spec, technique)
    return {index for index, op in enumerate(ops) if op.kind in ("flatten", "reshape")
            or (op.kind in ("relu", "relu6") and op.layer in in_place)
            or (op.kind == "dropout" and not (training and spec.layers[op.layer].rate))}


def _over_steps(count: int, spans: Iterable[tuple[int, int, int]]) -> list[int]:
    """Per step in range(count), the total of the amounts whose span of steps [start, stop) covers it. A difference
    array: its cost is the steps plus the spans, where adding up every span at every step grows with depth squared."""
    change = [0] * (count + 1)
    for start, stop, amount in spans:
        start, stop = max(start, 0), min(stop, count)
        if start < stop:
            change[start] += amount
            change[stop] -= amount
    return list(accumulate(change[:count]))


def _live(tensors: _Tensors, count: int) -> list[int]:
    """Per step, the elements of the tensors live while it runs forward: made by then and read by it or later."""
    return _over_steps(count, ((tensor, tensors.last_reader[tensor] + 1, elements)
                               for tensor, elements in tensors.elements.items()))


def _spanning(tensors: _Tensors, count: int) -> list[int]:
    """Per step, the elements of the tensors made before it and read after it (a skip connection's), whose gradients
    its backward finds live; the model's input has none."""
    return _over_steps(count, ((tensor + 1, tensors.last_reader[tensor], elements)
                               for tensor, elements in tensors.elements.items() if tensor != INPUT))


def _gradients(tensors: _Tensors, index: int, view: bool, spanning: int) -> int:
    """The elements of the activation gradients live during step `index`'s backward: those of the tensors made before
    it and read after it (`spanning`, from `_spanning`), and its output's and its inputs' (the model's input has
    none); a view or in-place step is counted as making no gradient of its own."""
    def spans(tensor: int) -> bool:  # already counted in `spanning`
        return tensor != INPUT and tensor < index < tensors.last_reader[tensor]

    if view:
        mine = tensors.makes[index]
        return spanning - (tensors.elements[mine] if spans(mine) else 0)
    own = {tensors.makes[index], *tensors.reads[index]} - {INPUT}
    return spanning + sum(tensors.elements[tensor] for tensor in own if not spans(tensor))


def _pending(group: list[int | None], kept: Iterable[tuple[list[int], int]]) -> list[int]:
    """Per step, the bytes the backward holds there of what steps keep for it (`kept`: each thing's keeping steps and
    its bytes). A thing is held at step `index` while a step keeping it, at or before `index`, is outside every
    recomputed run or in `index`'s own run (runs are recomputed one at a time).

    One sweep, not every thing tested at every step: a thing counts from its first keeper outside every run on, and
    inside a run from its first keeper there up to that point."""
    count = len(group)
    changes: dict[int, list[tuple[int | None, int]]] = {}  # step -> (run or None for outside, bytes) from there on
    for keepers, amount in kept:
        outside = min((step for step in keepers if group[step] is None), default=count)
        firsts: dict[int, int] = {}  # run -> its first keeper
        for step in keepers:
            run = group[step]
            if run is not None and step < firsts.get(run, count):
                firsts[run] = step
        changes.setdefault(outside, []).append((None, amount))
        for run, first in firsts.items():
            if first < outside:
                changes.setdefault(first, []).append((run, amount))
                changes.setdefault(outside, []).append((run, -amount))
    held: dict[int | None, int] = {None: 0}  # run (None: outside every run) -> bytes held from it
    result = []
    for index, run in enumerate(group):
        for where, amount in changes.get(index, ()):
            held[where] = held.get(where, 0) + amount
        result.append(held[None] + (held.get(run, 0) if run is not None else 0))
    return result


def _extra_bytes(what: str, op: Step, per_example: bool, batch: int, value: int) -> int:
    """A saved value that is not one of the net's tensors, in bytes for the batch (`value`: one activation's);
    `per_example`: the step draws one value per example (a per-example dropout's mask or noise)."""
    if what == "channels":
        return op.channels * FLOAT32
    if what == "copy":
        return op.inputs * value
    if what == "kernel":
        return op.largest_weight
    if what == "positions":
        return op.outputs // op.channels * batch * FLOAT32
    values = 1 if per_example else op.outputs
    return values * {"mask": batch * BOOL, "indices": batch * INT64, "residual": value}[what]


def _inside(spec: ModelSpec, ops: list[Step], index: int) -> bool:
    """Whether step `index` is made inside a layer's own op, not as a layer's output: the padded copy a framework
    makes for an uneven 'same' padding (a pixel padding is Keras's own ZeroPadding2D layer)."""
    return (index != INPUT and ops[index].kind == "pad"
            and getattr(spec.layers[ops[index].layer], "padding", "") == "same")


def _held_peak(spec: ModelSpec, ops: list[Step], tensors: _Tensors, group: list[int | None]) -> int:
    """The most values a call holds at once without gradient tracking (per example): every layer output made so
    far outside a recomputed run, plus the outputs inside the run being called (a run is one Keras layer whose call
    holds its own outputs until it returns)."""
    held = _held(spec, ops, tensors, group)
    outer = inner = peak = 0
    for index in range(len(ops)):
        made = tensors.makes[index]
        if made != index or _inside(spec, ops, index):
            continue
        if group[index] is None or index == 0 or group[index] != group[index - 1]:
            inner = 0
        if group[index] is None:
            outer += tensors.elements[made]
        else:
            inner += tensors.elements[made]
        peak = max(peak, outer + inner)
        if group[index] is not None and made in held:  # the run's output outlives the run's call
            outer, inner = outer + tensors.elements[made], inner - tensors.elements[made]
    return peak


def _held(spec: ModelSpec, ops: list[Step], tensors: _Tensors, group: list[int | None]) -> set[int]:
    """The layer outputs a model's call keeps until it returns (Keras's eager Functional): every tensor made outside
    a recomputed run, and each run's output (a tensor of a run that a step outside it reads); not the batch (counted
    with the inputs) nor an op's inner copies."""
    ends = {tensor for reader, read in enumerate(tensors.reads) for tensor in read
            if tensor != INPUT and group[tensor] is not None and group[reader] != group[tensor]}
    return {tensors.makes[index] for index in range(len(ops)) if (group[index] is None or index in ends)
            and tensors.makes[index] == index and not _inside(spec, ops, index)}


@dataclass(frozen=True)
class Activations:
    """What the backward pass keeps and what is in flight, in bytes for the whole batch."""

    saved: int  # every tensor kept for the backward pass, at the end of the forward
    backward_peak: int  # the largest live set during the backward (saved so far + live gradients + weight grads)
    backward_saved: int  # of which saved tensors
    backward_gradients: int  # of which weight gradients already produced
    inference_transient: int  # the tensors live at once at a step, with no gradient tracking
    backward_workspaces: int = 0  # the BLAS workspaces allocated by the backward's peak (not in backward_peak)
    inference_workspaces: int = 0  # those allocated by the forward's peak (not in inference_transient)


def _saved_by(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: _Tensors, views: set[int],
              saves: dict[str, tuple[str, ...]], batch: int, value: int) -> tuple[dict[int, list[int]], list[int]]:
    """What each step's backward keeps: the net's tensors it keeps (tensor -> the steps keeping it), and per step the
    bytes it keeps that are no tensor of the net's (masks, indices, copies)."""
    savers: dict[int, list[int]] = {}
    extras = [0] * len(ops)
    for index, op in enumerate(ops):
        in_place = op.kind in ("relu", "relu6") and index in views
        for what in rules.in_place_saves.get(op.kind, saves[op.kind]) if in_place else saves[op.kind]:
            if what == "copy" and _inside(spec, ops, op.sources[0]):
                what = "input"  # the op's own padded copy is already channels-first: the op keeps that
            if what in ("input", "output"):
                for tensor in tensors.reads[index] if what == "input" else (tensors.makes[index],):
                    if tensor != INPUT:  # the batch itself is counted with the inputs
                        savers.setdefault(tensor, []).append(index)
            else:
                per_example = getattr(spec.layers[op.layer], "per_example", False)
                extras[index] += _extra_bytes(what, op, per_example, batch, value)
    return savers, extras


def _keeping(spec: ModelSpec, rules: Rules, ops: list[Step], technique: str, device: str, batch: int,
             value: int) -> tuple[set[int], _Tensors, dict[int, list[int]], list[int]]:
    """The views and tensors the steps make under `technique` (in place, tracked: evaluation mode) and what each
    step's backward keeps of them (`_saved_by`), shared by the estimate and its per-layer table."""
    training = technique != "tracked"
    saves = rules.saves | (rules.cuda_saves if device == "cuda" else {})
    saves = saves if training else saves | EVAL_SAVES | rules.tracked_saves
    views = _views(spec, ops, technique, training)
    tensors = _tensors(spec, ops, views)
    return views, tensors, *_saved_by(spec, rules, ops, tensors, views, saves, batch, value)


def kept_by_layer(spec: ModelSpec, rules: Rules, batch: int, bytes_per_value: int, technique: str = "none",
                  activation_bytes: int | None = None, device: str = "cpu") -> tuple[list[int], int]:
    """Per spec layer, the bytes its backward keeps for the batch (a tensor two layers keep counted at the first,
    a padded copy at its layer), and the loss's residual: what `activations` counts as saved with nothing
    recomputed, laid out so a person can see which layers hold the memory."""
    ops = steps(spec, rules, bytes_per_value)
    value = batch * (activation_bytes or bytes_per_value)
    _, tensors, savers, extras = _keeping(spec, rules, ops, technique, device, batch, value)
    per_layer = [0] * len(spec.layers)
    for tensor, keepers in savers.items():
        per_layer[ops[min(keepers)].layer] += value * tensors.elements[tensor]
    for index, extra in enumerate(extras):
        per_layer[ops[index].layer] += extra
    return per_layer, ops[-1].outputs * value


def _recomputed(spec: ModelSpec, rules: Rules, ops: list[Step], tensors: _Tensors,
                technique: str) -> tuple[set[int], list[int | None]]:
    """The tensors kept for a recomputation (each run's inputs from outside it, or the outputs a policy keeps) and
    the recomputed run of each step (None outside every run)."""
    made = {op.layer: index for index, op in enumerate(ops)}
    if technique in rules.policy_keeps:  # a policy over the net: the named kinds' outputs kept, every layer recomputed
        runs = [range(layer, layer + 1) for layer in range(len(spec.layers))]
        kept = {tensors.makes[made[layer]] for layer, kind in enumerate(spec.layers)
                if kind.kind in rules.policy_keeps[technique]}
    else:  # each run's inputs from outside it: `techniques.boundary`'s sources, without the readers it finds per run
        runs = techniques.segments(spec, technique) if technique in techniques.RECOMPUTING else []
        kept = {tensors.makes[made[source]] for run in runs for layer in run for source in spec.layer_inputs(layer)
                if source not in run and source != INPUT}
    run_of = {layer: number for number, run in enumerate(runs) for layer in run}
    return kept - {INPUT}, [run_of.get(op.layer) for op in ops]


def activations(spec: ModelSpec, rules: Rules, batch: int, bytes_per_value: int, technique: str = "none",
                activation_bytes: int | None = None, device: str = "cpu", workspace: int = 0, *,
                ops: list[Step] | None = None) -> Activations:
    """Saved tensors and the backward's peak; `activation_bytes` differs from the weights' under mixed precision.

    `workspace`: one BLAS workspace's bytes where the rules allocate them on this device (a measured constant), each
    thread's from its first matrix multiply on: the forward's, and in training the backward's from the last dense
    layer's gradient on (a first step's timing; later steps find both allocated). Which moment is the peak depends on
    it: a net whose only dense layer comes last (ResNet-50) takes it after its largest activations are freed.

    The net runs as a graph: each tensor lives from the step that makes it to its last reader, and what a step's
    backward keeps (`rules.saves`) lives until that step is back-propagated. The recomputing techniques
    (`techniques.segments`) keep only each run's inputs from outside it; a run's own saved tensors exist again while
    its backward runs, one run at a time. Tracked inference runs in evaluation mode. Each figure per step comes from
    one sweep over the steps, so the cost grows with depth, not its square; `ops`: `steps(spec, rules,
    bytes_per_value)` where the caller has them already.
    """
    ops = steps(spec, rules, bytes_per_value) if ops is None else ops
    value = batch * (activation_bytes or bytes_per_value)
    views, tensors, savers, extras = _keeping(spec, rules, ops, technique, device, batch, value)
    # the difference (mse) or the softmax (cross-entropy); a tracked forward has no loss
    loss_residual = ops[-1].outputs * value if technique != "tracked" else 0
    kept, group = _recomputed(spec, rules, ops, tensors, technique)
    kept_always = sum(tensors.elements[tensor] for tensor in kept) * value
    savers = {tensor: steps_ for tensor, steps_ in savers.items() if tensor not in kept}
    saved = loss_residual + kept_always + value * sum(
        tensors.elements[tensor] for tensor, steps_ in savers.items() if any(group[s] is None for s in steps_))
    saved += sum(extra for index, extra in enumerate(extras) if group[index] is None)
    count = len(ops)
    # a kept tensor is freed once the backward has passed every step that reads it (its run's recomputation included)
    held_inputs = _over_steps(count, ((-1 if rules.holds_run_inputs else tensors.first_reader[tensor], count,
                                       value * tensors.elements[tensor]) for tensor in kept))
    pending = _pending(group, [*((steps_, value * tensors.elements[tensor]) for tensor, steps_ in savers.items()),
                               *(([index], extra) for index, extra in enumerate(extras) if extra)])
    spanning = _spanning(tensors, count)
    largest = max((o.largest_weight for o in ops), default=0)
    matmuls = [index for index, op in enumerate(ops) if op.kind == "dense"] if workspace else []
    forward_workspace = workspace if matmuls else 0  # the forward is over: its thread's workspace exists
    worst, after = (0, 0, 0, 0), 0
    for index in reversed(range(count)):
        held = held_inputs[index] + pending[index]
        grads = min(after, largest * rules.in_flight) if device in rules.streams_on else after
        flowing = value * _gradients(tensors, index, index in views, spanning[index])
        libraries = forward_workspace + (workspace if matmuls and index <= matmuls[-1] else 0)
        worst = max(worst, (held + flowing + grads + libraries, held, grads, libraries))
        after += ops[index].weight_bytes
    if rules.holds_outputs:  # at the forward's end the call still holds the outputs nothing saved
        kept_tensors = kept | {tensor for tensor, steps_ in savers.items() if any(group[s] is None for s in steps_)}
        unsaved = _held(spec, ops, tensors, group) - kept_tensors
        held_outputs = saved + value * sum(tensors.elements[tensor] for tensor in unsaved)
        worst = max(worst, (held_outputs + forward_workspace, saved, 0, forward_workspace))
    infer_views = _views(spec, ops, technique, training=False)
    forward = tensors if infer_views == views else _tensors(spec, ops, infer_views)
    live = [elements * value for elements in _live(forward, count)]  # bytes
    def forward_held(index: int) -> int:  # the forward thread's workspace, once it has multiplied
        return workspace if matmuls and index >= matmuls[0] else 0

    if technique == "tracked":  # beyond what the backward needs (kept from its step on), what else is live when
        unsaved = _over_steps(count, ((tensor, forward.last_reader[tensor] + 1, elements)
                                      for tensor, elements in forward.elements.items() if tensor not in savers))
        unmade = _over_steps(count, ((0, tensor, elements) for tensor, elements in forward.elements.items()
                                     if tensor in savers))
        extras_after = [*list(accumulate(reversed(extras)))[-2::-1], 0]  # kept by the steps after each
        live = [value * (unsaved[index] - unmade[index]) - extras_after[index] for index in range(count)]
    # (0, 0) where every step is a view: nothing is made beside the batch (counted with the inputs)
    transient = max(((max(live[index], 0) + forward_held(index), forward_held(index))
                     for index in range(count) if index not in infer_views), default=(0, 0))
    if rules.holds_outputs:  # the call holds every output until it returns: its peak is at the end, past any matmul
        transient = max(transient, (value * _held_peak(spec, ops, forward, group) + forward_workspace,
                                    forward_workspace))
    return Activations(saved, max(worst[0] - worst[3], saved), worst[1], worst[2], transient[0] - transient[1],
                       worst[3], transient[1])


@dataclass(frozen=True)
class PhaseEstimate:
    name: str
    moment: str  # what is happening at the phase's peak
    items: dict[str, int] = field(default_factory=dict)  # category -> bytes (analytic)

    @property
    def total(self) -> int:
        return sum(self.items.values())


@dataclass(frozen=True)
class Estimate:
    """Per phase, the bytes live at its peak by category, plus the physical floor and the hand count."""

    model: str
    framework: str
    kind: str
    batch: int
    optimizer: str
    dtype: str
    device: str
    technique: str
    rules: str
    phases: tuple[PhaseEstimate, ...]
    floor: int
    activation_values_per_example: int  # the input and every layer output, activations in place (CS231n's)
    param_count: int
    layers: int  # the spec's layers: a runtime that grows with depth is measured per layer (suites.analysis.constants)

    @property
    def peak(self) -> PhaseEstimate:
        return max(self.phases, key=lambda p: p.total)

    def phase(self, name: str) -> PhaseEstimate | None:
        return next((p for p in self.phases if p.name == name), None)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["phases"] = {p.name: {"moment": p.moment, "items": p.items, "total": p.total} for p in self.phases}
        return data


def hand_count(spec: ModelSpec) -> int:
    """Activation values per example as hand counts do it: the input and each layer's output, activations (the
    element-wise layers) in place, flatten, reshape and dropout (the identity in inference) making no new values."""
    return math.prod(spec.input_shape) + sum(math.prod(s.output_shape) for s in spec.walk() if s.layer.kind not in
                                             (*ELEMENTWISE, "flatten", "reshape", "dropout"))


# The steps that must write a new tensor beside the one they read (no library runs them in place) and that no
# technique leaves out (recomputation reruns them); activations, batch and layer norm, add, multiply, concat and
# padding may run in place, fuse into a neighbour or write straight into their reader's buffer.
NEW_TENSOR_STEPS = ("conv2d", "dense", "maxpool2d", "avgpool2d", "global_avg_pool", "upsample2d")


def floor(spec: ModelSpec, kind: str, batch: int, optimizer: str, bytes_per_value: int,
          technique: str = "none") -> int:
    """What no framework can avoid however it schedules, fuses, recomputes or updates, so that every measured need
    is at least this and a need beyond it is what the framework chose to keep.

    The weights and batch norm's statistics (the fp32 master copy under mixed precision); the batch's inputs (and
    targets when training: a class label or an output's values per example); and the largest input plus output of
    one step in NEW_TENSOR_STEPS, both live while it runs forward (and their gradients' sizes while it runs
    backward), in the activations' dtype. Training adds the optimizer state (OPTIMIZER_STATE_COPIES of the trainable
    weights) and, when accumulating, one micro-batch instead of the batch and the gradient sum kept between
    micro-batches. Left out, as avoidable or up to the schedule: gradients beyond those (XLA fuses each update into
    the backward pass, so it never holds every gradient at once), saved activations (recomputation keeps as few as
    it likes), what a skip connection holds across its block (which tensor depends on the order the branches run;
    the add may run in place) and an activation's output (it may run in place)."""
    training = kind == "train"
    weights, statistics = spec.weight_bytes(bytes_per_value), spec.statistics_bytes(bytes_per_value)
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    examples, activation = batch // micro, techniques.HALF_PRECISION.get(technique, bytes_per_value)
    targets = (1 if spec.loss == "cross_entropy" else math.prod(spec.output_shape)) if training else 0
    inputs = (math.prod(spec.input_shape) + targets) * examples * bytes_per_value
    # a step is a layer (no padded copy: the op pads); one that reads the model's input reads the batch in `inputs`
    step = max(((0 if layer.inputs == (INPUT,) else sum(map(math.prod, layer.input_shapes)))
                + math.prod(layer.output_shape) for layer in spec.walk() if layer.layer.kind in NEW_TENSOR_STEPS),
               default=0)
    state = weights * OPTIMIZER_STATE_COPIES[optimizer] if training else 0
    accumulated = weights if micro > 1 else 0
    return weights + statistics + state + accumulated + inputs + step * examples * activation


def _pages_kept(phases: list[PhaseEstimate]) -> list[PhaseEstimate]:
    """Where what a phase freed stays with the process (the pages malloc keeps, a caching allocator's blocks), a phase
    holds at least the highest phase before it: the difference is its retained pages, which the driver counts and the
    framework's allocator no longer does."""
    kept, highest = [], 0
    for phase in phases:
        retained = max(highest - phase.total, 0)
        kept.append(replace(phase, items=phase.items | {"retained_pages": retained}) if retained else phase)
        highest = max(highest, phase.total)
    return kept


def _grown_pool(phases: list[PhaseEstimate], spec: ModelSpec, rules: Rules, bytes_per_value: int,
                batch_tensors: tuple[int, int]) -> list[PhaseEstimate]:
    """Where a BFC allocator grows its pool (`models.bfc`), what it counts beyond each phase's tensors (unsplit
    chunks) and what its regions hold unused at the phase's peak (retained pages: the driver sees the regions).

    The allocations are made in the adapters' order: at build each layer's weights then statistics, then the batch
    and its targets; the optimizer's slots in the phase that makes them (`Rules.state_made`); then the phase's
    other bytes as one allocation, freed at its end: XLA runs a program with one buffer for all its temporaries
    (its outputs, the donated weights and state, reuse their inputs' buffers)."""
    pool, held, slots_made, grown = bfc.GrowingPool(), 0, False, []
    weights = [math.prod(shape) * bytes_per_value for step in spec.walk() for shape in step.params.values()]
    for phase in phases:
        pool.peak_in_use = pool.in_use
        made = []
        if phase.name == "build":
            made = [math.prod(shape) * bytes_per_value for step in spec.walk()
                    for shape in (*step.params.values(), *step.statistics.values())] + list(batch_tensors)
        state = phase.items.get("optimizer_state", 0) + phase.items.get("accumulated_gradients", 0)
        if state and weights and not slots_made:
            slots, slots_made = state // sum(weights), True
            made += (sorted(weights * slots, reverse=True) if rules.state_made == "at_once"
                     else [weight for weight in weights for _ in range(slots)])
        for size in made:
            pool.allocate(size)
        held += sum(made)
        tensors = phase.total - sum(phase.items.get(category, 0) for category in HOST_ONLY)
        if tensors > held:
            pool.release(pool.allocate(tensors - held))
        extra = {"unsplit_chunks": max(pool.peak_in_use - tensors, 0),
                 "retained_pages": phase.items.get("retained_pages", 0) + pool.pool - pool.peak_in_use}
        grown.append(replace(phase, items=phase.items | {key: value for key, value in extra.items() if value}))
    return grown


CAST_STEPS = ("conv2d", "dense")  # the steps autocast runs in half precision, on a half copy of their weights


def eager_order(spec: ModelSpec, rules: Rules, ops: list[Step], kind: str, batch: int, size: int, technique: str,
                device: str, optimizer: str, workspace: int, batch_tensors: tuple[int, int],
                draw_copies: int) -> dict[str, list]:
    """Per phase, the order in which an eager framework allocates and frees (`models.eager`)."""
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    layer_weights = eager.weight_sizes(spec, size)
    half = techniques.HALF_PRECISION.get(technique, 0)
    made: set[str] = set()

    def cast(op: Step) -> list[int]:
        return [weight * half // size for weight in layer_weights[op.layer]] if half and op.kind in CAST_STEPS else []

    def one_pass(technique: str, examples: int, tag: object, autocast: bool = False) -> eager.Pass:
        value = examples * (half if autocast and half else size)
        views, tensors, savers, extras = _keeping(spec, rules, ops, technique, device, examples, value)
        kept, runs = _recomputed(spec, rules, ops, tensors, technique)
        return eager.Pass(ops, tensors, views, savers, extras, value, ops[-1].outputs * value, rules.holds_outputs,
                          workspace, made, tag, runs, kept, [cast(op) if autocast else [] for op in ops])

    def gradients(tag: object, kept: bool) -> list[list]:
        """Per step, its weights' gradients: kept in .grad, or (a later micro-batch's) added into it and freed; under
        autocast a cast step's are made half, then cast to .grad's float32."""
        per_op = []
        for op in ops:
            sizes = layer_weights[op.layer] if op.weight_bytes else []
            keys = [("grad", op.layer, number) if kept else (tag, "grad", op.layer, number)
                    for number in range(len(sizes))]
            halves = [((tag, "half grad", op.layer, number), copy) for number, copy in enumerate(cast(op))]
            per_op.append(halves + list(zip(keys, sizes, strict=True)) + [(key, 0) for key, _ in halves]
                          + ([] if kept else [(key, 0) for key in keys]))
        return per_op

    order: dict[str, list] = {"build": eager.built(spec, size, batch_tensors, draw_copies), "compile": []}
    weights = [weight for sizes in layer_weights for weight in sizes]
    for step in (1, 2) if kind == "train" else ():
        # zero_grad(set_to_none=True) frees the last step's gradients
        events = [(("grad", layer, number), 0) for layer, sizes in enumerate(layer_weights)
                  for number in range(len(sizes))] if step == 2 else []
        # the optimizer's slots, one weight at a time, before the step (Keras's build) or in its update (torch's)
        state = [(("state", index, copy), weight) for index, weight in enumerate(weights)
                 for copy in range(OPTIMIZER_STATE_COPIES[optimizer])] if step == 1 else []
        events += state if rules.state_before_step else []
        for number in range(micro):
            run = one_pass(technique if technique in ("inplace", *techniques.RECOMPUTING) else "none", batch // micro,
                           (step, number), autocast=True)
            run.forward(keeping=True)
            run.loss()
            run.backward(gradients((step, number), number == 0))
            events += run.events
        events += [] if rules.state_before_step else state
        scope, copies = rules.update_temporaries.get((optimizer, device), ("largest", 0))
        temporaries = [(("update", step, index, copy), weight) for index, weight in enumerate(weights)
                       for copy in range(copies)]
        if scope == "all":
            events += temporaries + [(key, 0) for key, _ in temporaries]
        else:
            events += [event for pair in temporaries for event in (pair, (pair[0], 0))]
        if technique == "empty_cache":
            events.append(("empty_cache", 0))
        order[f"train_step_{step}"] = events
    inference = one_pass("tracked" if technique == "tracked" else "none", batch, "inference")
    inference.forward(keeping=technique == "tracked")
    inference.end()
    order["inference"] = inference.events
    return order


def _cached_segments(phases: list[PhaseEstimate], order: dict[str, list]) -> list[PhaseEstimate]:
    """What torch's caching allocator maps beyond its peak of allocated bytes in each phase, replayed over the
    eager order (`models.caching`): the retained pages, which the driver sees and the allocator does not count."""
    allocator, handles, kept = caching.CachingAllocator(), {}, []
    for phase in phases:
        allocator.reset_peaks()
        for key, size in order.get(phase.name, ()):
            if key == "empty_cache":
                allocator.empty_cache()
            elif size:
                handles[key] = allocator.allocate(size)
            else:
                allocator.release(handles.pop(key))
        retained = allocator.peak_reserved - allocator.peak_allocated
        items = {name: amount for name, amount in phase.items.items() if name != "retained_pages"}
        kept.append(replace(phase, items=items | ({"retained_pages": retained} if retained else {})))
    return kept


def _workspaces(held: int) -> dict[str, int]:
    """The BLAS workspaces a moment holds, as an item where there are any (none on a device without them)."""
    return {"library_workspace": held} if held else {}


def _update_temporaries(rules: Rules, optimizer: str, device: str, weights: int, largest: int) -> int:
    scope, copies = rules.update_temporaries.get((optimizer, device), ("largest", 0))
    return copies * (weights if scope == "all" else largest)


def estimate(spec: ModelSpec, kind: str = "train", batch: int = 0, optimizer: str = "adam", dtype: str = "float32",
             framework: str | None = None, device: str = "cpu", technique: str = "none",
             blas_workspace: int = 0, pool_grows: bool = False) -> Estimate:
    """The bytes each phase holds at its peak, by category; `framework=None` applies the neutral rules.

    Techniques: mixed precision halves the activations and keeps half-precision weight copies for the
    backward; accumulation runs the activations at the micro-batch and may keep an accumulator;
    checkpointing, bnrelu and efficient keep only the inputs of the runs they recompute; in-place ReLU makes no new
    tensor; tracked inference keeps what a backward pass would need. Weights include batch norm's running
    statistics; gradients and optimizer state are sized by the trainable weights alone. `blas_workspace`: one BLAS
    workspace's bytes on this card, measured (`suites.analysis.constants`), placed where the rules allocate them.
    `pool_grows`: the framework's pool is off and its allocator maps regions as it needs them (JAX's noprealloc,
    TensorFlow's growth), which its BFC allocator counts with the chunks it did not split (`_grown_pool`).
    """
    rules_name = framework if framework in RULES else "neutral"
    rules, size, batch = RULES[rules_name], DTYPES[dtype], batch or spec.default_batch
    trainable = spec.weight_bytes(size)  # what gradients and optimizer state are sized by
    weights = trainable + spec.statistics_bytes(size)  # batch norm's running statistics are weights too
    ops = steps(spec, rules, size)
    largest = max((o.largest_weight for o in ops), default=0)
    labels = batch * rules.label_bytes if spec.loss == "cross_entropy" else math.prod(spec.output_shape) * batch * size
    inputs = math.prod(spec.input_shape) * batch * size + labels
    state = trainable * OPTIMIZER_STATE_COPIES[optimizer] if kind == "train" else 0
    micro = techniques.ACCUMULATION_STEPS if technique == "accumulate" else 1
    half = technique in techniques.HALF_PRECISION
    streams = device in rules.streams_on
    init_copies = rules.init_copies if device != "cuda" or rules.cuda_init_copies is None else rules.cuda_init_copies
    undone = technique in (*techniques.RECOMPUTING, *rules.policy_keeps) and device not in rules.recomputes_on
    workspace = blas_workspace if device in rules.blas_workspaces_on else 0
    acts = activations(spec, rules, batch // micro, size, "none" if undone else technique,
                       techniques.HALF_PRECISION.get(technique, size), device, workspace, ops=ops)
    # once a step ran, its forward's and its backward's threads each hold a workspace where the net multiplies
    stepped = 2 * workspace if any(layer.kind == "dense" for layer in spec.layers) else 0
    accumulator = trainable * rules.accumulator_copies if micro > 1 else 0
    # inference runs the whole batch in fp32 whatever the training technique; only these change it: in place, tracked,
    # and (where the call holds every layer's output) the recomputed runs, each held as one layer's output
    forward = activations(spec, rules, batch, size, technique if technique in (
        "inplace", "tracked", *(techniques.RECOMPUTING if rules.holds_outputs else ())) else "none", device=device,
        workspace=0 if kind == "train" else workspace, ops=ops)
    phase_names = PHASES[kind]

    def state_by(name: str) -> int:
        if not state:  # inference scenarios have no optimizer (and no train_step phases to compare with)
            return 0
        return state if phase_names.index(name) >= phase_names.index(rules.optimizer_state_phase) else 0

    def train_step(name: str) -> PhaseEstimate:
        update = {"weights": weights, "inputs": inputs, "optimizer_state": state,
                  "gradients": min(trainable, largest * rules.in_flight) if streams else trainable,
                  "accumulated_gradients": accumulator,
                  "update_temporaries": _update_temporaries(rules, optimizer, device, trainable, largest),
                  **_workspaces(stepped)}
        # the state exists during the backward pass only if it was made before this step's forward
        made, here = phase_names.index(rules.optimizer_state_phase), phase_names.index(name)
        before = state if here > made or (here == made and rules.state_before_step) else 0
        in_place_sum = micro > 1 and not rules.accumulator_copies  # torch: earlier micro-batches' .grad
        backward = {"weights": weights, "inputs": inputs, "optimizer_state": before,
                    "gradients": trainable if in_place_sum else acts.backward_gradients,
                    "accumulated_gradients": accumulator, "saved_activations": acts.backward_saved,
                    "half_weights": trainable // 2 if half else 0,
                    "transient": acts.backward_peak - acts.backward_saved - acts.backward_gradients,
                    **_workspaces(acts.backward_workspaces if name == "train_step_1" else stepped)}
        if sum(update.values()) >= sum(backward.values()):
            live = "the gradients in flight" if streams else "every gradient"
            return PhaseEstimate(name, f"optimizer update: the state and {live} live", update)
        return PhaseEstimate(name, "backward pass: saved activations and a gradient pair live", backward)

    def resting(name: str, moment: str, extra: dict[str, int]) -> PhaseEstimate:
        kept = {"weights": weights, "inputs": inputs, "optimizer_state": state_by(name)}
        if accumulator and state_by(name):  # the accumulator is made with the state (optax.MultiSteps.init)
            kept["accumulated_gradients"] = accumulator
        if name == "inference" and kind == "train":
            kept |= ({"gradients": trainable} if rules.keeps_gradients else {}) | _workspaces(stepped)
        elif name == "inference":
            kept |= _workspaces(forward.inference_workspaces)
        return PhaseEstimate(name, moment, kept | extra)

    phases = []
    for name in phase_names:
        if name in ("import", "context"):
            phases.append(PhaseEstimate(name, "no model yet: measured constants only"))
        elif name == "build":
            if rules.batch_drawn_directly:  # the batch comes after the weights: their draws' temporaries are gone
                temporaries = max(init_copies * largest - inputs, 0)
            else:
                temporaries = init_copies * max(largest, math.prod(spec.input_shape) * batch * size, labels)
            phases.append(resting(name, "drawing the largest random tensor (a parameter or the batch)",
                                  {"init_temporaries": temporaries}))
        elif name == "compile":
            phases.append(resting(name, "model built, nothing run", {}))
        elif name.startswith("train_step"):
            phases.append(train_step(name))
        elif name == "inference" and technique == "tracked":
            phases.append(resting(name, "forward pass with tracking: what a backward pass needs is kept",
                                  {"saved_activations": forward.saved, "transient": forward.inference_transient}))
        elif name == "inference":
            phases.append(resting(name, "forward pass, no gradient tracking",
                                  {"transient": forward.inference_transient}))
    if device in rules.caching_on and technique in rules.ordered_techniques:
        phases = _cached_segments(phases, eager_order(spec, rules, ops, kind, batch, size, technique, device,
                                                       optimizer, workspace, (math.prod(spec.input_shape) * batch
                                                                              * size, labels), init_copies))
    elif device in rules.keeps_pages_on and technique != "empty_cache":
        phases = _pages_kept(phases)
    if pool_grows and device in rules.bfc_on:
        phases = _grown_pool(phases, spec, rules, size, (math.prod(spec.input_shape) * batch * size, labels))
    return Estimate(spec.name, framework or "any", kind, batch, optimizer, dtype, device, technique, rules_name,
                    tuple(phases), floor(spec, kind, batch, optimizer, size, technique), hand_count(spec),
                    spec.param_count, len(spec.layers))
