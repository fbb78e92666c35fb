"""The rules per framework: which tensors its backward pass keeps, when its optimizer state appears, what its update
step allocates (`Rules`, `RULES`), each checked against the framework's source or its saved tensors (see `why`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from models import techniques

OPTIMIZER_STATE_COPIES = {"sgd": 0, "momentum": 1, "adam": 2}
INT64, BOOL, FLOAT32 = 8, 1, 4
# What a layer's backward may keep: "input" (every input tensor), "output" (its output tensor), "mask" (a bool of the
# output's size), "indices" (int64 of the output's size), "residual" (a new tensor of the output's size in the
# activations' dtype, made inside the layer), "channels" (one float32 vector of the output's channels, whatever the
# batch), "copy" (a re-laid-out copy of its input, made inside the layer: Keras's channels-first copy on torch),
# "kernel" (a re-laid-out copy of its kernel, whatever the batch), "positions" (one float32 per position of the
# output, its values over its channels: layer norm's per-position statistics), "groups" (one float32 per example
# and group of its channels: a group or instance norm's statistics), "example_channels" (one float32 per example and
# channel: a norm's scale times each group's statistic), "matrices" (the constant per-axis matrices a resize
# contracts with, whatever the batch). A tensor two layers keep is counted once. A per-example dropout's mask or
# noise is one value per example, not per output value.
SAVED_KINDS = ("input", "output", "mask", "indices", "residual", "channels", "copy", "kernel", "positions", "groups",
               "example_channels", "matrices")


@dataclass(frozen=True)
class Rules:
    """One framework's habits, each checked against its source or its saved tensors (see `why`)."""

    saves: dict[str, tuple[str, ...]]  # layer kind -> what its backward keeps (SAVED_KINDS)
    affine_saves: dict[str, tuple[str, ...]]  # the norms that keep more where they learn a scale, and what more
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
    # a crop's or channel slice's output is a view of what it reads (torch's indexing): no tensor of its own, and a
    # reader that keeps it keeps the whole tensor it slices
    slices_view: bool = False
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
    # the devices whose allocator is XLA's BFC, which counts unsplit chunks when its pool grows (models.estimate.bfc)
    bfc_on: tuple[str, ...] = ()
    # how the optimizer's slots are allocated: "at_once" (one compiled init, whose outputs XLA's buffer assignment
    # allocates largest first) or "per_weight" (each weight's slots in turn)
    state_made: str = "at_once"
    # the devices whose allocator is torch's caching allocator, whose segments the driver sees (models.estimate.caching)
    caching_on: tuple[str, ...] = ()
    # the techniques whose allocation order `eager_order` follows there; the others keep `phases._pages_kept`'s floor
    ordered_techniques: tuple[str, ...] = ("none", "inplace", "empty_cache", "accumulate", "tracked")
    # the devices whose compiler turns a depthwise conv's filter gradient into a dense conv's, planning
    # EXPANDED_FILTER_COPIES temporaries of kh x kw x C_in x C_out while that conv back-propagates (XLA's CPU backend)
    expands_depthwise_on: tuple[str, ...] = ()
    # the mse loss keeps the output itself for its backward (torch's mse_loss_backward reads it), not a difference of
    # its own: an output a step keeps already costs nothing more (a softmax, Keras's difference, are new tensors)
    mse_keeps_output: bool = False


# XLA's CPU plan for one depthwise conv's filter gradient (compiled memory_analysis(), jax 0.10.2): two buffers of
# the dense kernel kh x kw x C x C, whatever the batch and map size (C 768, 7x7: 220.5 MiB for 2 x 110.2), for the
# largest such conv alone however many there are; a grouped conv of fewer groups is not expanded
EXPANDED_FILTER_COPIES = 2


