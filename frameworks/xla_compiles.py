"""What XLA compiled in this process: every compile and every load from JAX's persistent cache, counted.

On a GPU, XLA autotunes convolutions and GEMMs while it compiles, with scratch taken from the same allocator
as the model's arrays; JAX's peak counter cannot be reset, so that scratch would hide the peaks of every later
phase. JAX and Keras on JAX therefore compile in a helper process first, into JAX's persistent compilation
cache, and the worker loads from it (a cache hit compiles and autotunes nothing: the executable holds XLA's
choices). The counts below are how a record shows that the worker's phases loaded and did not compile.

FAKE_AUTOTUNE is a fake at a boundary the CPU does not have: with it set, every real compile (not a cache hit)
takes that many bytes of host memory at once, as GPU autotuning takes device memory, so the CPU tests can see
where compile scratch lands.
"""

from __future__ import annotations

import os

FAKE_AUTOTUNE = "FOOTPRINT_FAKE_AUTOTUNE_BYTES"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"  # fired after each compile, a cache hit's too
HIT_EVENT = "/jax/compilation_cache/cache_hits"


def cache_environment(folder: str) -> dict[str, str]:
    """JAX's persistent cache in `folder`, every executable written (none is too small or too quick to keep);
    XLA's per-fusion autotune results go with it (jax_persistent_cache_enable_xla_caches' default)."""
    return {"JAX_COMPILATION_CACHE_DIR": folder, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def autotune_faked() -> bool:
    return bool(os.environ.get(FAKE_AUTOTUNE))


class Compiles:
    """Counts XLA's compiles in this process from JAX's monitoring events (listeners run in the compiling thread)."""

    def __init__(self) -> None:
        import jax.monitoring

        self.compiled = self.loaded = 0
        self._hit = False
        self._fake_bytes = int(os.environ.get(FAKE_AUTOTUNE) or 0)
        jax.monitoring.register_event_listener(self._event)
        jax.monitoring.register_event_duration_secs_listener(self._duration)

    def _event(self, name: str, **_: object) -> None:
        if name == HIT_EVENT:
            self._hit = True

    def _duration(self, name: str, _seconds: float, **_: object) -> None:
        if name != COMPILE_EVENT:
            return
        if self._hit:
            self.loaded += 1
        else:
            self.compiled += 1
            if self._fake_bytes:  # the FAKE autotuner's scratch: touched page by page, then freed
                scratch = bytearray(self._fake_bytes)
                scratch[::4096] = b"\1" * len(scratch[::4096])
                del scratch
        self._hit = False

    def so_far(self) -> dict[str, int]:
        return {"xla_compiled_so_far": self.compiled, "xla_loaded_from_cache_so_far": self.loaded}
