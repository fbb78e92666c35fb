"""Framework names as data: a Keras framework runs Keras 3 on a backend, and shares that backend's allocator.

`keras-jax` is Keras on JAX; its raw counterpart is `jax`. The first TensorFlow adapter was named
`tensorflow` and ran Keras on TensorFlow: records written then read as `keras-tensorflow`.
"""

from __future__ import annotations

KERAS = "keras-"
RENAMED = {"tensorflow": "keras-tensorflow"}


def current(framework: str) -> str:
    """A framework's name today (older records may carry an earlier one)."""
    return RENAMED.get(framework, framework)


def backend(framework: str) -> str:
    """The array library a framework runs on: its allocator, its devices, its autodiff."""
    return current(framework).removeprefix(KERAS)


def is_keras(framework: str) -> bool:
    return current(framework).startswith(KERAS)


def side_by_side(framework: str) -> tuple[str, bool]:
    """A sort key that puts each Keras framework right after its raw backend (jax, keras-jax, torch, ...)."""
    return backend(framework), is_keras(framework)


def raw(framework: str) -> str | None:
    """The raw framework a Keras framework is compared with (None for TensorFlow: Keras is its idiom here)."""
    name = backend(framework)
    return name if is_keras(framework) and name in ("torch", "jax") else None