NEUTRAL_SAVES = {"conv2d": ("input",), "dense": ("input",), "batchnorm": ("input",), "relu": ("output",),
                 "relu6": ("output",), "maxpool2d": ("input",), "avgpool2d": (), "adaptive_avgpool2d": (),
                 "global_avg_pool": (), "dropout": ("mask",), "add": (), "concat": (), "pad": (), "flatten": (),
                 "silu": ("input",),
                 "sigmoid": ("output",), "hard_sigmoid": ("output",), "hard_swish": ("input",), "gelu": ("input",),
                 "layernorm": ("input",), "rescale": (), "normalize": (), "zeropad2d": (), "crop2d": (),
                 "channel_slice": (), "channel_shuffle": (), "upsample2d": (), "reshape": (), "multiply": ("input",),
                 "layerscale": ("input",), "leaky_relu": ("output",), "elu": ("output",), "softplus": ("input",),
                 "mish": ("input",), "groupnorm": ("input",), "instancenorm": ("input",), "prelu": ("input",),
                 "pad2d": (), "conv_transpose2d": ("input",), "resize2d": (), "space_to_depth": (),
                 "subtract": ()}
# In evaluation mode (tracked inference) batch norm normalizes by its running statistics and keeps its input only
# (torch's native_batch_norm with training=False: its save_mean and save_invstd are empty); dropout is the identity.
EVAL_SAVES = {"batchnorm": ("input",)}
BN_CHANNELS = ("channels",) * 4  # the per-channel vectors a composed batch norm's gradient reads (Keras)
TORCH_LAYERNORM = ("input", "positions", "positions")  # native_layer_norm: its input, mean and rstd (torch, Keras)
TORCH_HARD = {"hard_sigmoid": ("input",)}  # hardsigmoid_backward reads its input, not its output (torch, Keras)
# leaky_relu_backward and elu_backward read their input where not run in place (torch, Keras on torch)
TORCH_SLOPES = {"leaky_relu": ("input",), "elu": ("input",)}
# Keras's mish is composed, x * tanh(softplus(x)): the input and tanh's output (Keras on TensorFlow and on torch)
KERAS_MISH = {"mish": ("input", "residual")}
# jax.vjp's residuals of jax.nn's activations (JAX and Keras on JAX): silu its input, the sigmoid and its derivative;
# sigmoid the derivative (not its output); the exact gelu erfc, exp and a product (not its input); hard_sigmoid
# relu6's mask, hard_silu its input, that mask and the hard sigmoid (relu6's zeros, as relu's, left to XLA);
# leaky_relu its where's bool mask, elu two masks (its two wheres') and two of its size (expm1's derivative), softplus
# (logaddexp's) two of its size, mish its input and four (Keras's composed mish as many)
JAX_ACTIVATIONS = {"silu": ("input", "residual", "residual"), "sigmoid": ("residual",), "gelu": ("residual",) * 3,
                   "hard_sigmoid": ("mask",), "hard_swish": ("input", "mask", "residual"), "leaky_relu": ("mask",),
                   "elu": ("mask", "mask", "residual", "residual"), "softplus": ("residual", "residual"),
                   "mish": ("input", *("residual",) * 4)}
