"""The code's shape, checked: layers only import downward, no import circles, no private names across
modules, and no overlong functions or files (issue "One house to live in").

Imports are read from the source (every `import`, lazy ones inside functions too), not executed.
"""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "machines", "passes", "translate", "instrument", "analysis", "benchmarks", "pptmc")
# Layer of each package (a module may import its own layer and those below): ground helpers, then the
# stages along the data flow, then the pipeline and, on top, the CLI.
LAYERS = {"common": 0, "machines": 1, "passes": 1, "translate": 1, "benchmarks.polybench": 1, "instrument": 2,
          "analysis": 3, "pptmc": 4, "pptmc.cli": 5, "pptmc.commands": 5, "benchmarks": 6}
MAX_FUNCTION_LINES = 80
MAX_FILE_LINES = 600


def _modules() -> dict[str, Path]:
    """Dotted name -> file of every project module (tests excluded)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names taken from it) for every import statement of a file, resolved to project modules."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.append((sub, []) if sub in MODULES else (node.module, [alias.name]))
    return [(m, names) for m, names in found if m in MODULES]


def _layer(module: str) -> int:
    """The layer of the longest LAYERS prefix of a module."""
    best = max((p for p in LAYERS if module == p or module.startswith(p + ".")), key=len)
    return LAYERS[best]


def _graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for module, path in MODULES.items():
        graph.add_node(module)
        for target, _ in _imports(path):
            if target != module and not module.startswith(target + "."):  # a package's own __init__
                graph.add_edge(module, target)
    return graph


def test_no_import_circles():
    """No two modules import each other, directly or through others."""
    cycles = list(nx.simple_cycles(_graph()))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_imports_only_run_down_the_layers():
    """ground helpers <- stages <- pipeline <- CLI: nothing imports a higher layer."""
    upward = [(a, b) for a, b in _graph().edges if _layer(b) > _layer(a)]
    assert not upward, f"imports from a lower layer up to a higher one: {upward[:10]}"


def test_no_module_takes_another_modules_private_names():
    """`from x import _name` across modules: a private name belongs to its module."""
    taken = [(module, target, name) for module, path in MODULES.items() for target, names in _imports(path)
             for name in names if name.startswith("_") and not name.startswith("__") and target != module]
    assert not taken, f"private names imported: {taken[:10]}"


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    return [f"{path.relative_to(ROOT)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


@pytest.mark.parametrize("limit", [MAX_FUNCTION_LINES])
def test_no_function_is_overlong(limit):
    """A newcomer reads a function at once: none over 80 lines, numba kernels included."""
    long = [f for path in MODULES.values() for f in _long_functions(path)]
    assert not long, f"functions over {limit} lines: {long}"


def test_no_file_is_overlong():
    """Files stay within about 600 lines; a larger one is split along its parts."""
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := p.read_text().count("\n")) > MAX_FILE_LINES}
    assert not long, f"files over {MAX_FILE_LINES} lines: {long}"
