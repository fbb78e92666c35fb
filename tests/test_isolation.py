"""The orchestrator never imports a framework; models/ is pure data; the worker never plots."""

from __future__ import annotations

import ast
import os
import sys

import pytest

from models.scenario import Scenario
from suites.run.orchestrator import run_scenario
from suites.run.registry import ROOT, frameworks

FRAMEWORK_MODULES = {"torch", "tensorflow", "keras", "jax", "jaxlib", "optax", "flax"}


def _imports(package: str) -> dict[str, set[str]]:
    """Per file of the package, its subfolders' too (by its path in the package), the top-level names it imports."""
    found = {}
    for path in (ROOT / package).rglob("*.py"):
        if "__pycache__" in path.parts:
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        found[path.relative_to(ROOT / package).as_posix()] = names
    return found


@pytest.mark.parametrize("package", ["suites", "models"])
def test_no_framework_is_imported_by(package: str) -> None:
    for module, names in _imports(package).items():
        assert not names & FRAMEWORK_MODULES, f"{package}/{module} imports {names & FRAMEWORK_MODULES}"
        assert "frameworks" not in names, f"{package}/{module} imports the worker side"


def test_the_importers_load_only_when_a_file_of_theirs_is_read() -> None:
    """No models module outside the importers imports one at its top level (only their front door,
    models.importers.files, whose load_spec_file imports the one a file needs): a worker importing the spec never
    reaches onnx. What the importers themselves may import is test_layout's rule."""
    importers = {f"models.importers.{path.stem}" for path in (ROOT / "models" / "importers").glob("*.py")
                 if path.stem not in ("__init__", "files")}
    assert len(importers) >= 5
    for path in (path for path in (ROOT / "models").rglob("*.py") if "importers" not in path.parts):
        top = [node for node in ast.parse(path.read_text()).body if isinstance(node, (ast.Import, ast.ImportFrom))]
        named = ({alias.name for node in top for alias in node.names}
                 | {f"{node.module}.{alias.name}" for node in top if isinstance(node, ast.ImportFrom)
                    for alias in node.names} | {node.module or "" for node in top if isinstance(node, ast.ImportFrom)})
        assert not importers & named, path.relative_to(ROOT)


def test_the_worker_side_never_plots() -> None:
    for module, names in _imports("frameworks").items():
        assert "matplotlib" not in names, module


def test_orchestrator_process_has_no_framework_after_runs() -> None:
    for framework in frameworks():
        record = run_scenario(Scenario.create(framework, "keras-small", kind="infer", device="cpu"))
        assert record["status"] == "ok", record["failure"]
        assert record["worker"]["pid"] != os.getpid()
    assert not FRAMEWORK_MODULES & set(sys.modules)
