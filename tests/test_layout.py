"""The project's rooms and the arrows between them, read from the code with `ast` (every import, those inside
functions and under TYPE_CHECKING too):
- no import circle between project modules (models/, frameworks/, suites/): no module reaches, through the modules it
  imports, back to itself (a module importing a package's submodule is an arrow to that submodule, not to the package);
- suites/ as run / analysis / report, with bench (which runs the suites) on top: the run machinery measures and
  stores, and imports neither the analysis nor the rendering (the derived values are computed where a run is read);
  the analysis renders nothing; the report imports nothing from bench; no arrow runs back up;
- models/ imports the standard library and models/ only, all but models/importers/, whose readers may use numpy,
  onnx (and protobuf, its messages) and onnxscript (the file formats they read); no module outside models/estimate/
  and models/importers/ reaches into their private (underscore) names;
- suites/ never imports a framework or the worker.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("models", "frameworks", "suites")
# suites/'s folders from the bottom up: an arrow goes down or sideways, never up (__main__.py is above them all)
SUITE_FLOORS = ("run", "analysis", "report", "bench")
IMPORTERS_MAY_USE = {"numpy", "onnx", "onnxscript", "google"}  # google: protobuf, what onnx's messages are
SEALED = ("models.estimate", "models.importers")  # packages whose underscore names are their own
MOST_LINES = 800  # the longest a module of models/ may be


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def _name(path: Path) -> str:
    """The dotted module name of a file under ROOT (a package's __init__.py is the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _project() -> dict[str, Path]:
    return {_name(path): path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
            if "__pycache__" not in path.parts}


def _absolute(node: ast.ImportFrom, module: str, path: Path) -> str:
    """The module an ImportFrom names, a relative one resolved against the importing module's package."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _arrows(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the project modules it imports: `from a import b` names a.b where that is a module, else a; `import
    a.b.c` names the deepest of a.b.c, a.b, a that is one."""
    arrows: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    parts = alias.name.split(".")
                    targets |= {next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                                      if ".".join(parts[:n]) in modules), "")}
            elif isinstance(node, ast.ImportFrom):
                source = _absolute(node, module, path)
                for alias in node.names:
                    targets.add(f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source)
        arrows[module] = {target for target in targets if target in modules and target != module}
    return arrows


