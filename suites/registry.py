"""Which frameworks exist and which interpreter runs each, found without importing any of them."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class SetupError(RuntimeError):
    """The machine is not ready to run a framework; the message says what to do."""


def frameworks() -> list[str]:
    """One framework per `frameworks/<name>_adapter.py`: adding a framework is adding its adapter."""
    return sorted(path.name.removesuffix("_adapter.py") for path in (ROOT / "frameworks").glob("*_adapter.py"))


def interpreter(framework: str, device: str = "cpu") -> str:
    """FOOTPRINT_PYTHON_<FRAMEWORK>, else FOOTPRINT_PYTHON (one prepared interpreter), else the tox env.

    The tox env for a GPU run is `<framework>-cuda`, which holds the framework's CUDA build.
    """
    for variable in (f"FOOTPRINT_PYTHON_{framework.upper()}", "FOOTPRINT_PYTHON"):
        if os.environ.get(variable):
            return os.environ[variable]
    env = framework + ("-cuda" if device == "cuda" else "")
    path = ROOT / ".tox" / env / "bin" / "python"
    if not path.exists():
        variable = f"FOOTPRINT_PYTHON_{framework.upper()}"
        raise SetupError(f"no interpreter for {framework} on {device}: run `make envs`, or set {variable}")
    return str(path)
