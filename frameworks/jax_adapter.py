"""JAX with optax: a pure function over a list of per-layer parameters, jitted ahead of time.

The train step (parameters and optimizer state donated, as in idiomatic JAX training) and the forward
pass are lowered and compiled in a helper process before the phases, then loaded in `compile`. On a
GPU, compiling autotunes GEMM and convolution algorithms with scratch buffers far larger than the
step needs; JAX's peak counter cannot be reset, so scratch in the worker would hide every later
phase's peak. The helper's own figures record that scratch, labelled as compile-time; XLA's static
memory plan of each executable is in the record too.
"""

from __future__ import annotations

import functools
import pickle
from importlib import metadata
from typing import TYPE_CHECKING

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
from models.spec import Conv2D, Dense, Flatten, MaxPool2D, ReLU

if TYPE_CHECKING:
    import jax
    import numpy as np
    import optax

Params = list[dict[str, "jax.Array"]]
POOL_STATISTICS = ("pool_bytes", "peak_pool_bytes")  # the BFC pool's size, where this jaxlib reports it


class JaxAdapter(Adapter):
    name = "jax"
    compiles_ahead = True

    def environment(self) -> dict[str, str]:
        return {"JAX_PLATFORMS": self.scenario.device}

    def helper_environment(self) -> dict[str, str]:
        """The helper grows its pool as needed: a second 75 % pool beside the worker's would not fit."""
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}

    def import_framework(self) -> dict[str, str]:
        global jax, optax
        import jax
        import optax

        return {"jax": jax.__version__, "jaxlib": metadata.version("jaxlib"), "optax": optax.__version__}

    def init_device(self) -> str:
        try:
            self.device = jax.devices()[0]  # starts the backend: on a GPU, the context and any preallocation
        except Exception as error:
            raise RuntimeError(f"JAX cannot start platform {self.scenario.device!r} (no GPU, or no CUDA "
                               f"plugin in {jax.__version__}?)") from error
        jax.device_put(0.0, self.device).block_until_ready()
        return f"{self.device.platform}: {self.device.device_kind}"

    def apply(self, params: Params, inputs: jax.Array) -> jax.Array:
        """The net; with the checkpoint technique each segment of sqrt(N) layers is a jax.checkpoint."""
        if self.scenario.technique != "checkpoint":
            return self._run(self.spec.layers, params, inputs)
        x = inputs
        for segment in techniques.segments(len(self.spec.layers)):
            layers = tuple(self.spec.layers[i] for i in segment)
            x = jax.checkpoint(functools.partial(self._run, layers))([params[i] for i in segment], x)
        return x

    @staticmethod
    def _run(layers: tuple, params: Params, inputs: jax.Array) -> jax.Array:
        x = inputs
        for layer, weights in zip(layers, params, strict=True):
            if isinstance(layer, Conv2D):
                x = jax.lax.conv_general_dilated(x, weights["kernel"], (layer.stride,) * 2, layer.padding.upper(),
                                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
            elif isinstance(layer, Dense):
                x = x @ weights["kernel"]
            elif isinstance(layer, MaxPool2D):
                window = (1, layer.pool, layer.pool, 1)
                x = jax.lax.reduce_window(x, -jax.numpy.inf, jax.lax.max, window, (1, layer.step, layer.step, 1),
                                          "VALID")
            elif isinstance(layer, Flatten):
                x = x.reshape(x.shape[0], -1)
            elif isinstance(layer, ReLU):
                x = jax.nn.relu(x)
            if "bias" in weights:
                x = x + weights["bias"]
        return x

    def loss_of(self, params: Params, inputs: jax.Array, targets: jax.Array) -> jax.Array:
        half = {"fp16": jax.numpy.float16, "bf16": jax.numpy.bfloat16}.get(self.scenario.technique)
        if half:  # mixed precision: fp32 master weights, cast for the computation, the loss in fp32
            params, inputs = jax.tree.map(lambda array: array.astype(half), (params, inputs))
        out = self.apply(params, inputs).astype(jax.numpy.float32)
        if self.spec.loss == "mse":
            return jax.numpy.mean((out - targets) ** 2)
        return optax.softmax_cross_entropy_with_integer_labels(out, targets).mean()

    def _scaled_loss(self, params: Params, inputs: jax.Array, targets: jax.Array) -> jax.Array:
        """fp16 needs loss scaling so small gradients survive; the gradients are unscaled after."""
        return self.loss_of(params, inputs, targets) * self._loss_scale

    @property
    def _loss_scale(self) -> float:
        return techniques.LOSS_SCALE if self.scenario.technique == "fp16" else 1.0

    @property
    def _micro_batches(self) -> int:
        return techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1

    def _split(self, array: jax.Array) -> list[jax.Array]:
        size = array.shape[0] // self._micro_batches
        return [array[i * size:(i + 1) * size] for i in range(self._micro_batches)]

    def build(self) -> None:
        keys = iter(jax.random.split(jax.random.key(0), len(self.spec.layers) + 2))
        self.params = []
        for step in self.spec.walk():
            key, weights = next(keys), {}
            if "kernel" in step.params:
                bound = init_bound(step)
                weights["kernel"] = jax.random.uniform(key, step.params["kernel"], minval=-bound, maxval=bound)
            if "bias" in step.params:
                weights["bias"] = jax.numpy.zeros(step.params["bias"])
            self.params.append(weights)
        self.inputs = jax.random.normal(next(keys), self.input_shape)
        if self.spec.loss == "cross_entropy":
            self.targets = jax.random.randint(next(keys), self.target_shape, 0, self.classes)
        else:
            self.targets = jax.random.normal(next(keys), self.target_shape)
        self.synchronize()

    def param_count(self) -> int:
        return sum(leaf.size for leaf in jax.tree.leaves(self.params))

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
        executables = {"forward": jax.jit(self.apply).lower(self.params, self.inputs).compile()}
        if self.scenario.kind == "train":
            optimizer = self._optimizer()

            def step(params: Params, opt_state: object, inputs: jax.Array, targets: jax.Array) -> tuple:
                loss, grads = jax.value_and_grad(self._scaled_loss)(params, inputs, targets)
                grads = jax.tree.map(lambda grad: grad / self._loss_scale, grads)
                updates, opt_state = optimizer.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state, loss / self._loss_scale

            executables["train_step"] = jax.jit(step, donate_argnums=(0, 1)).lower(
                self.params, self.opt_state, self._split(self.inputs)[0], self._split(self.targets)[0]).compile()
        return executables

    def compile(self) -> dict[str, object]:
        if self.scenario.kind == "train":
            self.opt_state = self._optimizer().init(self.params)
            jax.block_until_ready(self.opt_state)
        if self.compiled_path:
            from jax.experimental import serialize_executable

            with open(self.compiled_path, "rb") as saved:
                payload = pickle.load(saved)
            executables = {name: serialize_executable.deserialize_and_load(*parts)
                           for name, parts in payload["executables"].items()}
            notes = {"what": "optimizer state created; the forward pass and train step loaded, as compiled and "
                             "autotuned by the helper process before the phases",
                     "compiled_in": "helper process", "helper_memory": payload["memory"]}
        elif self.helper_failure:
            raise RuntimeError(self.helper_failure)
        else:  # the helper itself, or a worker used without one (the parity checks)
            before = self._stats()
            executables = self._compile()
            self.compile_memory = _compile_scratch(before, self._stats())
            notes = {"what": "optimizer state created; train step and forward lowered and compiled ahead of time",
                     "compiled_in": "this process"}
        self.forward_compiled, self.step = executables["forward"], executables.get("train_step")
        return notes | {"memory_analysis": {name: _plan(compiled) for name, compiled in executables.items()}}

    def save_compiled(self, path: str) -> None:
        from jax.experimental import serialize_executable

        executables = {"forward": self.forward_compiled} | ({"train_step": self.step} if self.step else {})
        payload = {"executables": {name: serialize_executable.serialize(compiled)
                                   for name, compiled in executables.items()},
                   "memory": self.compile_memory}
        with open(path, "wb") as out:
            pickle.dump(payload, out)

    def train_step(self) -> dict[str, float]:
        total = 0.0
        for inputs, targets in zip(self._split(self.inputs), self._split(self.targets), strict=True):
            self.params, self.opt_state, loss = self.step(self.params, self.opt_state, inputs, targets)
            total += float(loss) / self._micro_batches
        return {"loss": total}

    def infer(self) -> None:
        if self.scenario.technique == "tracked":  # jax.vjp keeps the residuals a backward pass would need
            out, pullback = jax.vjp(jax.jit(self.apply), self.params, self.inputs)
            out.block_until_ready()
            del pullback
            return
        self.forward_compiled(self.params, self.inputs).block_until_ready()

    def allocate(self, nbytes: int) -> object:
        import numpy as np

        return jax.device_put(np.ones(nbytes // 4, np.float32), self.device).block_until_ready()

    def synchronize(self) -> None:
        if getattr(self, "params", None) is not None:
            jax.block_until_ready(self.params)

    def _stats(self) -> dict[str, int] | None:
        """The device allocator's statistics; None on the CPU, or before the device exists."""
        return self.device.memory_stats() if hasattr(self, "device") else None

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
            "weights": _nbytes(self.params),
            "gradients": None,  # they live only inside the compiled step
            "optimizer_state": _nbytes(getattr(self, "opt_state", ())),
            "inputs": _nbytes([self.inputs, self.targets]),
        }

    def is_oom(self, error: BaseException) -> bool:
        return super().is_oom(error) or "RESOURCE_EXHAUSTED" in str(error) or "Out of memory" in str(error)

    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        self.params = [{name: jax.numpy.asarray(value) for name, value in layer.items()} for layer in weights]

    def forward(self, batch: np.ndarray) -> np.ndarray:
        import numpy as np

        return np.asarray(self.apply(self.params, jax.numpy.asarray(batch)))

    def loss(self, batch: np.ndarray, target: np.ndarray) -> float:
        return float(self.loss_of(self.params, jax.numpy.asarray(batch), jax.numpy.asarray(target)))


def _nbytes(tree: object) -> int:
    return sum(leaf.nbytes for leaf in jax.tree.leaves(tree))


def _compile_scratch(before: dict | None, after: dict | None) -> dict[str, dict]:
    """What compiling added above the arrays live before it (GPU autotuning's scratch); nothing on the CPU."""
    if not before or not after:
        return {}
    scratch = max(0, after["peak_bytes_in_use"] - before["bytes_in_use"])
    return {"compile_scratch": counter(scratch, PEAK_SINCE_PHASE_START if after["peak_bytes_in_use"] >
                                       before["peak_bytes_in_use"] else PEAK_AT_MOST),
            "peak_bytes_in_use": counter(after["peak_bytes_in_use"], PEAK_SINCE_PROCESS_START)}


def _plan(compiled: jax.stages.Compiled) -> dict[str, dict]:
    """XLA's buffer assignment for one executable: what it plans, not what it measured."""
    analysis = compiled.memory_analysis()
    names = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes",
             "generated_code_size_in_bytes")
    return {name.removesuffix("_size_in_bytes"): counter(getattr(analysis, name), STATIC_PLAN) for name in names}