def _circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(arrows):
        if start in index:
            continue
        work = [(start, iter(sorted(arrows[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[module])
                if low[module] == index[module]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == module:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(arrows[target]))))
            elif target in on_stack:
                low[module] = min(low[module], index[target])
    return found


def test_no_import_circle_between_project_modules() -> None:
    modules = _project()
    assert {"models.spec", "models.estimate", "suites.report.render", "frameworks.worker"} <= set(modules)
    arrows = _arrows(modules)
    circles = _circles(arrows)
    assert not circles, "; ".join(" <-> ".join(circle) for circle in circles)


def test_the_circle_finder_finds_circles() -> None:
    """The finder itself, on made-up arrows: a two-module circle, a three-module one, and a chain that is none."""
    arrows = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c", "f"}, "f": set(), "g": {"f"}}
    assert sorted(_circles(arrows)) == [["a", "b"], ["c", "d", "e"]]


def test_an_import_inside_a_function_is_an_arrow() -> None:
    """models.importers.files reads each format's importer only when a file of its kind comes, inside the function:
    it is an arrow all the same (a circle through it would be one at run time)."""
    arrows = _arrows(_project())
    assert {"models.importers.keras_file", "models.importers.onnx_file"} <= arrows["models.importers.files"]
    assert "models.estimate.bfc" in arrows["models.estimate.phases"]


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


def test_the_report_imports_nothing_from_bench() -> None:
    """A check's page and the suites' times read what describes a check (suites.run.pieces) and the suite names
    their caller passes; bench runs the suites and renders through the report, so an arrow back would be a circle."""
    reaching = {f"{path.name}: {name}" for path in sorted((ROOT / "suites" / "report").glob("*.py"))
                for name in _imported(path) if name.startswith("suites.bench")}
    assert not reaching, reaching


def test_no_arrow_in_suites_runs_back_up() -> None:
    """report -> analysis -> run, and bench above them: an arrow from a folder to one above it is refused."""
    modules = _project()
    floor = {module: SUITE_FLOORS.index(module.split(".")[1]) for module in modules
             if module.startswith("suites.") and module.split(".")[1] in SUITE_FLOORS}
    back = {f"{module} -> {target}" for module, targets in _arrows(modules).items() if module in floor
            for target in targets if target in floor and floor[target] > floor[module]}
    assert not back, back


def test_suites_top_level_is_the_command_line_and_four_folders() -> None:
    top = {path.name for path in (ROOT / "suites").iterdir() if path.name != "__pycache__"}
    assert top == {"__init__.py", "__main__.py", "run", "analysis", "report", "bench"}


def test_nothing_in_suites_imports_a_framework_or_the_worker() -> None:
    """The orchestrator starts the worker as a process only: what both sides share lives in models/ (protocol.py)."""
    reaching = {f"{path.relative_to(ROOT)}: {name}" for path in sorted((ROOT / "suites").rglob("*.py"))
                for name in _imported(path)
                if name.split(".")[0] in ("frameworks", "torch", "jax", "jaxlib", "tensorflow", "keras", "optax")}
    assert not reaching, reaching


def test_models_import_the_standard_library_and_models_only_but_the_importers() -> None:
    """models/ is pure data and arithmetic; only models/importers/ reads file formats, with numpy and onnx(script)."""
    allowed = set(sys.stdlib_module_names) | {"models", "__future__"}
    paths = sorted(path for path in (ROOT / "models").rglob("*.py") if "__pycache__" not in path.parts)
    assert any(path.parent.name == "estimate" for path in paths) and any(path.parent.name == "importers"
                                                                        for path in paths)
    extra = {}
    for path in paths:
        names = {name.split(".")[0] for name in _imported(path)}
        may = allowed | (IMPORTERS_MAY_USE if path.parent == ROOT / "models" / "importers" else set())
        if names - may:
            extra[str(path.relative_to(ROOT))] = sorted(names - may)
    assert not extra, extra


def _bound_modules(tree: ast.Module, modules: set[str]) -> dict[str, str]:
    """The local names a file binds to a module of SEALED (`from models import estimate`, `import x.y as z`)."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                if f"{node.module}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname and alias.name in modules:
                    bound[alias.asname] = alias.name
    return {name: module for name, module in bound.items() if module.startswith(SEALED)}


def test_no_module_reaches_into_the_estimate_s_or_the_importers_private_names() -> None:
    """What models/estimate/ and models/importers/ keep to themselves (an underscore name) is used only there: the
    project and its tests import their public names (models.estimate's are today's)."""
    modules = set(_project())
    reaching = set()
    paths = [path for folder in (*PACKAGES, "tests") for path in (ROOT / folder).rglob("*.py")]
    for path in sorted(paths):
        if "__pycache__" in path.parts or _name(path).startswith(SEALED):
            continue
        tree = ast.parse(path.read_text())
        bound = _bound_modules(tree, modules)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(SEALED):
                reaching |= {f"{path.relative_to(ROOT)}: {node.module}.{alias.name}" for alias in node.names
                             if alias.name.startswith("_")}
            elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound
                  and node.attr.startswith("_")):
                reaching.add(f"{path.relative_to(ROOT)}: {bound[node.value.id]}.{node.attr}")
    assert not reaching, reaching


def test_the_rooms_of_the_layer_kinds_stay_small() -> None:
    """A kind's spec, its import and its rule are found in a module of its family (models/layers/, the ONNX
    importer's onnx_<family>.py), not in one file that grows with every kind: none of models/ passes 800 lines."""
    long = {name: length for name, path in _project().items() if name.startswith("models")
            and (length := len(path.read_text().splitlines())) > MOST_LINES}
    assert not long, long
