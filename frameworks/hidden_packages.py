"""Packages a Keras worker hides from itself, so that they look not installed (keras_adapter.py's docstring says why).

Hidden by the finders on sys.meta_path, never in sys.modules: each finder is wrapped so that it finds nothing under a
hidden name, so `import` raises ModuleNotFoundError and importlib.util.find_spec says None, as where the package is
not installed. A None in sys.modules, Python's own "not importable", is not absent to code that reads sys.modules:
SciPy's array-API helper (imported by scikit-learn, which `import keras` imports where it is installed) takes
`sys.modules.get("torch")` to be torch, and failed every Keras import of an interpreter that holds both.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from importlib.machinery import ModuleSpec
from typing import Any

# Each backend's packages, which a Keras process on another backend hides
BACKEND_PACKAGES = {"jax": ("jax", "jaxlib", "flax"), "tensorflow": ("tensorflow",), "torch": ("torch",)}
HIDDEN_VARIABLE = "FOOTPRINT_KERAS_HIDDEN"  # the installed packages hidden, comma-separated


def other_backends(backend: str) -> list[str]:
    """The other backends' packages that this interpreter holds (found, not imported)."""
    return [name for other, names in BACKEND_PACKAGES.items() if other != backend for name in names
            if importlib.util.find_spec(name) is not None]


class HidingFinder:
    """A finder of sys.meta_path that finds nothing under the hidden names, and is the finder it wraps for the rest
    (importlib.metadata asks the finders for `find_distributions`: a package's metadata stays readable)."""

    def __init__(self, finder: Any, hidden: frozenset[str]) -> None:
        self.finder, self.hidden = finder, hidden

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name.partition(".")[0] in self.hidden:
            return None
        return self.finder.find_spec(name, path, target)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.finder, attribute)


def hide_packages() -> None:
    """Hides the packages HIDDEN_VARIABLE names, and their submodules, before Keras is imported. One already
    imported stays. A finder added to sys.meta_path later is not wrapped: those Keras's import adds (absl's reload
    detector, six's for `six.moves`) find no package."""
    hidden = frozenset(filter(None, os.environ.get(HIDDEN_VARIABLE, "").split(",")))
    if hidden:
        sys.meta_path[:] = [HidingFinder(finder, hidden) if hasattr(finder, "find_spec") else finder
                            for finder in sys.meta_path]