# XLA's GPU fusions recompute batch norm's normalized values and ReLU's mask in the backward (JAX and Keras on JAX)
JAX_CUDA_SAVES = {"batchnorm": ("input",), "relu": ("output",), "relu6": ("output",)}
NORMALIZE_DIVISOR = ("channels",)  # the (1, 1, 1, C) max(sqrt(variance), 1e-7) a composed normalization divides by
# Group and instance norm (an instance norm is a group norm of a channel a group), PReLU and edge padding, measured at
# batch 2 on the CPU: saved-tensor hooks on torch's modules and on Keras's layers on torch, jax.vjp's residuals of
# the jax adapter's functions and of Keras's layers on JAX. torch's native_group_norm keeps its input, mean and rstd
# per example and group; its instance_norm is batch_norm over (1, N C, H, W), keeping the input, save_mean and
# save_invstd, and its scale repeated per example where it has one; _prelu_kernel and reflection_pad2d's and
# replication_pad2d's backward their input. Keras's GroupNormalization (keras/src/layers/normalization/
# group_normalization.py: moments over each group, then x * (gamma * inv) + ...) keeps its input and three per-group
# tensors on torch (four on JAX, with x - mean and a product of the input's size), and gamma * inv per example and
# channel where it scales; the jax adapter's keeps two of the input's size, three per group, and the normalized
# values where it scales; Keras's PReLU (relu(x) - alpha * relu(-x)) keeps two of its size and -alpha on torch,
# two masks and three of its size on JAX, where jax.nn.relu's jvp selects; the jax adapter's where() a mask; the
# adapter's edge padding (slices, flips, repeats, a concatenate) keeps nothing in Keras and JAX. A transposed conv
# keeps its input, as a conv does (torch's ConvTranspose2d, JAX's dilated conv); Keras's conv_transpose on torch
# its channels-first copy (each group's), its kernel a view of the variable. A resize to a size or by any scale:
# torch's upsample kernels keep nothing (their backward needs the sizes); the adapters' contraction with constant
# interpolation matrices keeps the matrices under torch's einsum (Keras on torch), on TensorFlow the input too (its
# einsum gradient reads both operands; not measured), and in JAX nothing of the batch's size (the matrices are small)
DENSE_WHY = ("; group norm, instance norm, PReLU and edge padding: see rules.DENSE_SAVES (hooks and residuals on the"
             " CPU; Keras on TensorFlow taken as Keras on torch's composed ops, its tape not measured; no GPU figure"
             " yet)")
TORCH_DENSE = {"groupnorm": ("input", "groups", "groups"), "instancenorm": ("input", "groups", "groups"),
               "prelu": ("input",), "pad2d": ("input",)}
KERAS_TORCH_DENSE = {"groupnorm": ("input", *("groups",) * 3), "instancenorm": ("input", *("groups",) * 3),
                     "prelu": ("residual", "residual", "channels"), "pad2d": (), "conv_transpose2d": ("copy",),
                     "resize2d": ("matrices",)}
JAX_DENSE = {"groupnorm": ("residual", "residual", *("groups",) * 3),
             "instancenorm": ("residual", "residual", *("groups",) * 3), "prelu": ("mask", "channels"), "pad2d": ()}
KERAS_JAX_DENSE = {"groupnorm": ("residual", "residual", *("groups",) * 4),
                   "instancenorm": ("residual", "residual", *("groups",) * 4),
                   "prelu": ("mask", "mask", *("residual",) * 3, "channels"), "pad2d": ()}
DENSE_SAVES = {"torch": TORCH_DENSE, "keras-torch": KERAS_TORCH_DENSE,
               "keras-tensorflow": KERAS_TORCH_DENSE | {"resize2d": ("input", "matrices")},
               "jax": JAX_DENSE, "keras-jax": KERAS_JAX_DENSE}
_KERAS_SCALED = dict.fromkeys(("groupnorm", "instancenorm"), ("example_channels",))
AFFINE_SAVES = {"torch": {"instancenorm": ("groups",)}, "keras-torch": _KERAS_SCALED, "keras-tensorflow": _KERAS_SCALED,
                "jax": dict.fromkeys(("groupnorm", "instancenorm"), ("residual", "channels")),
                "keras-jax": dict.fromkeys(("groupnorm", "instancenorm"), ("example_channels", "channels"))}
