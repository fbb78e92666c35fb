"""Keras 3 on TensorFlow, JAX or PyTorch: a functional model, `compile`, `train_on_batch`, `predict_on_batch`.

The same model code runs on each backend, fixed by KERAS_BACKEND before the import, so a Keras column
beside its raw backend's shows what Keras itself costs. The device half (starting the device, the
allocator's figures, synchronizing, the calibration array) is the backend's own: the torch and jax
adapters' for those backends, `TensorflowRuntime` here for TensorFlow, whose Keras path is story 3's.
Keras decides XLA itself (`jit_compile="auto"`: off on CPU-only TensorFlow); the record notes what it
chose. Tracing happens at the first call, not in compile.

A Keras process sees its own backend only: where the interpreter holds the other backends too (one prepared
interpreter for every framework, FOOTPRINT_PYTHON), Keras would import some of them just because they are installed
(keras/src/callbacks/orbax_checkpoint.py runs `import jax` at Keras's import, keras.utils.set_random_seed imports
TensorFlow where it is found), which a Keras user with one backend installed, and each tox env here, never pays.
The adapter hides those packages from the process (frameworks/hidden_packages.py; `HIDDEN_VARIABLE`, in the record's
env_set where any is found), so the import and build phases measure Keras and its backend alone, as the tox envs do.
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
import os
from types import SimpleNamespace
from typing import TYPE_CHECKING, Protocol

from frameworks import xla_compiles
from frameworks.adapter import Adapter, init_bound, listed
from frameworks.hidden_packages import HIDDEN_VARIABLE, hide_packages, other_backends
from frameworks.jax_adapter import JaxAdapter
from frameworks.torch_adapter import TorchAdapter, dynamo_graphs, saved_activation_bytes
from models import allocator_modes, backends, techniques
from models.record import AT_PHASE_END, PEAK_SINCE_PHASE_START, counter
from models.scenario import OPTIMIZER_SETTINGS, Scenario
from models.spec import (
    ELU,
    GELU,
    INPUT,
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
    LayerNorm,
    LayerScale,
    LayerShapes,
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
    Shape,
    Sigmoid,
    SiLU,
    Softplus,
    SpaceToDepth,
    Subtract,
    Upsample2D,
    ZeroPad2D,
    same_padding,
)

if TYPE_CHECKING:
    import keras
    import numpy as np
    import tensorflow as tf

FRAMEWORKS = ("keras-jax", "keras-tensorflow", "keras-torch")
JIT_COMPILE = {"auto": "auto", "jit": True, "no-jit": False}  # models.executions' Keras modes: compile()'s argument
ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"  # TensorFlow's switch for oneDNN, which the worker leaves to the user


class Runtime(Protocol):
    """The device half of an adapter, which a Keras adapter borrows from its backend."""

    def environment(self) -> dict[str, str]: ...
    def import_framework(self) -> dict[str, str]: ...
    def init_device(self) -> str: ...
    def synchronize(self) -> None: ...
    def reset_peaks(self) -> None: ...
    def counters(self) -> dict[str, dict]: ...
    def allocate(self, nbytes: int) -> object: ...
    def is_oom(self, error: BaseException) -> bool: ...
    def allocator_reading(self) -> tuple[int, int] | None: ...
    def compile_counts(self) -> dict[str, int]: ...
    def device_notes(self) -> dict[str, object]: ...


class TensorflowRuntime:
    """TensorFlow's device, allocator figures and memory limit.

    On the CPU, get_memory_info has figures only where oneDNN is on (its CPU allocator keeps statistics; TensorFlow's
    plain one keeps none). oneDNN also changes TensorFlow's CPU kernels, and TensorFlow turns it on by default only on
    some CPUs (AVX512_VNNI and later). The worker leaves it as the user's TensorFlow has it on this CPU, their own
    ONEDNN_VARIABLE included, so it measures the TensorFlow they run; the record says whether oneDNN was on and what
    set it, and where the allocator keeps no statistics, the phases have no allocator figures and the record says
    why (host memory, the CPU's figure that matters, is measured either way)."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.counted = False  # the allocator's figures can be read: the device started, and its allocator keeps them
        self.notes: dict[str, object] = {}

    def environment(self) -> dict[str, str]:
        return {"TF_CPP_MIN_LOG_LEVEL": "2"}

    def import_framework(self) -> dict[str, str]:
        global tf
        import tensorflow as tf

        return {"tensorflow": tf.__version__}

    def init_device(self) -> str:
        kind = "GPU" if self.scenario.device == "cuda" else "CPU"
        mode, megabytes = allocator_modes.parse(self.scenario.framework, self.scenario.allocator)
        if kind == "GPU" and mode == "limit":  # the one mode with no variable: set before the device starts
            gpus = tf.config.list_physical_devices("GPU")
            tf.config.set_logical_device_configuration(
                gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=int(megabytes))])
        devices = tf.config.list_logical_devices(kind)  # starts the runtime (and the CUDA context)
        if not devices:
            raise RuntimeError(f"TensorFlow sees no {kind} device")
        self.device_name = f"{kind}:0"
        self.notes = {"onednn": onednn()}
        try:
            tf.config.experimental.get_memory_info(self.device_name)
            self.counted = True
        except ValueError as error:  # "Allocator stats not available for device 'CPU:0'"
            off = kind == "CPU" and not self.notes["onednn"]["enabled"]
            self.notes["allocator_figures"] = (f"not available: TensorFlow's {self.device_name} allocator keeps no "
                                               + ("statistics with oneDNN off" if off else f"statistics ({error})"))
        return devices[0].name

    def device_notes(self) -> dict[str, object]:
        """oneDNN, on or off and what set it, and why the allocator has no figures where it has none."""
        return self.notes

    def synchronize(self) -> None:
        if self.scenario.device == "cuda" and hasattr(self, "device_name"):
            tf.test.experimental.sync_devices()

    def reset_peaks(self) -> None:
        if self.counted:
            tf.config.experimental.reset_memory_stats(self.device_name)

    def counters(self) -> dict[str, dict]:
        if not self.counted:
            return {}
        info = tf.config.experimental.get_memory_info(self.device_name)
        return {"allocator_peak": counter(info["peak"], PEAK_SINCE_PHASE_START),
                "allocator_current": counter(info["current"], AT_PHASE_END)}

    def allocate(self, nbytes: int) -> object:
        import numpy as np

        with tf.device(self.device_name):
            return tf.constant(np.ones(nbytes // 4, np.float32))

    def is_oom(self, error: BaseException) -> bool:
        return isinstance(error, MemoryError) or type(error).__name__ == "ResourceExhaustedError"

    def allocator_reading(self) -> tuple[int, int] | None:
        """TensorFlow's (current, peak) on a GPU, for the compile helper's scratch; the CPU autotunes nothing."""
        if self.scenario.device != "cuda" or not self.counted:
            return None
        info = tf.config.experimental.get_memory_info(self.device_name)
        return info["current"], info["peak"]

    def compile_counts(self) -> dict[str, int]:
        return {}


def onednn() -> dict[str, object]:
    """Whether TensorFlow's oneDNN is on in this process (its own tests ask the same private helper), and what set
    it: the user's ONEDNN_VARIABLE, or TensorFlow's default for this CPU."""
    from tensorflow.python.util import _pywrap_util_port

    user = os.environ.get(ONEDNN_VARIABLE)
    return {"enabled": bool(_pywrap_util_port.IsMklEnabled()),
            "set_by": "TensorFlow's default for this CPU" if user is None else f"the user's {ONEDNN_VARIABLE}={user}"}


RUNTIMES: dict[str, type] = {"tensorflow": TensorflowRuntime, "jax": JaxAdapter, "torch": TorchAdapter}


def _nbytes(tensors: list) -> int:
    """Keras variables and every backend's tensors: a shape and a dtype that Keras can name."""
    import numpy as np

    return sum(math.prod(t.shape) * np.dtype(keras.backend.standardize_dtype(t.dtype)).itemsize for t in tensors)


class KerasAdapter(Adapter):
    name = "keras"

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.backend = backends.backend(scenario.framework)
        self.runtime: Runtime = RUNTIMES[self.backend](scenario)

    def environment(self) -> dict[str, str]:
        hidden = {"CUDA_VISIBLE_DEVICES": ""} if self.scenario.device == "cpu" else {}  # or a backend takes a GPU
        others = other_backends(self.backend)
        return ({"KERAS_BACKEND": self.backend} | self.runtime.environment() | hidden
                | ({HIDDEN_VARIABLE: ",".join(others)} if others else {}))

    @property
    def compiles_ahead(self) -> bool:
        """Where Keras compiles with XLA on a GPU (on JAX always; on TensorFlow with jit_compile, which "auto"
        turns on there), its first step would autotune inside the measured phase: a helper runs the steps first,
        into the backend's persistent cache (or where the autotuner is faked, for the CPU's tests)."""
        if JIT_COMPILE[self.scenario.execution_mode] is False or self.backend == "torch":
            return False
        return self.scenario.device == "cuda" or (self.backend == "jax" and xla_compiles.autotune_faked())

    def cache_environment(self, folder: str) -> dict[str, str]:
        """JAX's persistent cache, or TensorFlow's for its XLA clusters (TF_XLA_FLAGS, with the user's own)."""
        if self.backend == "jax":
            return xla_compiles.cache_environment(folder)
        flags = os.environ.get("TF_XLA_FLAGS", "")
        return {"TF_XLA_FLAGS": f"{flags} --tf_xla_persistent_cache_directory={folder}".strip()}

    def allocator_reading(self) -> tuple[int, int] | None:
        return self.runtime.allocator_reading()

    def compile_counts(self) -> dict[str, int]:
        return self.runtime.compile_counts()

    def device_notes(self) -> dict[str, object]:
        return self.runtime.device_notes()

    def import_framework(self) -> dict[str, str]:
        global keras
        hide_packages()
        versions = self.runtime.import_framework()
        import keras

        return versions | {"keras": keras.__version__, "keras_backend": keras.backend.backend()}

    def init_device(self) -> str:
        return self.runtime.init_device()

    def _placement(self) -> contextlib.AbstractContextManager:
        """TensorFlow places by scope; Keras on torch and JAX places on the one device the process sees."""
        return tf.device(self.runtime.device_name) if self.backend == "tensorflow" else contextlib.nullcontext()

    def _parts(self, step: LayerShapes, output: bool) -> list[keras.layers.Layer]:
        """The Keras layers that compute one spec layer, applied in turn (a padding before a conv or a pool); the
        one holding the weights is the last."""
        layer = step.layer
        # the mixed-precision guide's idiom: an output layer computes in fp32
        dtype = {"dtype": "float32"} if output and self.scenario.technique in techniques.HALF_PRECISION else {}
        if isinstance(layer, Conv2D):
            # LeCun uniform on the canonical kernel's fan-in, which Keras's own LecunUniform computes from its
            # depthwise kernel (k, k, C, 1) as if it read every channel
            init = keras.initializers.RandomUniform(-init_bound(step), init_bound(step), seed=0)
            options = {"use_bias": layer.bias, "bias_initializer": "zeros", "dilation_rate": layer.dilation, **dtype}
            # torch's pixels per side: zeros, then a valid conv
            padding = layer.padding if layer.pixels is None else "valid"
            pad = [keras.layers.ZeroPadding2D(layer.pixels, **dtype)] if layer.pixels and any(layer.pixels) else []
            if _depthwise(step):
                return [*pad, keras.layers.DepthwiseConv2D(layer.kernel_size, layer.stride, padding,
                                                           depthwise_initializer=init, **options)]
            return [*pad, keras.layers.Conv2D(layer.filters, layer.kernel_size, layer.stride, padding,
                                              groups=layer.groups, kernel_initializer=init, **options)]
        if isinstance(layer, ConvTranspose2D):
            return [_classes().TransposedConv(layer, init_bound(step), **dtype)]
        if isinstance(layer, Dense):
            init = keras.initializers.RandomUniform(-init_bound(step), init_bound(step), seed=0)
            return [keras.layers.Dense(layer.units, use_bias=layer.bias, kernel_initializer=init,
                                       bias_initializer="zeros", **dtype)]
        if isinstance(layer, MaxPool2D):  # torch's padding never wins the max: minus infinity, the overhang too
            sides = layer.sides(step.input_shape)
            pad = [_classes().MinusInfinityPadding(sides, **dtype)] if any(map(any, sides)) else []
            return [*pad, keras.layers.MaxPooling2D(layer.pool, layer.step, "valid", **dtype)]
        if isinstance(layer, BatchNorm):  # Keras's momentum is the old statistic's weight, the spec's the new one's
            return [keras.layers.BatchNormalization(axis=-1, momentum=1.0 - layer.momentum, epsilon=layer.epsilon,
                                                    scale=layer.scale, center=layer.center, **dtype)]
        if isinstance(layer, AvgPool2D):
            return _average_pool(layer, step.input_shape, dtype)
        if isinstance(layer, (GroupNorm, InstanceNorm)):  # an instance norm is a group norm of a channel a group
            return [keras.layers.GroupNormalization(layer.groups_of(step.input_shape), -1, layer.epsilon,
                                                    center=layer.affine, scale=layer.affine, **dtype)]
        if isinstance(layer, SpaceToDepth):  # (H / b, b, W / b, b, C) transposed: Keras's own layers
            height, width, channels = step.input_shape
            tiles = (height // layer.block, layer.block, width // layer.block, layer.block, channels)
            return [keras.layers.Reshape(tiles, **dtype),
                    keras.layers.Permute(tuple(axis + 1 for axis in layer.permutation), **dtype),
                    keras.layers.Reshape(step.output_shape, **dtype)]
        if isinstance(layer, ChannelShuffle):  # (H, W, groups, C / groups) transposed: Keras's own layers
            height, width, channels = step.input_shape
            return [keras.layers.Reshape((height, width, layer.groups, channels // layer.groups), **dtype),
                    keras.layers.Permute((1, 2, 4, 3), **dtype), keras.layers.Reshape(step.input_shape, **dtype)]
        # one draw per example: Keras's noise_shape, the batch's axis left to the input
        noise = (None, *(1,) * len(step.input_shape)) if isinstance(layer, Dropout) and layer.per_example else None
        simple = {
            AdaptiveAvgPool2D: lambda: keras.layers.AdaptiveAveragePooling2D(layer.size, "channels_last", **dtype),
            GlobalAvgPool: lambda: keras.layers.GlobalAveragePooling2D(keepdims=layer.keepdims, **dtype),
            Dropout: lambda: keras.layers.Dropout(layer.rate, noise_shape=noise, seed=0, **dtype),
            Flatten: lambda: keras.layers.Flatten(**dtype),
            Reshape: lambda: keras.layers.Reshape(layer.shape, **dtype),
            ReLU: lambda: keras.layers.ReLU(**dtype),
            ReLU6: lambda: keras.layers.ReLU(max_value=6.0, **dtype),
            SiLU: lambda: keras.layers.Activation("silu", **dtype),
            Sigmoid: lambda: keras.layers.Activation("sigmoid", **dtype),
            HardSigmoid: lambda: keras.layers.Activation("hard_sigmoid", **dtype),
            HardSwish: lambda: keras.layers.Activation("hard_silu", **dtype),
            GELU: lambda: keras.layers.Activation(
                functools.partial(keras.activations.gelu, approximate=layer.approximate), **dtype),
            LeakyReLU: lambda: keras.layers.LeakyReLU(negative_slope=layer.negative_slope, **dtype),
            ELU: lambda: keras.layers.ELU(alpha=layer.alpha, **dtype),
            Softplus: lambda: keras.layers.Activation("softplus", **dtype),
            Mish: lambda: keras.layers.Activation("mish", **dtype),
            LayerNorm: lambda: keras.layers.LayerNormalization(axis=-1, epsilon=layer.epsilon, **dtype),
            LayerScale: lambda: _layer_scale(step.input_shape[-1], **dtype),
            Rescale: lambda: keras.layers.Rescaling(layer.scale, layer.offset, **dtype),
            Normalize: lambda: keras.layers.Normalization(axis=-1, **dtype, **({"mean": list(layer.mean), "variance":
                                                                   list(layer.variance)} if layer.mean else {})),
            ZeroPad2D: lambda: keras.layers.ZeroPadding2D(((layer.top, layer.bottom), (layer.left, layer.right)),
                                                          **dtype),
            Pad2D: lambda: _classes().EdgePadding(((layer.top, layer.bottom), (layer.left, layer.right)), layer.mode,
                                                  **dtype),
            # a slope per channel shared over height and width (Keras's shared_axes), or one over every axis
            PReLU: lambda: keras.layers.PReLU(keras.initializers.Constant(PReLU.start), shared_axes=list(
                range(1, len(step.input_shape) + 1) if layer.shared else range(1, len(step.input_shape))), **dtype),
            Crop2D: lambda: keras.layers.Cropping2D(((layer.top, layer.bottom), (layer.left, layer.right)), **dtype),
            ChannelSlice: lambda: _classes().ChannelSlice(layer.start, layer.stop, **dtype),
            Upsample2D: lambda: keras.layers.UpSampling2D(layer.scale, interpolation=layer.interpolation, **dtype),
            Resize2D: lambda: _classes().InterpolatingResize(layer.interpolation_matrices(step.input_shape), **dtype),
            Add: lambda: keras.layers.Add(**dtype),
            Multiply: lambda: keras.layers.Multiply(**dtype),
            Concat: lambda: keras.layers.Concatenate(axis=-1, **dtype),
            Subtract: lambda: keras.layers.Subtract(**dtype),
        }
        if type(layer) not in simple:
            raise TypeError(f"no Keras layer for {layer!r}")
        return [simple[type(layer)]()]

    def build(self) -> None:
        keras.utils.set_random_seed(0)
        policy = {"fp16": "mixed_float16", "bf16": "mixed_bfloat16"}.get(self.scenario.technique, "float32")
        keras.mixed_precision.set_global_policy(policy)  # before any layer exists, as Keras requires
        steps = self.spec.walk()
        runs = {}  # keras.remat over each run a recomputing technique names, one Keras layer per run
        if self.scenario.technique in techniques.RECOMPUTING:
            runs = {run.start: run for run in techniques.segments(self.spec, self.scenario.technique)}
        with self._placement():
            self.parts = [self._parts(step, step.index in self.spec.output_layers) for step in steps]
            self.layers = [parts[-1] for parts in self.parts]  # each spec layer's weights
            inputs = keras.Input(self.spec.input_shape)
            values, index = {INPUT: inputs}, 0
            while index < len(steps):
                if index not in runs:
                    values[index] = _apply(self.parts[index], steps[index], values)
                    index += 1
                    continue
                run = runs[index]
                sources, outputs = techniques.boundary(self.spec, run)
                inner = {source: values[source] for source in sources}
                for member in run:  # builds the run's layers on the symbolic inputs, for their weights and shapes
                    inner[member] = _apply(self.parts[member], steps[member], inner)
                recomputed = _classes().Recomputed([(steps[member], self.parts[member]) for member in run], sources,
                                                   outputs, [inner[output] for output in outputs], self.backend)
                results = recomputed([values[source] for source in sources])
                values.update(zip(outputs, results if isinstance(results, (list, tuple)) else [results], strict=True))
                index = run.stop
            outputs = [values[index] for index in self.spec.output_layers]
            self.model = keras.Model(inputs, outputs[0] if len(outputs) == 1 else outputs)
            self.inputs = keras.random.normal(self.input_shape, seed=0)
            self.targets = [keras.random.randint(shape, 0, classes, seed=1 + output, dtype="int32")
                            if self.spec.loss == "cross_entropy" else keras.random.normal(shape, seed=1 + output)
                            for output, (classes, shape) in enumerate(zip(self.classes, self.target_shapes,
                                                                          strict=True))]
        self.loss_fn = (keras.losses.MeanSquaredError() if self.spec.loss == "mse"
                        else keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def _loss(self, targets: list, output: object) -> object:
        """The spec's loss of each output against its target, summed (equally weighted), as Keras's compile sums
        one loss per output."""
        return functools.reduce(operator.add, (self.loss_fn(target, out)
                                               for target, out in zip(targets, listed(output), strict=True)))

    def _targets(self, start: int, size: int) -> object:
        """The targets of examples start..start + size, as train_on_batch takes them: one array per output."""
        parts = [target[start:start + size] for target in self.targets]
        return parts[0] if len(parts) == 1 else parts

    def param_count(self) -> int:
        return sum(math.prod(variable.shape) for variable in self.model.trainable_weights)

    def statistics_count(self) -> int:
        """Batch norm's moving mean and variance, Normalization's mean, variance and count: Keras's non-trainable
        weights (dropout's seed is no weight)."""
        return sum(math.prod(variable.shape) for variable in self.model.non_trainable_weights)

    def compile(self) -> dict[str, object]:
        jit = JIT_COMPILE[self.scenario.execution_mode]
        if self.scenario.kind == "infer":
            if jit == "auto":  # as a user predicts with a model never compiled
                return {"what": "nothing to compile: predict_on_batch traces at its first call"}
            self.model.compile(jit_compile=jit)
            return {"what": "model.compile(jit_compile=...) only: predict_on_batch traces at its first call",
                    "jit_compile": bool(self.model.jit_compile)}
        settings = OPTIMIZER_SETTINGS[self.scenario.optimizer] | (
            {"gradient_accumulation_steps": self._micro_batches} if self._micro_batches > 1 else {})
        optimizer = (keras.optimizers.Adam(**settings) if self.scenario.optimizer == "adam"
                     else keras.optimizers.SGD(**settings))
        # mixed_float16 wraps the optimizer in a LossScaleOptimizer
        self.model.compile(optimizer=optimizer, loss=self.loss_fn, jit_compile=jit)
        return {"what": "model.compile: optimizer state and the traced step come at the first step",
                "jit_compile": bool(self.model.jit_compile)}

    @property
    def _micro_batches(self) -> int:
        return techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1

    def train_step(self) -> dict[str, float]:
        """One train_on_batch, or one per micro-batch: Keras's optimizer applies the update every k-th. On torch,
        autograd's saved-tensor hooks measure what the forward keeps, as for raw torch."""
        size, losses = self.input_shape[0] // self._micro_batches, []

        def step() -> float:
            with self._placement():
                for start in range(0, self.input_shape[0], size):
                    losses.append(_total(self.model.train_on_batch(self.inputs[start:start + size],
                                                                   self._targets(start, size))))
            return sum(losses) / len(losses)

        if self.backend != "torch":
            return {"loss": step()}
        if self.model.jit_compile:  # Keras wraps its step in torch.compile: count its graphs, as for raw torch
            return {"loss": step(), **dynamo_graphs()}
        owned = [variable.value for variable in self.model.variables] + [self.inputs, *self.targets]
        loss, saved = saved_activation_bytes(owned, step)
        return {"loss": loss, "saved_activation_bytes": saved}

    def _tracking(self) -> contextlib.AbstractContextManager:
        """What keeps a forward pass's residuals for a backward: a tape in TensorFlow, autograd in torch."""
        if self.backend == "tensorflow":
            return tf.GradientTape()
        import torch

        return torch.enable_grad()

    def infer(self) -> dict[str, object]:
        with self._placement():
            if self.scenario.technique == "tracked":  # the forward keeps what a gradient needs while it runs
                with self._tracking():
                    self.model(self.inputs, training=False)
            else:
                self.model.predict_on_batch(self.inputs)
        return dynamo_graphs() if self.backend == "torch" and self.model.jit_compile else {}

    def allocate(self, nbytes: int) -> object:
        return self.runtime.allocate(nbytes)

    def synchronize(self) -> None:
        """JAX dispatches asynchronously: block on the model's arrays, or their creation (and an allocation
        that fails) would land in a later phase; the other backends' runtimes wait for their devices."""
        if self.backend == "jax" and hasattr(self, "model"):
            import jax

            jax.block_until_ready([variable.value for variable in self.model.variables] + [self.inputs, *self.targets])
        self.runtime.synchronize()

    def reset_peaks(self) -> None:
        self.runtime.reset_peaks()

    def counters(self) -> dict[str, dict]:
        return self.runtime.counters()

    def tensor_bytes(self) -> dict[str, int | None]:
        if not hasattr(self, "model"):
            return {}
        optimizer = self.model.optimizer if self.model.compiled else None
        return {
            "weights": _nbytes(self.model.weights),
            "gradients": self._gradient_bytes(),
            "optimizer_state": _nbytes(optimizer.variables) if optimizer is not None else 0,
            "inputs": _nbytes([self.inputs, *self.targets]),
        }

    def _gradient_bytes(self) -> int | None:
        """On torch, Keras leaves gradients in each variable's .grad; elsewhere they live inside the step."""
        if self.backend != "torch":
            return None
        grads = [variable.value.grad for variable in self.model.trainable_weights]
        return _nbytes([grad for grad in grads if grad is not None])

    def is_oom(self, error: BaseException) -> bool:
        return self.runtime.is_oom(error)


    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        """Keras orders each layer's weights as the spec does: kernel, bias; batch and layer norm's gamma, beta
        (batch norm's moving mean and moving variance after); a layer scale's gamma; Normalization's mean, variance and
        count."""
        for step, layer in zip(self.spec.walk(), self.layers, strict=True):
            if step.weights:
                values = [weights[step.index][name] for name in step.weights]
                if _depthwise(step):  # canonical (k, k, 1, C), Keras's depthwise kernel (k, k, C, 1)
                    values[0] = values[0].transpose(0, 1, 3, 2)
                if isinstance(step.layer, PReLU):  # canonical (C,) or (1,), Keras's alpha (1, 1, C) or (1, 1, 1)
                    values[0] = values[0].reshape(layer.alpha.shape)
                layer.set_weights(values)
                if isinstance(step.layer, Normalize):  # its call reads constants made from the weights at build
                    layer.finalize_state()

    def evaluate(self, batch: np.ndarray, targets: list[np.ndarray], training: bool) -> tuple[list[np.ndarray], float]:
        """One call of the model: in training its batch norms assign their moving statistics once. Eagerly, but on
        JAX, where op by op every layer's shapes would compile their own program: there one compiled stateless call,
        its new statistics assigned after."""
        with self._placement():
            inputs, given = keras.ops.convert_to_tensor(batch), [keras.ops.convert_to_tensor(t) for t in targets]
            if self.backend == "jax":
                output, loss = self._compiled_call(inputs, given, training)
            else:
                output = self.model(inputs, training=training)
                loss = self._loss(given, output)
        return [keras.ops.convert_to_numpy(out) for out in listed(output)], float(keras.ops.convert_to_numpy(loss))

    def _compiled_call(self, inputs: object, targets: list, training: bool) -> tuple[object, object]:
        import jax

        def call(trainable: list, non_trainable: list, inputs: object, targets: list) -> tuple:
            output, non_trainable = self.model.stateless_call(trainable, non_trainable, inputs, training=training)
            return output, self._loss(targets, output), non_trainable

        output, loss, non_trainable = jax.jit(call)([variable.value for variable in self.model.trainable_variables],
                                                    [variable.value for variable in
                                                     self.model.non_trainable_variables], inputs, targets)
        for variable, value in zip(self.model.non_trainable_variables, non_trainable, strict=True):
            variable.assign(value)
        return output, loss

    def statistics(self) -> list[dict[str, np.ndarray]]:
        """Keras's moving variance averages the batch's biased variance: batch_normalization.py assigns
        `moving_variance * self.momentum + variance * (1.0 - self.momentum)` with `variance` from `ops.moments`,
        the mean squared deviation (jnp.var, tf.nn.moments, torch's E[x^2] - E[x]^2), where torch's own batch
        norm takes the unbiased one."""
        return [{"mean": layer.moving_mean.numpy(), "variance": layer.moving_variance.numpy()}
                if isinstance(step.layer, BatchNorm) else {} for step, layer in zip(self.spec.walk(), self.layers,
                                                                                     strict=True)]


def _depthwise(step: LayerShapes) -> bool:
    """A conv that Keras's DepthwiseConv2D computes: one filter per input channel."""
    layer = step.layer
    return isinstance(layer, Conv2D) and 1 < layer.groups == layer.filters == step.input_shape[-1]


def _apply(parts: list, step: LayerShapes, values: dict[int, object], training: bool | None = None) -> object:
    """One spec layer on its inputs (a list for a merge); `training` reaches the layers that read it."""
    inputs = [values[source] for source in step.inputs]
    x = inputs if len(inputs) > 1 else inputs[0]
    for part in parts:
        modal = training is not None and isinstance(part, (keras.layers.BatchNormalization, keras.layers.Dropout))
        x = part(x, training=training) if modal else part(x)
    return x


def _layer_scale(channels: int, **options: object) -> keras.layers.Layer:
    """keras.applications' own LayerScale, the one a Keras ConvNeXt runs (Keras exports it under no public name),
    started at 1 as the spec's is."""
    from keras.src.applications.convnext import LayerScale as ConvNeXtLayerScale

    return ConvNeXtLayerScale(1.0, channels, **options)


@functools.cache
def _minus_infinity_padding() -> type:
    """The max-pool padding layer, defined once Keras is imported."""

    class MinusInfinityPadding(keras.layers.Layer):
        """Pads height and width with minus infinity: torch's max-pool padding, which never wins the max."""

        def __init__(self, sides: tuple[tuple[int, int], tuple[int, int]], **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.sides = sides  # (top, bottom), (left, right)

        def call(self, inputs: object) -> object:
            return keras.ops.pad(inputs, ((0, 0), *self.sides, (0, 0)), constant_values=float("-inf"))

        def compute_output_shape(self, shape: tuple) -> tuple:
            grown = tuple(None if size is None else size + sum(pad) for size, pad in zip(shape[1:3], self.sides,
                                                                                       strict=True))
            return (shape[0], *grown, shape[3])

    return MinusInfinityPadding


@functools.cache
def _edge_padding() -> type:
    """The reflect and replicate padding layer, defined once Keras is imported: Keras has none, and keras.ops.pad's
    modes differ by backend (TensorFlow's has no edge mode, torch's reads symmetric as replicate), so it is built
    of slices, flips and repeats every backend computes alike."""

    class EdgePadding(_minus_infinity_padding()):
        """An image's edge continued per side: mirrored without the edge pixel (reflect), or the edge repeated."""

        def __init__(self, sides: tuple[tuple[int, int], tuple[int, int]], mode: str, **kwargs: object) -> None:
            super().__init__(sides, **kwargs)
            self.mode = mode

        def call(self, inputs: object) -> object:
            ops = keras.ops
            for axis, (before, after) in zip((1, 2), self.sides, strict=True):
                size = inputs.shape[axis]

                def part(values: object, start: int, stop: int, axis: int = axis) -> object:
                    return values[(slice(None),) * axis + (slice(start, stop),)]

                if self.mode == "reflect":
                    head = ops.flip(part(inputs, 1, before + 1), axis)
                    tail = ops.flip(part(inputs, size - 1 - after, size - 1), axis)
                else:
                    head = ops.repeat(part(inputs, 0, 1), before, axis)
                    tail = ops.repeat(part(inputs, size - 1, size), after, axis)
                inputs = ops.concatenate([piece for piece, pixels in ((head, before), (inputs, 1), (tail, after))
                                          if pixels], axis=axis)
            return inputs

    return EdgePadding


@functools.cache
def _transposed_conv() -> type:
    """torch's ConvTranspose2d as a Keras layer, defined once Keras is imported: keras.ops.conv_transpose, what
    Conv2DTranspose calls ('valid', with torch's output_padding), per group of channels, then torch's padding cut
    off each side. Conv2DTranspose itself has neither groups nor torch's padding."""

    class TransposedConv(keras.layers.Layer):
        """A transposed conv of the spec's options; its weights the spec's kernel (kh, kw, out / groups, in) and
        bias."""

        def __init__(self, layer: ConvTranspose2D, bound: float, **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.layer, self.bound = layer, bound

        def build(self, shape: tuple) -> None:
            init = keras.initializers.RandomUniform(-self.bound, self.bound, seed=0)
            self.kernel = self.add_weight(shape=(*self.layer.kernel_size, self.layer.filters // self.layer.groups,
                                                 shape[-1]), initializer=init, name="kernel")
            self.bias = self.add_weight(shape=(self.layer.filters,), initializer="zeros", name="bias") \
                if self.layer.bias else None

        def call(self, inputs: object) -> object:
            layer, ops = self.layer, keras.ops
            extra = tuple(max(before - after, 0) for before, after in layer.cut)  # torch's output_padding per axis
            each = inputs.shape[-1] // layer.groups
            parts = [ops.conv_transpose(inputs[..., group * each:(group + 1) * each],
                                        self.kernel[..., group * each:(group + 1) * each], layer.stride, "valid",
                                        output_padding=extra) for group in range(layer.groups)]
            out = parts[0] if len(parts) == 1 else ops.concatenate(parts, axis=-1)
            (top, bottom), (left, right) = ((before, after + added) for (before, after), added in zip(
                layer.cut, extra, strict=True))
            out = out[:, top:out.shape[1] - bottom, left:out.shape[2] - right]
            return out if self.bias is None else out + self.bias

        def compute_output_shape(self, shape: tuple) -> tuple:
            return (shape[0], *self.layer.output_shape(tuple(shape[1:]))[:2], self.layer.filters)

    return TransposedConv


@functools.cache
def _interpolating_resize() -> type:
    """torch's F.interpolate to a size or by any scale as a Keras layer, defined once Keras is imported: the spec's
    per-axis interpolation matrices contracted with the image (keras.ops.image.resize has neither torch's nearest
    nor its align_corners)."""

    class InterpolatingResize(keras.layers.Layer):
        """rows (out_h, in_h) x the image x columns (out_w, in_w)^T, per channel."""

        def __init__(self, matrices: tuple, **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.matrices = matrices

        def call(self, inputs: object) -> object:
            rows, columns = (keras.ops.convert_to_tensor(matrix, inputs.dtype) for matrix in self.matrices)
            return keras.ops.einsum("hH,nHWc,wW->nhwc", rows, inputs, columns)

        def compute_output_shape(self, shape: tuple) -> tuple:
            return (shape[0], len(self.matrices[0]), len(self.matrices[1]), shape[3])

    return InterpolatingResize


@functools.cache
def _channel_slice() -> type:
    """The channel slice layer, defined once Keras is imported (Keras has no slicing layer)."""

    class ChannelSlice(keras.layers.Layer):
        """Channels start to stop of the last axis."""

        def __init__(self, start: int, stop: int, **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.start, self.stop = start, stop

        def call(self, inputs: object) -> object:
            return inputs[..., self.start:self.stop]

        def compute_output_shape(self, shape: tuple) -> tuple:
            return (*shape[:-1], self.stop - self.start)

    return ChannelSlice


@functools.cache
def _inside_average_pooling() -> type:
    """The average pool that leaves its padding out of the mean, where Keras's 'same' is not its padding."""

    class InsideAveragePooling(keras.layers.Layer):
        """The mean over each window's pixels inside the image: the padding and overhang left out of it."""

        def __init__(self, pool: int, step: int, sides: tuple[tuple[int, int], tuple[int, int]],
                     **kwargs: object) -> None:
            super().__init__(**kwargs)
            self.pool, self.step, self.sides = pool, step, sides

        def _window_mean(self, values: object) -> object:
            padded = keras.ops.pad(values, ((0, 0), *self.sides, (0, 0)))
            return keras.ops.average_pool(padded, self.pool, self.step, "valid")

        def call(self, inputs: object) -> object:  # each window's share of pixels inside, from ones: a constant
            return self._window_mean(inputs) / self._window_mean(keras.ops.ones_like(inputs[:1, :, :, :1]))

        def compute_output_shape(self, shape: tuple) -> tuple:
            sizes = tuple(None if size is None else (size + sum(pad) - self.pool) // self.step + 1
                          for size, pad in zip(shape[1:3], self.sides, strict=True))
            return (shape[0], *sizes, shape[3])

    return InsideAveragePooling


def _average_pool(layer: AvgPool2D, shape: Shape, dtype: dict) -> list:
    """Padding that counts in the mean: zeros, then a valid pool. Padding left out of it: Keras's own 'same' where
    that is the layer's padding (the odd pixel after: ceil_mode's overhang), else the mean over the pixels inside."""
    if layer.count_include_pad:
        pad = [keras.layers.ZeroPadding2D(layer.padding, **dtype)] if layer.padding else []
        return [*pad, keras.layers.AveragePooling2D(layer.pool, layer.step, "valid", **dtype)]
    sides = layer.sides(shape)
    if sides == tuple(same_padding(size, layer.pool, layer.step) for size in shape[:2]):
        return [keras.layers.AveragePooling2D(layer.pool, layer.step, "same", **dtype)]
    return [_classes().InsideAveragePooling(layer.pool, layer.step, sides, **dtype)]


@functools.cache
def _recomputed() -> type:
    """The recomputed-run layer, defined once Keras is imported."""

    class Recomputed(keras.layers.Layer):
        """A run of layers whose activations are recomputed in the backward pass: keras.remat, which is the
        backend's own (tf.recompute_grad, jax.checkpoint, torch.utils.checkpoint), over the run's inputs.

        The members' statistics updates are caught in a stateless scope inside the recomputed function and returned
        from it, then assigned once outside: a JAX value assigned inside jax.checkpoint would escape its trace, and
        TensorFlow and torch run the function again in the backward pass, which would update them twice. The
        members get `training` explicitly, since torch recomputes outside the Keras call that set it."""

        def __init__(self, members: list, sources: tuple[int, ...], outputs: tuple[int, ...], specs: list,
                     backend: str) -> None:
            # float32 with no input casting: the members cast as they would alone; the variables read in full
            super().__init__(dtype="float32")
            self._convert_input_args = False
            self.steps = [step for step, _ in members]
            self.parts = [list(parts) for _, parts in members]
            self.sources, self.outputs, self.backend = sources, outputs, backend
            self.specs = [keras.KerasTensor(spec.shape, spec.dtype) for spec in specs]
            self.built = True  # the members were built on the run's symbolic inputs

        def call(self, inputs: object, training: bool | None = None) -> object:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            layers = [layer for parts in self.parts for layer in parts]
            state = [variable for layer in layers for variable in layer.non_trainable_variables]
            # the state as it is now, copied: on torch and TensorFlow the value read is the variable's own storage,
            # which the assignment below overwrites before the backward pass recomputes (dropout's seed would move)
            mapping = [(variable, keras.ops.copy(variable.value)) for variable in state]
            if self.backend == "jax":  # its train step holds every value in its stateless scope, which ours must too
                mapping += [(variable, variable.value) for layer in layers for variable in layer.trainable_variables]

            def run(*args: object) -> list:
                values = dict(zip(self.sources, args, strict=True))
                with keras.StatelessScope(mapping) as scope:
                    for step, parts in zip(self.steps, self.parts, strict=True):
                        values[step.index] = _apply(parts, step, values, training)
                updated = [keras.ops.stop_gradient(scope.get_current_value(variable)) for variable in state]
                return [values[output] for output in self.outputs] + updated

            results = keras.remat(run)(*inputs)
            if training:
                for variable, value in zip(state, results[len(self.outputs):], strict=True):
                    variable.assign(value)
            outputs = list(results[:len(self.outputs)])
            return outputs[0] if len(outputs) == 1 else outputs

        def compute_output_spec(self, inputs: object, training: bool | None = None) -> object:
            return self.specs[0] if len(self.specs) == 1 else list(self.specs)

    return Recomputed


def _total(result: float | list[float]) -> float:
    """train_on_batch's loss: a net of several outputs gets the total first, then each output's own."""
    return float(result[0] if isinstance(result, list) else result)


@functools.cache
def _classes() -> SimpleNamespace:
    """The adapter's own Keras layers, defined once Keras is imported."""
    return SimpleNamespace(MinusInfinityPadding=_minus_infinity_padding(), Recomputed=_recomputed(),
                           InsideAveragePooling=_inside_average_pooling(), ChannelSlice=_channel_slice(),
                           EdgePadding=_edge_padding(), TransposedConv=_transposed_conv(),
                           InterpolatingResize=_interpolating_resize())
