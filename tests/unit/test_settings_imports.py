"""The settings sit below everything that uses them: `dueflow.blocks` imports nothing of
dueflow's but itself and the pure core, so no import — at the top of a module or inside a
function — runs from the adapters to the settings and back (issue 37: settings ↔ urls ↔
mail ↔ mailbox was a cycle; ConfigError is now blocks/errors.py, which imports nothing)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("flows", "tasks", "blocks", "deployments", "sql")


def module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return "dueflow." + ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def runtime_imports(path: Path) -> set[str]:
    """The dueflow modules `path` imports when it runs (inside functions too; not the
    imports only a type checker reads, under `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and ast.unparse(block.test) == "TYPE_CHECKING" for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in found if name.startswith("dueflow.")}


def import_graph() -> dict[str, set[str]]:
    sources = {module_of(p): p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")}
    return {module: runtime_imports(path) & sources.keys() - {module} for module, path in sources.items()}


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The modules that import each other, directly or around a loop (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in graph:
        if module not in index:
            visit(module)
    return found


def test_the_settings_import_only_themselves_and_the_pure_core():
    graph = import_graph()
    assert "dueflow.blocks.settings" in graph and len(graph) > 50
    outward = {module: sorted(target for target in targets
                              if not target.startswith(("dueflow.blocks", "dueflow.tasks.core")))
               for module, targets in graph.items() if module.startswith("dueflow.blocks")}
    assert {module: targets for module, targets in outward.items() if targets} == {}


def test_no_import_cycle_runs_through_the_settings_or_the_adapters():
    touching = [sorted(component) for component in cycles(import_graph())
                if any(m.startswith(("dueflow.blocks", "dueflow.tasks.adapters")) for m in component)]
    assert touching == []


def test_the_check_sees_a_cycle_and_a_function_s_import(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [{"a", "b", "c"}]
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import dueflow.x\n"
                      "def f():\n    from dueflow.blocks import settings\n")
    assert runtime_imports(sample) == {"dueflow.blocks", "dueflow.blocks.settings"}
