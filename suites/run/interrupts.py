"""SIGINT, SIGTERM and SIGHUP (the terminal closed) stop a run cleanly: the running worker's process group is killed
by the code waiting on it (orchestrator.run_scenario), what was measured stays stored, and the command exits 130."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

EXIT_CODE = 130  # the shell's code for a run stopped by a signal (128 + SIGINT)
received: list[str] = []  # the signals that stopped this process, for the commands' exit code
_deferring: list[bool] = []  # set while the main thread is in `deferred()`


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by a stop signal; a KeyboardInterrupt, so pytest stops the suite as for Ctrl-C."""


def _stop(number: int, frame: FrameType | None) -> None:
    received.append(signal.Signals(number).name)
    if not _deferring:
        raise Interrupted(f"stopped by {received[-1]}")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A stop that arrives inside is raised at its end: a worker started inside is then one its caller knows, and
    kills (a stop raised inside subprocess.Popen, after the fork, would leave the worker running unseen). Only the
    main thread receives signals; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = len(received)
    _deferring.append(True)
    try:
        yield
    finally:
        _deferring.pop()
    if len(received) > before:
        raise Interrupted(f"stopped by {received[-1]}")


def install() -> None:
    """The three signals stop the run the same way (SIGTERM and SIGHUP would otherwise end the process with nothing
    finished: the store and the worker's folder left, no `missing` list)."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _stop)
