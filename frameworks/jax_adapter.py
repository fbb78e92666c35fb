"""JAX with optax: a pure function over a list of per-layer parameters, jitted ahead of time.

The train step (parameters and optimizer state donated, as in idiomatic JAX training) and the forward
pass are lowered and compiled in `compile`. On a GPU a helper process compiles them first, into JAX's
persistent compilation cache (frameworks.xla_compiles): compiling autotunes GEMM and convolution
algorithms with scratch buffers far larger than the step needs, and JAX's peak counter cannot be reset,
so scratch in the worker would hide every later phase's peak. The worker's `compile` then loads the
executables from the cache, autotuned already. The helper's own figures record that scratch, labelled
as compile-time; XLA's static memory plan of each executable is in the record too.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable
from importlib import metadata
from typing import TYPE_CHECKING

from frameworks import graph, xla_compiles
from frameworks.adapter import Adapter, init_bound
from models import techniques
from models.record import (
    AT_PHASE_END,
    PEAK_AT_MOST,
    PEAK_SINCE_PHASE_START,
    PEAK_SINCE_PROCESS_START,
    STATIC_PLAN,
    counter,
)
from models.scenario import OPTIMIZER_SETTINGS
from models.spec import (
    ELU,
    GELU,
    AdaptiveAvgPool2D,
    Add,
    AvgPool2D,
    BatchNorm,
    ChannelShuffle,
    ChannelSlice,
    Concat,
    Conv2D,
    ConvTranspose2D,
    Crop2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    GroupNorm,
    HardSigmoid,
    HardSwish,
    InstanceNorm,
    Layer,
    LayerNorm,
    LayerScale,
    LeakyReLU,
    MaxPool2D,
    Mish,
    Multiply,
    Normalize,
    Pad2D,
    PReLU,
    ReLU,
    ReLU6,
    Rescale,
    Reshape,
    Resize2D,
    Sigmoid,
    SiLU,
    Softplus,
    SpaceToDepth,
    Subtract,
    Upsample2D,
    ZeroPad2D,
)

if TYPE_CHECKING:
    import jax
    import numpy as np
    import optax

Params = list[dict[str, "jax.Array"]]
POOL_STATISTICS = ("pool_bytes", "peak_pool_bytes")  # the BFC pool's size, where this jaxlib reports it
CONV_OUTPUT = "conv_output"  # the name bnrelu's checkpoint policy saves


class JaxAdapter(Adapter):
    name = "jax"

    @property
    def compiles_ahead(self) -> bool:
        """A helper compiles first only where it guards something: on a GPU, autotuning's scratch would set the
        allocator's peak counter, which cannot be reset (or where the autotuner is faked, for the CPU's tests). On
        the CPU nothing autotunes, and op by op there is nothing to compile."""
        autotunes = self.scenario.device == "cuda" or xla_compiles.autotune_faked()
        return autotunes and self.scenario.execution_mode == "jit"

    def environment(self) -> dict[str, str]:
        return {"JAX_PLATFORMS": self.scenario.device}

    def cache_environment(self, folder: str) -> dict[str, str]:
        return xla_compiles.cache_environment(folder)

    def import_framework(self) -> dict[str, str]:
        global jax, optax, checkpoint_name
        import jax
        import optax
        from jax.ad_checkpoint import checkpoint_name

        self.compiles = xla_compiles.Compiles()
        return {"jax": jax.__version__, "jaxlib": metadata.version("jaxlib"), "optax": optax.__version__}

    def init_device(self) -> str:
        try:
            self.device = jax.devices()[0]  # starts the backend: on a GPU, the context and any preallocation
        except Exception as error:
            raise RuntimeError(f"JAX cannot start platform {self.scenario.device!r} (no GPU, or no CUDA "
                               f"plugin in {jax.__version__}?)") from error
        jax.device_put(0.0, self.device).block_until_ready()
        return f"{self.device.platform}: {self.device.device_kind}"

    def apply(self, params: Params, state: Params, inputs: jax.Array, training: bool = False,
              key: jax.Array | None = None) -> tuple[list[jax.Array], Params]:
        """The net's outputs and the running statistics after it (they move in training only). The runs a technique
        recomputes are each a jax.checkpoint; bnrelu is one jax.checkpoint over the net whose policy saves only conv
        outputs."""
        if self.scenario.technique == "bnrelu" and training:
            policy = jax.checkpoint_policies.save_only_these_names(CONV_OUTPUT)
            return jax.checkpoint(self._apply, policy=policy, static_argnums=(3,))(params, state, inputs, True, key)
        return self._apply(params, state, inputs, training, key)

    def _caller(self, params: Params | dict, state: Params | dict, training: bool, key: jax.Array | None,
                collected: dict[int, dict]) -> Callable[[int, list[jax.Array]], jax.Array]:
        """Runs one layer by index; batch norm's new statistics go to `collected`."""
        def call(index: int, values: list[jax.Array]) -> jax.Array:
            out, statistics = _layer(self.spec.layers[index], params[index], state[index], values, training,
                                     jax.random.fold_in(key, index) if key is not None else None)
            if statistics is not None:
                collected[index] = statistics
            return out

        return call

    def _apply(self, params: Params, state: Params, inputs: jax.Array, training: bool,
               key: jax.Array | None) -> tuple[list[jax.Array], Params]:
        collected: dict[int, dict] = {}

        def recompute(stage: graph.Stage, values: list[jax.Array]) -> list[jax.Array]:
            def body(run_params: dict, run_state: dict, run_key: jax.Array | None, *tensors: jax.Array) -> tuple:
                inside: dict[int, dict] = {}  # returned, not leaked: the checkpoint's trace must stay pure
                call = self._caller(run_params, run_state, training, run_key, inside)
                return graph.run_inside(self.spec, stage, list(tensors), call), inside

            outs, inside = jax.checkpoint(body)({i: params[i] for i in stage.layers},
                                                {i: state[i] for i in stage.layers}, key, *values)
            collected.update(inside)
            return outs

        out = graph.run_stages(self.spec, graph.stages(self.spec, self.scenario.technique), inputs,
                               self._caller(params, state, training, key, collected), recompute)
        return out, [collected.get(index, layer) for index, layer in enumerate(state)]

    def loss_of(self, params: Params, state: Params, inputs: jax.Array, targets: list[jax.Array],
                training: bool = True, key: jax.Array | None = None) -> tuple[jax.Array, tuple[list, Params]]:
        """The loss (one per output, summed), with the outputs and the new running statistics beside it."""
        half = {"fp16": jax.numpy.float16, "bf16": jax.numpy.bfloat16}.get(self.scenario.technique)
        if half:  # mixed precision: fp32 master weights, cast for the computation, the loss in fp32
            params, state, inputs = jax.tree.map(lambda array: array.astype(half), (params, state, inputs))
        outputs, new_state = self.apply(params, state, inputs, training, key)
        outputs = [out.astype(jax.numpy.float32) for out in outputs]
        new_state = jax.tree.map(lambda array: array.astype(jax.numpy.float32), new_state)
        losses = [jax.numpy.mean((out - target) ** 2) if self.spec.loss == "mse" else
                  optax.softmax_cross_entropy_with_integer_labels(out, target).mean()
                  for out, target in zip(outputs, targets, strict=True)]
        return functools.reduce(operator.add, losses), (outputs, new_state)

    def _scaled_loss(self, params: Params, state: Params, inputs: jax.Array, targets: list[jax.Array],
                     key: jax.Array) -> tuple[jax.Array, Params]:
        """fp16 needs loss scaling so small gradients survive; the gradients are unscaled after."""
        loss, (_, new_state) = self.loss_of(params, state, inputs, targets, True, key)
        return loss * self._loss_scale, new_state

    @property
    def _loss_scale(self) -> float:
        return techniques.LOSS_SCALE if self.scenario.technique == "fp16" else 1.0

    @property
    def _micro_batches(self) -> int:
        return techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1

    def _split(self, array: jax.Array) -> list[jax.Array]:
        size = array.shape[0] // self._micro_batches
        return [array[i * size:(i + 1) * size] for i in range(self._micro_batches)]

    def _split_targets(self) -> list[list[jax.Array]]:
        """Per micro-batch, its part of each output's targets."""
        return [list(parts) for parts in zip(*(self._split(target) for target in self.targets), strict=True)]

    def build(self) -> None:
        # a key per layer by fold_in, one compiled op: iterating a split key array compiles a slice per element,
        # about 0.4 MiB of host memory per layer that would be the suite's key handling, not the net
        root = jax.random.key(0)
        self.params, self.state = [], []
        for step in self.spec.walk():
            key, weights = jax.random.fold_in(root, step.index), {}
            if "kernel" in step.params:
                bound = init_bound(step)
                weights["kernel"] = jax.random.uniform(key, step.params["kernel"], minval=-bound, maxval=bound)
            if "bias" in step.params:
                weights["bias"] = jax.numpy.zeros(step.params["bias"])
            if "scale" in step.params:  # norms and layer scales start at scale 1, offset 0 everywhere
                weights["scale"] = jax.numpy.ones(step.params["scale"])
            if "offset" in step.params:
                weights["offset"] = jax.numpy.zeros(step.params["offset"])
            if "slope" in step.params:
                weights["slope"] = jax.numpy.full(step.params["slope"], PReLU.start)
            self.params.append(weights)
            # ... batch norm and normalize at mean 0, variance 1 (and normalize's count at 0)
            self.state.append({name: (jax.numpy.ones if name == "variance" else jax.numpy.zeros)(shape)
                               for name, shape in step.statistics.items()})
        self.inputs = jax.random.normal(jax.random.fold_in(root, len(self.spec.layers)), self.input_shape)
        keys = [jax.random.fold_in(root, len(self.spec.layers) + 1 + output) for output in range(len(self.classes))]
        self.targets = [jax.random.randint(key, shape, 0, classes) if self.spec.loss == "cross_entropy"
                        else jax.random.normal(key, shape)
                        for key, classes, shape in zip(keys, self.classes, self.target_shapes, strict=True)]
        self.key = jax.random.PRNGKey(1)  # dropout's; a raw uint32 key, so the compiled step serializes
        self.synchronize()

    def param_count(self) -> int:
        return sum(leaf.size for leaf in jax.tree.leaves(self.params))

    def statistics_count(self) -> int:
        return sum(leaf.size for leaf in jax.tree.leaves(self.state))

    def _optimizer(self) -> optax.GradientTransformation:
        settings = OPTIMIZER_SETTINGS[self.scenario.optimizer]
        if self.scenario.optimizer in ("sgd", "momentum"):
            optimizer = optax.sgd(settings["learning_rate"], momentum=settings["momentum"] or None)
        else:
            optimizer = optax.adam(settings["learning_rate"], settings["beta_1"], settings["beta_2"],
                                   settings["epsilon"])
        if self._micro_batches > 1:  # optax's idiom: the update is applied every k calls
            return optax.MultiSteps(optimizer, every_k_schedule=self._micro_batches)
        return optimizer

    def _compile(self) -> dict[str, jax.stages.Compiled]:
        """Lowers and compiles the forward pass and, for training, the step (optimizer state made first)."""
        def forward(params: Params, state: Params, inputs: jax.Array) -> list[jax.Array]:
            return self.apply(params, state, inputs)[0]

        eager = self.scenario.execution_mode == "eager"
        executables = {"forward": _op_by_op(forward) if eager else
                       jax.jit(forward).lower(self.params, self.state, self.inputs).compile()}
        if self.scenario.kind == "train":
            optimizer = self._optimizer()

            def step(params: Params, state: Params, opt_state: object, inputs: jax.Array, targets: list[jax.Array],
                     key: jax.Array) -> tuple:
                (loss, state), grads = jax.value_and_grad(self._scaled_loss, has_aux=True)(params, state, inputs,
                                                                                           targets, key)
                grads = jax.tree.map(lambda grad: grad / self._loss_scale, grads)
                updates, opt_state = optimizer.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), state, opt_state, loss / self._loss_scale

            executables["train_step"] = _op_by_op(step) if eager else jax.jit(step, donate_argnums=(0, 1, 2)).lower(
                self.params, self.state, self.opt_state, self._split(self.inputs)[0], self._split_targets()[0],
                self.key).compile()
        return executables

    def compile(self) -> dict[str, object]:
        if self.scenario.kind == "train":  # one compiled init: under a cap, one allocation that fails, not one per leaf
            self.opt_state = jax.jit(self._optimizer().init)(self.params)
            jax.block_until_ready(self.opt_state)
        executables = self._compile()
        self.forward_compiled, self.step = executables["forward"], executables.get("train_step")
        if self.scenario.execution_mode == "eager":  # nothing compiled: no plan to read
            return {"what": "optimizer state created; train step and forward left to run op by op"}
        notes = {"what": "optimizer state created; train step and forward lowered and compiled ahead of time"}
        return notes | {"memory_analysis": {name: _plan(compiled) for name, compiled in executables.items()}}

    def train_step(self) -> dict[str, float]:
        total = 0.0
        for inputs, targets in zip(self._split(self.inputs), self._split_targets(), strict=True):
            self.key, key = jax.random.split(self.key)
            self.params, self.state, self.opt_state, loss = self.step(self.params, self.state, self.opt_state, inputs,
                                                                      targets, key)
            total += float(loss) / self._micro_batches
        return {"loss": total}

    def infer(self) -> None:
        if self.scenario.technique == "tracked":  # jax.vjp keeps the residuals a backward pass would need
            out, pullback = jax.vjp(jax.jit(lambda params, inputs: self.apply(params, self.state, inputs)[0]),
                                    self.params, self.inputs)
            jax.block_until_ready(out)
            del pullback
            return
        jax.block_until_ready(self.forward_compiled(self.params, self.state, self.inputs))

    def allocate(self, nbytes: int) -> object:
        import numpy as np

        return jax.device_put(np.ones(nbytes // 4, np.float32), self.device).block_until_ready()

    def synchronize(self) -> None:
        if getattr(self, "params", None) is not None:
            jax.block_until_ready(self.params)

    def _stats(self) -> dict[str, int] | None:
        """The device allocator's statistics; None on the CPU, or before the device exists."""
        return self.device.memory_stats() if hasattr(self, "device") else None

    def allocator_reading(self) -> tuple[int, int] | None:
        stats = self._stats()
        return (stats["bytes_in_use"], stats["peak_bytes_in_use"]) if stats else None

    def compile_counts(self) -> dict[str, int]:
        return self.compiles.so_far() if hasattr(self, "compiles") else {}

    def reset_peaks(self) -> None:
        """JAX cannot reset its peak: remember it, so a phase whose peak rose above it has a true in-phase peak."""
        stats = self._stats()
        self.peak_at_start = stats["peak_bytes_in_use"] if stats else 0

    def counters(self) -> dict[str, dict]:
        if not hasattr(self, "device"):
            return {}
        live = sum(array.nbytes for array in jax.live_arrays())
        figures = {"live_arrays": counter(live, AT_PHASE_END)}
        stats = self._stats()
        if stats:
            peak = stats["peak_bytes_in_use"]
            rose = peak > getattr(self, "peak_at_start", 0)
            figures |= {
                # rose in the phase: the process's highest value was reached inside it, so it is the phase's peak
                "peak_bytes_in_phase": counter(peak, PEAK_SINCE_PHASE_START if rose else PEAK_AT_MOST),
                "peak_bytes_in_use": counter(peak, PEAK_SINCE_PROCESS_START),
                "bytes_in_use": counter(stats["bytes_in_use"], AT_PHASE_END),
                "bytes_limit": counter(stats.get("bytes_limit", 0), AT_PHASE_END),
            }
            figures |= {name: counter(stats[name], AT_PHASE_END) for name in POOL_STATISTICS if name in stats}
        return figures

    def tensor_bytes(self) -> dict[str, int | None]:
        if getattr(self, "params", None) is None:
            return {}
        return {
            "weights": _nbytes([self.params, self.state]),
            "gradients": None,  # they live only inside the compiled step
            "optimizer_state": _nbytes(getattr(self, "opt_state", ())),
            "inputs": _nbytes([self.inputs, self.targets]),
        }

    def is_oom(self, error: BaseException) -> bool:
        return super().is_oom(error) or "RESOURCE_EXHAUSTED" in str(error) or "Out of memory" in str(error)

    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        walk = self.spec.walk()
        self.params = [{name: jax.numpy.asarray(given[name]) for name in step.params}
                       for step, given in zip(walk, weights, strict=True)]
        self.state = [{name: jax.numpy.asarray(given[name]) for name in step.statistics}
                      for step, given in zip(walk, weights, strict=True)]

    def evaluate(self, batch: np.ndarray, targets: list[np.ndarray], training: bool) -> tuple[list[np.ndarray], float]:
        import numpy as np

        # one compiled program: op by op, every layer's shapes would compile their own (EfficientNet: minutes)
        loss_of = jax.jit(self.loss_of, static_argnums=4)
        loss, (outputs, state) = loss_of(self.params, self.state, jax.numpy.asarray(batch),
                                         [jax.numpy.asarray(target) for target in targets], training,
                                         jax.random.PRNGKey(2))
        if training:
            self.state = state
        return [np.asarray(out) for out in outputs], float(loss)

    def statistics(self) -> list[dict[str, np.ndarray]]:
        """Batch norm's running statistics (normalize's are fixed: reported by no adapter)."""
        import numpy as np

        return [{name: np.asarray(value) for name, value in state.items()} if isinstance(layer, BatchNorm) else {}
                for layer, state in zip(self.spec.layers, self.state, strict=True)]


def _normalized(layer: Normalize, state: dict, x: jax.Array) -> jax.Array:
    """Keras's Normalization: by its fixed state, or by the spec's constants."""
    mean, variance = (layer.mean, layer.variance) if layer.mean else (state["mean"], state["variance"])
    return (x - jax.numpy.asarray(mean)) / jax.numpy.maximum(jax.numpy.sqrt(jax.numpy.asarray(variance)),
                                                             layer.least_deviation)


def _layer(layer: Layer, params: dict, state: dict, inputs: list[jax.Array], training: bool,
           key: jax.Array | None) -> tuple[jax.Array, dict | None]:
    """One spec layer on channels-last arrays; batch norm also returns its running statistics (None otherwise)."""
    x, numpy = inputs[0], jax.numpy
    if isinstance(layer, Conv2D):
        padding = layer.padding.upper() if layer.pixels is None else [(pixels, pixels) for pixels in layer.pixels]
        x = jax.lax.conv_general_dilated(x, params["kernel"], (layer.stride,) * 2, padding,
                                         rhs_dilation=(layer.dilation,) * 2, dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                         feature_group_count=layer.groups)
        x = x + params["bias"] if "bias" in params else x
        return checkpoint_name(x, CONV_OUTPUT), None
    if isinstance(layer, ConvTranspose2D):  # a conv of the input spread `stride` apart, by the flipped kernel
        x = jax.lax.conv_general_dilated(x, _transposed_kernel(params["kernel"], layer.groups), (1, 1),
                                         _transposed_padding(layer), lhs_dilation=(layer.stride,) * 2,
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=layer.groups)
        return (x + params["bias"] if "bias" in params else x), None
    if isinstance(layer, BatchNorm):
        axes = tuple(range(x.ndim - 1))
        if training:  # the batch's mean and biased variance, as flax's BatchNorm and Keras take them
            mean, variance = x.mean(axes), x.var(axes)
            statistics = {name: (1 - layer.momentum) * state[name] + layer.momentum * batch
                          for name, batch in (("mean", mean), ("variance", variance))}
        else:
            mean, variance, statistics = state["mean"], state["variance"], None
        normalized = (x - mean) * jax.lax.rsqrt(variance + layer.epsilon)
        normalized = normalized * params["scale"] if layer.scale else normalized
        return (normalized + params["offset"] if layer.center else normalized), statistics
    if isinstance(layer, Dense):
        x = x @ params["kernel"]
        return (x + params["bias"] if "bias" in params else x), None
    if isinstance(layer, MaxPool2D):  # padded with -inf, which never wins, the last window's overhang too
        pad = ((0, 0), *layer.sides(x.shape[1:]), (0, 0))
        return jax.lax.reduce_window(x, -numpy.inf, jax.lax.max, (1, layer.pool, layer.pool, 1),
                                     (1, layer.step, layer.step, 1), pad), None
    if isinstance(layer, AvgPool2D):  # padded with zeros, which count in the mean or not; an overhang never counts
        pad = ((0, 0), *layer.sides(x.shape[1:]), (0, 0))

        def window_sum(values: jax.Array) -> jax.Array:
            return jax.lax.reduce_window(values, 0.0, jax.lax.add, (1, layer.pool, layer.pool, 1),
                                         (1, layer.step, layer.step, 1), pad)

        inside = window_sum(numpy.ones((1, *x.shape[1:3], 1), x.dtype))  # a constant: each window's pixels inside
        return window_sum(x) / (layer.pool**2 if layer.count_include_pad else inside), None
    if isinstance(layer, Dropout) and training and layer.rate:  # per example: one draw broadcast over its values
        shape = (x.shape[0], *(1,) * (x.ndim - 1)) if layer.per_example else x.shape
        keep = jax.random.bernoulli(key, 1 - layer.rate, shape)
        return numpy.where(keep, x / (1 - layer.rate), 0), None
    if isinstance(layer, LayerNorm):
        mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(variance + layer.epsilon) * params["scale"] + params["offset"], None
    if isinstance(layer, (GroupNorm, InstanceNorm)):  # each group's channels contiguous, as torch and Keras group
        groups = x.reshape(*x.shape[:3], layer.groups_of(x.shape[1:]), -1)
        mean, variance = groups.mean((1, 2, 4), keepdims=True), groups.var((1, 2, 4), keepdims=True)
        normalized = ((groups - mean) * jax.lax.rsqrt(variance + layer.epsilon)).reshape(x.shape)
        return (normalized * params["scale"] + params["offset"] if layer.affine else normalized), None
    if isinstance(layer, Upsample2D):  # half-pixel centres: nearest repeats each pixel `scale` times
        size = (x.shape[0], x.shape[1] * layer.scale, x.shape[2] * layer.scale, x.shape[3])
        return jax.image.resize(x, size, method=layer.interpolation), None
    if isinstance(layer, (AdaptiveAvgPool2D, Resize2D)):  # constant (out, in) matrices of the static input's size,
        # averaging or interpolating (jax.image.resize contracts with such matrices too)
        matrices = layer.averaging if isinstance(layer, AdaptiveAvgPool2D) else layer.interpolation_matrices
        rows, columns = (numpy.asarray(matrix, x.dtype) for matrix in matrices(x.shape[1:]))
        return numpy.einsum("hH,nHWc,wW->nhwc", rows, x, columns), None
    simple = {GlobalAvgPool: lambda: x.mean((1, 2), keepdims=layer.keepdims),
              Flatten: lambda: x.reshape(x.shape[0], -1), Reshape: lambda: x.reshape(x.shape[0], *layer.shape),
              ReLU: lambda: jax.nn.relu(x), ReLU6: lambda: jax.nn.relu6(x), SiLU: lambda: jax.nn.silu(x),
              Sigmoid: lambda: jax.nn.sigmoid(x), HardSigmoid: lambda: jax.nn.hard_sigmoid(x),
              HardSwish: lambda: jax.nn.hard_silu(x), GELU: lambda: jax.nn.gelu(x, approximate=layer.approximate),
              LeakyReLU: lambda: jax.nn.leaky_relu(x, layer.negative_slope), ELU: lambda: jax.nn.elu(x, layer.alpha),
              Softplus: lambda: jax.nn.softplus(x), Mish: lambda: jax.nn.mish(x),
              LayerScale: lambda: x * params["scale"], Rescale: lambda: x * layer.scale + layer.offset,
              Normalize: lambda: _normalized(layer, state, x),
              ZeroPad2D: lambda: numpy.pad(x, ((0, 0), (layer.top, layer.bottom), (layer.left, layer.right), (0, 0))),
              Pad2D: lambda: numpy.pad(x, ((0, 0), (layer.top, layer.bottom), (layer.left, layer.right), (0, 0)),
                                       mode="reflect" if layer.mode == "reflect" else "edge"),
              PReLU: lambda: numpy.where(x >= 0, x, params["slope"] * x),
              Crop2D: lambda: x[:, layer.top:x.shape[1] - layer.bottom, layer.left:x.shape[2] - layer.right],
              ChannelSlice: lambda: x[..., layer.start:layer.stop],
              ChannelShuffle: lambda: x.reshape(*x.shape[:3], layer.groups, -1).swapaxes(3, 4).reshape(x.shape),
              SpaceToDepth: lambda: _space_to_depth(x, layer),
              Dropout: lambda: x, Add: lambda: sum(inputs[1:], x), Multiply: lambda: math.prod(inputs[1:], start=x),
              Subtract: lambda: x - inputs[1],
              Concat: lambda: numpy.concatenate(inputs, axis=-1)}
    return simple[type(layer)](), None


def _space_to_depth(x: jax.Array, layer: SpaceToDepth) -> jax.Array:
    n, h, w, c, b = *x.shape, layer.block
    tiles = x.reshape(n, h // b, b, w // b, b, c).transpose(0, *(axis + 1 for axis in layer.permutation))
    return tiles.reshape(n, h // b, w // b, b * b * c)


def _transposed_kernel(kernel: jax.Array, groups: int) -> jax.Array:
    """A transposed conv's kernel (kh, kw, out / groups, in) as the HWIO kernel (kh, kw, in / groups, out) of the
    conv that computes it: flipped in height and width, each group's in and out swapped."""
    kh, kw, out, channels = kernel.shape
    grouped = kernel.reshape(kh, kw, out, groups, channels // groups).transpose(0, 1, 4, 3, 2)
    return grouped.reshape(kh, kw, channels // groups, groups * out)[::-1, ::-1]


def _transposed_padding(layer: ConvTranspose2D) -> tuple[tuple[int, int], tuple[int, int]]:
    """The padding of that conv: the kernel less one, less what the layer cuts off each side."""
    return tuple((kernel - 1 - before, kernel - 1 - after) for kernel, (before, after) in zip(
        layer.kernel_size, layer.cut, strict=True))  # type: ignore[return-value]


def _nbytes(tree: object) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def _op_by_op(function: Callable) -> Callable:
    """`function` run eagerly, each primitive dispatched alone under jax.disable_jit() (still through XLA, one op
    at a time): what the compiled step's fusion and buffer reuse save shows against it."""
    def run(*args: object) -> object:
        with jax.disable_jit():
            return function(*args)

    return run


def _plan(compiled: jax.stages.Compiled) -> dict[str, dict]:
    """XLA's buffer assignment for one executable: what it plans, not what it measured."""
    analysis = compiled.memory_analysis()
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
             "generated_code_size_in_bytes")
    return {name.removesuffix("_size_in_bytes"): counter(getattr(analysis, name), STATIC_PLAN) for name in names}
