"""Which frameworks exist and which interpreter runs each, found without importing any of them."""

from __future__ import annotations

import ast
import os
import shutil
from pathlib import Path

from models import backends
from suites.run.device import no_gpu

ROOT = Path(__file__).resolve().parents[2]


class SetupError(RuntimeError):
    """The machine is not ready to run a framework; the message says what to do."""


def _names(adapter: Path) -> list[str]:
    """The frameworks an adapter runs: its literal FRAMEWORKS tuple (read, not imported), else its file's name.

    A family's names are `<file>-<variant>` (keras_adapter.py runs keras-jax), which is how the worker
    finds the module again."""
    for node in ast.parse(adapter.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "FRAMEWORKS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return [adapter.name.removesuffix("_adapter.py")]


def frameworks() -> list[str]:
    """Every framework of every `frameworks/<name>_adapter.py`, each Keras one after its raw backend: adding a
    framework is adding its adapter."""
    names = [name for path in (ROOT / "frameworks").glob("*_adapter.py") for name in _names(path)]
    return sorted(names, key=backends.side_by_side)


def interpreter(framework: str, device: str = "cpu") -> str:
    """FOOTPRINT_PYTHON_<FRAMEWORK>, else FOOTPRINT_PYTHON (one prepared interpreter), else the tox env.

    The tox env for a GPU run is `<framework>-cuda`, which holds the framework's CUDA build. A GPU run where no GPU
    is visible is refused first, with NVML's reason (`device.no_gpu`): every command that runs one comes here.
    """
    missing = no_gpu(device)
    if missing:
        raise SetupError(missing)
    own = _variable(framework)
    for variable in (own, "FOOTPRINT_PYTHON"):
        if os.environ.get(variable):
            return _overriding(variable)
    env = framework + ("-cuda" if device == "cuda" else "")
    path = ROOT / ".tox" / env / "bin" / "python"
    if not path.exists():
        raise SetupError(f"no interpreter for {framework} on {device}: run `make envs`, or set {own}")
    return str(path)


def check_overrides() -> None:
    """Every interpreter a FOOTPRINT_PYTHON variable names, checked up front: a SetupError, in one line, for one that
    is no executable file (a command that starts none, `check`, would otherwise meet it in the middle)."""
    for variable in ("FOOTPRINT_PYTHON", *(_variable(name) for name in frameworks())):
        if os.environ.get(variable):
            _overriding(variable)


def _variable(framework: str) -> str:
    return f"FOOTPRINT_PYTHON_{framework.upper().replace('-', '_')}"  # KERAS_JAX: a name a shell can set


def _overriding(variable: str) -> str:
    """The interpreter `variable` names, where it is an executable file (a path, or a name on PATH): a missing file
    or a folder would fail every worker's start, each with a traceback."""
    given = os.environ[variable]
    if not shutil.which(given):
        raise SetupError(f"{variable}={given}: no executable file there (missing, a folder, or not executable): set "
                         f"it to a Python interpreter, or unset it to use the tox environment")
    return given
