"""Keras 3 on TensorFlow, JAX or PyTorch: a Sequential model, `compile`, `train_on_batch`, `predict_on_batch`.

The same model code runs on each backend, fixed by KERAS_BACKEND before the import, so a Keras column
beside its raw backend's shows what Keras itself costs. The device half (starting the device, the
allocator's figures, synchronizing, the calibration array) is the backend's own: the torch and jax
adapters' for those backends, `TensorflowRuntime` here for TensorFlow, whose Keras path is story 3's.
Keras decides XLA itself (`jit_compile="auto"`: off on CPU-only TensorFlow); the record notes what it
chose. Tracing happens at the first call, not in compile.
"""

from __future__ import annotations

import contextlib
import math
from typing import TYPE_CHECKING, Protocol

from frameworks.adapter import Adapter
from frameworks.jax_adapter import JaxAdapter
from frameworks.torch_adapter import TorchAdapter
from models import allocators, backends, techniques
from models.record import AT_PHASE_END, PEAK_SINCE_PHASE_START, counter
from models.scenario import OPTIMIZER_SETTINGS, Scenario
from models.spec import Conv2D, Dense, Flatten, MaxPool2D, ReLU

if TYPE_CHECKING:
    import keras
    import numpy as np
    import tensorflow as tf

FRAMEWORKS = ("keras-jax", "keras-tensorflow", "keras-torch")


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


