"""The gate a worker started ahead of its turn waits at (models.protocol.GATE_VARIABLE).

The orchestrator may start the next scenario's worker while the current one measures, so that its interpreter start
and framework import overlap the measurement. Such a worker runs its import phase (its host figures are its own
process's), then waits here, holding no device context and no device memory, until the orchestrator releases it:
after the current worker has exited. A worker started in its turn has no gate and never waits.
"""

from __future__ import annotations

import os
import time

from models.protocol import GATE_VARIABLE, RELEASE


class GateClosed(Exception):
    """The orchestrator closed the gate without releasing the worker: its run stopped, or it is gone."""


class Gate:
    """This worker's gate, read from its environment once (its children have none)."""

    def __init__(self) -> None:
        named = os.environ.pop(GATE_VARIABLE, "")
        self.fd: int | None = int(named) if named else None
        if self.fd is not None:
            os.set_inheritable(self.fd, False)

    @property
    def held(self) -> bool:
        """Whether the worker has yet to pass its gate (a worker started in its turn never is)."""
        return self.fd is not None

    def wait(self) -> dict:
        """Blocks until the orchestrator releases this held worker; returns how long it waited. Raises GateClosed
        where the gate closed instead."""
        assert self.fd is not None, "a worker started in its turn has no gate to wait at"
        started = time.monotonic()
        try:
            word = os.read(self.fd, len(RELEASE))
        finally:
            os.close(self.fd)
            self.fd = None
        if word != RELEASE:
            raise GateClosed("the orchestrator closed this worker's gate without releasing it")
        return {"waited_s": round(time.monotonic() - started, 3), "released_at": time.monotonic()}
