"""suites/ as run / analysis / report: the run machinery measures and stores, and imports neither the analysis
nor the rendering (the derived values are computed where a run is read)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_the_run_machinery_imports_no_analysis_and_no_report() -> None:
    modules = sorted((ROOT / "suites" / "run").glob("*.py"))
    assert len(modules) >= 8
    reaching = {f"{path.name}: {name}" for path in modules for name in _imported(path)
                if name.startswith(("suites.analysis", "suites.report", "suites.bench"))}
    assert not reaching, reaching


def test_the_analysis_renders_nothing() -> None:
    reaching = {f"{path.name}: {name}" for path in sorted((ROOT / "suites" / "analysis").glob("*.py"))
                for name in _imported(path) if name.startswith(("suites.report", "suites.bench", "matplotlib"))}
    assert not reaching, reaching


def test_suites_top_level_is_the_command_line_and_four_folders() -> None:
    top = {path.name for path in (ROOT / "suites").iterdir() if path.name != "__pycache__"}
    assert top == {"__init__.py", "__main__.py", "run", "analysis", "report", "bench"}


def test_nothing_in_suites_imports_a_framework_or_the_worker() -> None:
    """The orchestrator starts the worker as a process only: what both sides share lives in models/ (protocol.py)."""
    reaching = {f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "suites").rglob("*.py"))
                for name in _imported(path)
                if name.split(".")[0] in ("frameworks", "torch", "jax", "jaxlib", "tensorflow", "keras", "optax")}
    assert not reaching, reaching
