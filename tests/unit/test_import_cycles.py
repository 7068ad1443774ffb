"""Nothing imports in a circle (issue 37): not two modules (an import at the top, one made
inside a function, or one only the type checker reads — a circle of names is a circle of
meaning), and not two packages: `tasks.core` ← `blocks` (the settings import themselves and
the pure core only; ConfigError is blocks/errors.py, which imports nothing) ←
`tasks.adapters` ← the night's modules at the top of `tasks` ← `flows`. A new cycle fails
here naming it (settings ↔ urls ↔ mail ↔ mailbox and jobs ↔ steps were two)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("blocks", "deployments", "flows", "sql", "tasks")


def modules() -> dict[str, Path]:
    found = {}
    for folder in PACKAGE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(("dueflow", *(parts[:-1] if parts[-1] == "__init__" else parts)))
            found[name] = path
    return found


def imports() -> dict[str, set[str]]:
    """Each dueflow module and the dueflow modules it names, wherever in it."""
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            else:
                continue
            graph[name] |= {target for target in named if target in known and target != name}
    return graph


def package_of(module: str) -> str:
    """dueflow.tasks.core.keys → dueflow.tasks.core; dueflow.tasks.night → dueflow.tasks."""
    path = modules()[module]
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while (member := stack.pop()) != node:
                component.append(member)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_through_others():
    assert cycles(imports()) == []


def test_no_two_packages_import_each_other():
    graph: dict[str, set[str]] = {}
    for module, targets in imports().items():
        graph.setdefault(package_of(module), set()).update(
            package_of(target) for target in targets if package_of(target) != package_of(module))
    for targets in list(graph.values()):
        for target in targets:
            graph.setdefault(target, set())
    assert cycles(graph) == []


def test_the_settings_import_only_themselves_and_the_pure_core():
    below = ("dueflow.blocks", "dueflow.tasks.core")
    outward = {module: sorted(t for t in targets if not t.startswith(below))
               for module, targets in imports().items() if module.startswith("dueflow.blocks")}
    assert {module: targets for module, targets in outward.items() if targets} == {}


def test_the_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