class TensorflowRuntime:
    """TensorFlow's device, allocator figures (get_memory_info works on the CPU too) and memory limit."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def environment(self) -> dict[str, str]:
        return {"TF_CPP_MIN_LOG_LEVEL": "2"}

    def import_framework(self) -> dict[str, str]:
        global tf
        import tensorflow as tf

        return {"tensorflow": tf.__version__}

    def init_device(self) -> str:
        kind = "GPU" if self.scenario.device == "cuda" else "CPU"
        mode, megabytes = allocators.parse(self.scenario.framework, self.scenario.allocator)
        if kind == "GPU" and mode == "limit":  # the one mode with no variable: set before the device starts
            gpus = tf.config.list_physical_devices("GPU")
            tf.config.set_logical_device_configuration(
                gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=int(megabytes))])
        devices = tf.config.list_logical_devices(kind)  # starts the runtime (and the CUDA context)
        if not devices:
            raise RuntimeError(f"TensorFlow sees no {kind} device")
        self.device_name = f"{kind}:0"
        return devices[0].name

    def synchronize(self) -> None:
        if self.scenario.device == "cuda" and hasattr(self, "device_name"):
            tf.test.experimental.sync_devices()

    def reset_peaks(self) -> None:
        if hasattr(self, "device_name"):
            tf.config.experimental.reset_memory_stats(self.device_name)

    def counters(self) -> dict[str, dict]:
        if not hasattr(self, "device_name"):
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
        return {"KERAS_BACKEND": self.backend} | self.runtime.environment() | hidden

    def import_framework(self) -> dict[str, str]:
        global keras
        versions = self.runtime.import_framework()
        import keras

        return versions | {"keras": keras.__version__, "keras_backend": keras.backend.backend()}

    def init_device(self) -> str:
        return self.runtime.init_device()

    def _placement(self) -> contextlib.AbstractContextManager:
        """TensorFlow places by scope; Keras on torch and JAX places on the one device the process sees."""
        return tf.device(self.runtime.device_name) if self.backend == "tensorflow" else contextlib.nullcontext()

    def _layer(self, layer: object, last: bool) -> keras.layers.Layer:
        init = {"kernel_initializer": keras.initializers.LecunUniform(seed=0), "bias_initializer": "zeros"}
        if last and self.scenario.technique in techniques.HALF_PRECISION:
            init["dtype"] = "float32"  # the mixed-precision guide's idiom: the output layer computes in fp32
        if isinstance(layer, Conv2D):
            return keras.layers.Conv2D(layer.filters, layer.kernel, layer.stride, layer.padding,
                                       use_bias=layer.bias, **init)
        dtype = {"dtype": init["dtype"]} if "dtype" in init else {}
        if isinstance(layer, MaxPool2D):
            return keras.layers.MaxPooling2D(layer.pool, layer.step, "valid", **dtype)
        if isinstance(layer, Dense):
            return keras.layers.Dense(layer.units, use_bias=layer.bias, **init)
        if isinstance(layer, Flatten):
            return keras.layers.Flatten(**dtype)
        if isinstance(layer, ReLU):
            return keras.layers.ReLU(**dtype)
        raise TypeError(f"no Keras layer for {layer!r}")

    def build(self) -> None:
        keras.utils.set_random_seed(0)
        policy = {"fp16": "mixed_float16", "bf16": "mixed_bfloat16"}.get(self.scenario.technique, "float32")
        keras.mixed_precision.set_global_policy(policy)  # before any layer exists, as Keras requires
        last = len(self.spec.layers) - 1
        with self._placement():
            self.layers = [self._layer(layer, index == last) for index, layer in enumerate(self.spec.layers)]
            blocks = self.layers
            if self.scenario.technique == "checkpoint":  # keras.remat over each segment of sqrt(N) layers
                blocks = [_checkpointed([self.layers[i] for i in segment])
                          for segment in techniques.segments(len(self.layers))]
            self.model = keras.Sequential([keras.Input(self.spec.input_shape), *blocks])
            self.inputs = keras.random.normal(self.input_shape, seed=0)
            if self.spec.loss == "cross_entropy":
                self.targets = keras.random.randint(self.target_shape, 0, self.classes, seed=1, dtype="int32")
            else:
                self.targets = keras.random.normal(self.target_shape, seed=1)
        self.loss_fn = (keras.losses.MeanSquaredError() if self.spec.loss == "mse"
                        else keras.losses.SparseCategoricalCrossentropy(from_logits=True))

    def param_count(self) -> int:
        return int(self.model.count_params())

    def compile(self) -> dict[str, object]:
        if self.scenario.kind == "infer":
            return {"what": "nothing to compile: predict_on_batch traces at its first call"}
        settings = OPTIMIZER_SETTINGS[self.scenario.optimizer] | (
            {"gradient_accumulation_steps": self._micro_batches} if self._micro_batches > 1 else {})
        optimizer = (keras.optimizers.Adam(**settings) if self.scenario.optimizer == "adam"
                     else keras.optimizers.SGD(**settings))
        self.model.compile(optimizer=optimizer, loss=self.loss_fn)  # mixed_float16 wraps it in LossScaleOptimizer
        return {"what": "model.compile: optimizer state and the traced step come at the first step",
                "jit_compile": bool(self.model.jit_compile)}

    @property
    def _micro_batches(self) -> int:
        return techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1

    def train_step(self) -> dict[str, float]:
        """One train_on_batch, or one per micro-batch: Keras's optimizer applies the update every k-th."""
        size, losses = self.input_shape[0] // self._micro_batches, []
        with self._placement():
            for start in range(0, self.input_shape[0], size):
                losses.append(float(self.model.train_on_batch(self.inputs[start:start + size],
                                                              self.targets[start:start + size])))
        return {"loss": sum(losses) / len(losses)}

    def _tracking(self) -> contextlib.AbstractContextManager:
        """What keeps a forward pass's residuals for a backward: a tape in TensorFlow, autograd in torch."""
        if self.backend == "tensorflow":
            return tf.GradientTape()
        import torch

        return torch.enable_grad()

    def infer(self) -> None:
        with self._placement():
            if self.scenario.technique == "tracked":  # the forward keeps what a gradient needs while it runs
                with self._tracking():
                    self.model(self.inputs, training=False)
            else:
                self.model.predict_on_batch(self.inputs)

    def allocate(self, nbytes: int) -> object:
        return self.runtime.allocate(nbytes)

    def synchronize(self) -> None:
        """JAX dispatches asynchronously: block on the model's arrays, or their creation (and an allocation
        that fails) would land in a later phase; the other backends' runtimes wait for their devices."""
        if self.backend == "jax" and hasattr(self, "model"):
            import jax

            jax.block_until_ready([variable.value for variable in self.model.variables] + [self.inputs, self.targets])
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
            "inputs": _nbytes([self.inputs, self.targets]),
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
        for step, layer in zip(self.spec.walk(), self.layers, strict=True):
            if step.params:
                layer.set_weights([weights[step.index][name] for name in step.params])

    def forward(self, batch: np.ndarray) -> np.ndarray:
        return keras.ops.convert_to_numpy(self.model(batch, training=False))

    def loss(self, batch: np.ndarray, target: np.ndarray) -> float:
        return float(keras.ops.convert_to_numpy(self.loss_fn(target, self.model(batch, training=False))))


def _checkpointed(layers: list) -> keras.layers.Layer:
    """A segment whose activations are recomputed in the backward pass: keras.remat, which is the backend's
    own (tf.recompute_grad, jax.checkpoint, torch.utils.checkpoint)."""

    class Checkpointed(keras.layers.Layer):
        def __init__(self, segment: list) -> None:
            super().__init__()
            self.segment = segment

        def build(self, shape: tuple) -> None:
            for layer in self.segment:
                layer.build(shape)
                shape = layer.compute_output_shape(shape)

        def call(self, inputs: object) -> object:
            def run(x: object) -> object:
                for layer in self.segment:
                    x = layer(x)
                return x

            return keras.remat(run)(inputs)

        def compute_output_shape(self, shape: tuple) -> tuple:
            for layer in self.segment:
                shape = layer.compute_output_shape(shape)
            return shape

    return Checkpointed(layers)