RULES = {
    "neutral": Rules(
        saves=NEUTRAL_SAVES, affine_saves={}, cuda_saves={}, in_place_saves={}, label_bytes=INT64,
        explicit_padding=False, pixel_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=False, keeps_gradients=False, streams_on=(),
        init_copies=0, accumulator_copies=0, update_temporaries={},
        why="no framework named: what a backward pass needs at least: each weighted layer (conv, dense, batch norm)"
            " keeps its input, ReLU and ReLU6 their output, max-pool its input, dropout a boolean mask (one per example"
            " when per example); SiLU, hard swish and GELU their input, sigmoid and hard sigmoid their output (the"
            " hard one's slope is 1/6 where its output is strictly between 0 and 1, else 0), leaky ReLU and ELU"
            " their output (its sign tells the slope: the slope is at least 0, alpha positive), softplus and mish"
            " their input, layer norm its input,"
            " multiply its inputs, a layer scale its input (its scale's gradient is the sum of the input times the"
            " output's gradient); average pooling (adaptive too), the global mean, add, concat, rescale, normalize"
            " (its statistics fixed), zero padding, cropping, a channel slice or shuffle, upsampling and reshape are"
            " linear and keep nothing; every gradient is live at the update, which allocates nothing; group and"
            " instance norm keep their input (their statistics are recomputed from it), PReLU its input, edge padding"
            " nothing"),
    "torch": Rules(
        saves=NEUTRAL_SAVES | {"maxpool2d": ("input", "indices"), "relu6": ("input",), "avgpool2d": ("input",),
                               "adaptive_avgpool2d": ("input",),
                               "batchnorm": ("input", "channels", "channels"), "dropout": ("residual",),
                               "layernorm": TORCH_LAYERNORM, "normalize": NORMALIZE_DIVISOR, **TORCH_HARD,
                               **TORCH_SLOPES} | DENSE_SAVES["torch"],
        affine_saves=AFFINE_SAVES["torch"],
        cuda_saves={"dropout": ("mask",)}, in_place_saves={"relu6": ("residual",)}, label_bytes=INT64,
        explicit_padding=True, pixel_padding=False,
        optimizer_state_phase="train_step_1", state_before_step=False, keeps_gradients=True, streams_on=(),
        init_copies=0, blas_workspaces_on=("cuda",), keeps_pages_on=("cuda",), caching_on=("cuda",),
        ordered_techniques=tuple(techniques.TECHNIQUES),  # checkpoint and autocast as autograd runs them
        accumulator_copies=0, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("all", 1)},
        slices_view=True, mse_keeps_output=True,
        why="saved tensors as listed by autograd's saved_tensors_hooks: conv (depthwise too) and linear keep their"
            " input, ReLU its output, max_pool2d its input and int64 indices (its padding is inside the op);"
            " native_batch_norm its input and the per-channel save_mean and save_invstd (its weight and running"
            " statistics are the module's own); hardtanh (ReLU6) its input, and in place (hardtanh_, whose formula"
            " reads the original input) a clone of it, so in place it keeps as much (relu_ keeps its result);"
            " avg_pool2d and _adaptive_avg_pool2d their input; add, cat and the mean over H and W nothing; dropout"
            " on the CPU multiplies by a"
            " float noise tensor it keeps, on CUDA the fused native_dropout keeps a bool mask (torchgen's"
            " derivatives.yaml: result1; not run here), per example (a mul by (N, 1, 1, 1) noise) the noise only;"
            " silu, gelu, hardswish and hardsigmoid keep their input, sigmoid its output (leaky_relu, elu, softplus"
            " and mish their input too), native_layer_norm its input"
            " and per-position mean and rstd, mul both inputs (a broadcast one is small; a layer scale's other is its"
            " parameter), a normalization its"
            " per-channel divisor (its"
            " statistics fixed); a scalar affine, constant_pad_nd, upsample_nearest2d, upsample_bilinear2d and a"
            " view (a crop's or channel slice too) and a channel shuffle (view, transpose, reshape's copy) keep nothing"
            " but shapes, avg_pool2d its input with its padding inside; a crop or channel slice makes no tensor, and"
            " a layer that keeps its output keeps the whole tensor it slices (the hooks count the view's storage)"
            " (measured with the hooks on the CPU, no GPU figure yet); ZeroPad2d's padded copy replaces the conv"
            " input where 'same' is"
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
            " driver sees the caching allocator's segments, simulated (models.estimate.caching) over the order the"
            " eager step allocates in (models.estimate.eager), so a phase holds the blocks the ones before it freed"
            " and the segments its own order splits, unless empty_cache returned them (cuDNN's workspaces are not in"
            " the order; the recomputing and casting techniques keep the phase before's peak as the least)"
            + DENSE_WHY),
    "keras-tensorflow": Rules(
        saves=NEUTRAL_SAVES | {"maxpool2d": ("input", "output"), "batchnorm": ("input", *BN_CHANNELS),
                               "gelu": ("residual",) * 3, "layernorm": ("input", "residual", *("positions",) * 3),
                               "normalize": NORMALIZE_DIVISOR, "hard_sigmoid": ("residual",),
                               "hard_swish": ("input", "residual", "residual"), "leaky_relu": ("input",),
                               **KERAS_MISH} | DENSE_SAVES["keras-tensorflow"],
        affine_saves=AFFINE_SAVES["keras-tensorflow"],
        cuda_saves={}, in_place_saves={}, label_bytes=4, explicit_padding=False, pixel_padding=True,
        keeps_pages_on=("cpu",), holds_run_inputs=True, bfc_on=("cuda",), state_made="per_weight",
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False, streams_on=("cpu", "cuda"),
        init_copies=2,
        accumulator_copies=1, update_temporaries={("adam", "cpu"): ("largest", 2), ("adam", "cuda"): ("largest", 2),
                            ("sgd", "cpu"): ("largest", 1), ("sgd", "cuda"): ("largest", 1),
                            ("momentum", "cpu"): ("largest", 1), ("momentum", "cuda"): ("largest", 1)},
        why="gradient functions (nn_grad.py, math_grad.py; the forward tensors the traced step's gradient ops read):"
            " Conv2D, DepthwiseConv2dNative and MatMul keep their input, Relu and Relu6 their output, MaxPool its input"
            " and output, AvgPool, Mean, AddV2 and ConcatV2 only shapes (so Keras's AdaptiveAveragePooling2D, AvgPool"
            " windows joined and gathered by constant indices); Keras's BatchNormalization is composed"
            " (tf.nn.moments, tf.nn.batch_normalization): SquaredDifference and Mul keep its input plus per-channel"
            " mean, rsqrt and scale (not the fused kernel; grappler might still rewrite it); stateless_dropout keeps"
            " the bool keep-mask of its SelectV2 (per example, an (N, 1, 1, 1) one); silu's custom gradient keeps its"
            " input, SigmoidGrad the output, LeakyReluGrad and SoftplusGrad the input, EluGrad the output (Keras's"
            " elu at alpha 1; at another alpha a SelectV2 keeps its mask and the elu beside); Keras's composed ops"
            " (the forward tensors the traced step's gradient"
            " reads, on the CPU): gelu erfc and two products, mish (x * tanh(softplus(x))) its input and tanh's"
            " output, hard_sigmoid (relu6(x + 3) / 6) its Relu6's output,"
            " hard_silu (x times that) its input, the hard sigmoid and that Relu6 output, layer norm its input, its"
            " scale times rsqrt (of the input's size) and three per-position tensors, normalization its per-channel"
            " divisor, Mul both inputs (a layer scale's other its gamma, a variable);"
            " Pad, Tile (nearest upsampling), Reshape, Transpose (its gradient reads the permutation), the mean and"
            " the StridedSlice of Cropping2D or a channel slice (array_grad.py: its gradient reads the input's shape"
            " only) nothing (bilinear's ResizeBilinearGrad reads its"
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
            " backward passed it)"
            + DENSE_WHY),
    "jax": Rules(
        saves=NEUTRAL_SAVES | {"relu": ("mask",), "relu6": ("mask",), "batchnorm": ("residual",) * 3, **JAX_ACTIVATIONS,
                               "layernorm": ("residual",) * 3 + ("positions",) * 3,
                               "normalize": NORMALIZE_DIVISOR} | DENSE_SAVES["jax"],
        affine_saves=AFFINE_SAVES["jax"],
        cuda_saves=JAX_CUDA_SAVES, in_place_saves={},
        label_bytes=4, explicit_padding=False, pixel_padding=False, in_flight=5, cuda_init_copies=0, bfc_on=("cuda",),
        optimizer_state_phase="compile", state_before_step=False, keeps_gradients=False, streams_on=("cuda",),
        init_copies=2,
        accumulator_copies=1, update_temporaries={}, policy_keeps={"bnrelu": ("conv2d",)}, recomputes_on=("cuda",),
        expands_depthwise_on=("cpu",),
        tracked_saves={"batchnorm": ("residual", "channels", "channels"), "relu": ("mask", "residual"),
                       "hard_sigmoid": ("mask", "residual"), "hard_swish": ("input", "mask", "residual", "residual")},
        why="jax.vjp residuals (jax.ad_checkpoint.print_saved_residuals): conv (grouped too) and dot keep their input,"
            " relu's and relu6's jvp a boolean mask, reduce_window max its operand (padding inside); avg pooling, the"
            " mean, add and concatenate are linear and keep nothing; dropout's where keeps its bool mask; the plain-jnp"
            " batch norm keeps three tensors of its size (2(x - mean) from the variance's square, x - mean, and the"
            " normalized x), which XLA's CPU buffers confirm (+3 activations per batch norm, per-channel vectors"
            " negligible); measured on XLA's CPU, ReLU after batch norm costs nothing and a lone ReLU a float"
            " activation rather than a bool mask, dropout about two: the rules keep the residuals; the newer kinds'"
            " residuals (measured on the CPU, no GPU figure yet): silu its input, the sigmoid and its derivative,"
            " sigmoid the derivative, the exact gelu three tensors of its size (erfc, exp, a product; the tanh gelu its"
            " input and four), hard_sigmoid relu6's bool mask, hard_silu its input, that mask and the hard sigmoid,"
            " leaky_relu its bool mask, elu two bool masks and two of its size, softplus two, mish its input and"
            " four,"
            " the plain-jnp layer norm three of its size and three per position (XLA's CPU plan keeps about one: the"
            " rules keep the residuals), normalize its per-channel divisor, mul both inputs (a layer scale's other"
            " its parameter); the scalar"
            " affine, pad, resize (its index or weight vectors are small), reshape, transpose, a crop's or channel"
            " slice (its transpose is a pad) and an adaptive pool's einsum by constant averaging matrices (its"
            " residuals are those small matrices) nothing; a per-example dropout"
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
            " allocator's in-use figure counts the chunks it did not split (models.estimate.bfc, simulated in the"
            " adapter's order: each layer's weights, the batch, optax's state as one program's outputs, largest"
            " first);"
            " tracked inference (jax.vjp over the jitted forward) keeps every residual partial evaluation names, none"
            " fused away: a batch norm in evaluation mode its scaled difference and two per-channel vectors, a ReLU"
            " its mask and a zero tensor of its size (jax.nn.relu's jvp selects from one; relu6's in hard_sigmoid and"
            " hard_silu too); resnet50's pullback at batch 2 holds 262,900,224 bytes beyond the weights and the"
            " batch, the estimate's figure, and the H100"
            " peaked at the weights, the batch and 2,004 MiB of them at batch 16"
            + DENSE_WHY),
    "keras-jax": Rules(
        saves=NEUTRAL_SAVES | {"relu": ("mask",), "relu6": ("mask",), **JAX_ACTIVATIONS,
                               "layernorm": ("input", "residual", "residual", *("positions",) * 4),
                               "normalize": NORMALIZE_DIVISOR} | DENSE_SAVES["keras-jax"],
        affine_saves=AFFINE_SAVES["keras-jax"],
        cuda_saves=JAX_CUDA_SAVES, in_place_saves={}, label_bytes=4, explicit_padding=False, pixel_padding=True,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=False,
        streams_on=("cuda",), in_flight=5, init_copies=2, cuda_init_copies=0, accumulator_copies=1,
        update_temporaries={}, recomputes_on=("cuda",), bfc_on=("cuda",), state_made="per_weight",
        expands_depthwise_on=("cpu",),
        why="JAX's autodiff under Keras: the jax rules for what is saved, except batch norm: Keras's composed"
            " batch_normalization (x * inv + (offset - mean * inv)) keeps its input; jnp.var also leaves x - mean as a"
            " residual, which XLA recomputes from the input (on its CPU buffers: +1 activation per batch norm, not 2);"
            " dropout's lax.select keeps the bool mask (per example, its broadcast, which XLA fuses); its"
            " AdaptiveAveragePooling2D (window sums, a concatenate, a take of constant indices) nothing; Keras's"
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
            " gradient live), and the optimizer makes each weight's slots in turn (add_optimizer_variables)"
            + DENSE_WHY),
    "keras-torch": Rules(
        saves=NEUTRAL_SAVES | {"conv2d": ("copy", "kernel"), "maxpool2d": ("copy", "indices"), "relu6": ("input",),
                               "avgpool2d": ("copy",), "adaptive_avgpool2d": ("copy",),
                               "batchnorm": ("input", "residual", *BN_CHANNELS[:3]),
                               "layernorm": TORCH_LAYERNORM, "normalize": NORMALIZE_DIVISOR, **TORCH_HARD,
                               **TORCH_SLOPES, **KERAS_MISH} | DENSE_SAVES["keras-torch"],
        affine_saves=AFFINE_SAVES["keras-torch"],
        cuda_saves={}, in_place_saves={}, label_bytes=4, explicit_padding=True, pixel_padding=True, holds_outputs=True,
        optimizer_state_phase="train_step_1", state_before_step=True, keeps_gradients=True,
        streams_on=(), init_copies=2, batch_drawn_directly=True, accumulator_copies=1, blas_workspaces_on=("cuda",),
        keeps_pages_on=("cuda",),
        caching_on=("cuda",),
        update_temporaries={("adam", "cpu"): ("all", 3), ("adam", "cuda"): ("all", 3)},
        why="torch's autograd under Keras (saved_tensors_hooks on each Keras layer): the torch rules for dense,"
            " ReLU, ReLU6, add and concat; a conv (depthwise too) or a pool (adaptive_avg_pool2d too) keeps"
            " Keras's channels-first copy of its"
            " input and of its kernel (keras/src/backend/torch/nn.py: permute, then a contiguous channels_last"
            " copy), tensors of their own beside the"
            " channels-last input a ReLU may keep too (for an uneven 'same' padding, the padded copy made from it);"
            " run eagerly, Keras's Functional keeps every layer's output in its tensor_dict until the call returns"
            " (keras/src/ops/function.py, _run_through_graph), so inference holds them all at once and training holds"
            " the unsaved ones too at the forward's end; Keras's composed batch norm keeps its input for the"
            " variance's square, a clone of x - mean (the in-place mul_ needs the original) and three per-channel"
            " vectors;"
            " the seeded dropout is torch.where on a"
            " bool mask, which it keeps (per example, an (N, 1, 1, 1) one); SiLU, GELU, sigmoid, hard_sigmoid,"
            " hard_silu, leaky_relu, elu, softplus, multiply and ConvNeXt's LayerScale (x * gamma) as torch's; its"
            " composed mish (x * tanh(softplus(x))) its input and tanh's output; LayerNormalization calls torch's"
            " layer_norm (input, per-position mean"
            " and rstd); Normalization keeps its per-channel divisor, Rescaling a scalar; ZeroPadding2D, UpSampling2D,"
            " Cropping2D and a channel slice (slices, views), Permute and Reshape nothing (hooks"
            " on the CPU, no GPU figure yet); Keras pads uneven 'same' convolutions, integer padding (ZeroPadding2D, an"
            " average pool's too) and"
            " max-pool padding (a -inf pad layer) explicitly; Keras builds the optimizer's variables at the first"
            " train_on_batch, before the step runs; gradients stay in .grad until the next step zeroes them; Keras's"
            " torch Adam runs torch._foreach ops over every variable: three temporaries of every parameter live at once"
            " (taken from keras200m's measured step on the CPU, 5,589 MiB against 4,743 with two); keras.random on"
            " torch draws then scales: two temporaries; on CUDA its matrix multiplies take torch's cuBLAS"
            " workspaces (see torch)"
            + DENSE_WHY),
}
