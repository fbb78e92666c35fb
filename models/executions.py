"""How a framework runs the net: eagerly or compiled, and in which compiler mode (a scenario axis).

Each framework names its own modes; `default` is what it does unless told otherwise (torch eager, JAX
jit, Keras `jit_compile="auto"`). A mode that cannot run on a device is recorded as not applicable
with the reason below, never run as another.
"""

from __future__ import annotations

from models.spec import SpecError

DEFAULT = "default"
KERAS_MODES = {
    "auto": 'jit_compile="auto": Keras decides (TensorFlow: XLA on a GPU, not on a CPU-only machine; JAX: jit; '
            "torch: eager)",
    "jit": "jit_compile=True (TensorFlow: the step compiled by XLA; JAX: jax.jit; torch: Keras wraps its step in "
           "torch.compile)",
    "no-jit": "jit_compile=False (TensorFlow: a tf.function graph without XLA; JAX: the step op by op, no jax.jit; "
              "torch: eager)",
}
MODES: dict[str, dict[str, str]] = {
    "torch": {
        "eager": "eager execution, op by op",
        "compile": "torch.compile, default mode (Dynamo and Inductor; compiled at the first call)",
        "reduce-overhead": "torch.compile(mode='reduce-overhead'): CUDA graphs with their private memory pool",
        "max-autotune": "torch.compile(mode='max-autotune'): Inductor benchmarks kernel choices while compiling",
    },
    "jax": {
        "jit": "jax.jit: the step and the forward pass compiled by XLA",
        "eager": "op by op under jax.disable_jit(): no fusion, no buffer reuse across ops",
    },
    "keras-tensorflow": KERAS_MODES,
    "keras-jax": KERAS_MODES,
    "keras-torch": KERAS_MODES,
}
DEFAULTS = {"torch": "eager", "jax": "jit", "keras-tensorflow": "auto", "keras-jax": "auto", "keras-torch": "auto"}
NEEDS_CUDA = {("torch", "reduce-overhead"): "CUDA graphs need a CUDA device: on the CPU there is nothing to capture"}


def resolve(framework: str, execution: str) -> str:
    """The framework's own name for a mode (`default` becomes the framework's default); a one-line error for a mode
    the framework does not have."""
    modes = MODES.get(framework, {})
    name = DEFAULTS.get(framework, DEFAULT) if execution == DEFAULT else execution
    if modes and name not in modes:
        raise SpecError(f"unknown execution {execution!r} for {framework}; valid: {', '.join((DEFAULT, *modes))}")
    return name


def unavailable(framework: str, execution: str, device: str) -> str | None:
    """Why a mode cannot run on this device; None where it can."""
    if device != "cuda":
        return NEEDS_CUDA.get((framework, resolve(framework, execution)))
    return None


def auto_means(framework: str, device: str) -> str | None:
    """The mode Keras's `jit_compile="auto"` becomes (Keras 3.15, Trainer._resolve_auto_jit_compile): off on torch,
    on for JAX, for TensorFlow on only where a GPU is visible; None for a framework without `auto`."""
    if framework == "keras-tensorflow":
        return "jit" if device == "cuda" else "no-jit"
    return {"keras-torch": "no-jit", "keras-jax": "jit"}.get(framework)


def examples(framework: str, device: str) -> list[str]:
    """The compile suite's modes of a framework on a device: its default first, then each mode that runs otherwise
    (Keras's `auto` already is one of its other two)."""
    same = (DEFAULTS[framework], auto_means(framework, device))
    return [DEFAULT, *(name for name in MODES[framework] if name not in same)]
