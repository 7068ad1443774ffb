"""pandas is configured in one place (tasks/core/frames.py): a dueflow module that imported
pandas itself could make frames before the setting is in force, and would load pandas into
processes that need none (the flow's module, settings)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("flows", "tasks", "blocks", "deployments", "sql")
FRAMES = ROOT / "tasks" / "core" / "frames.py"


def pandas_imports(path: Path) -> list[int]:
    """Lines of `path` that import pandas (or a pandas submodule) directly."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "pandas" or name.startswith("pandas.") for name in names):
            lines.append(node.lineno)
    return lines


def test_only_frames_imports_pandas():
    sources = [p for d in PACKAGE_DIRS for p in (ROOT / d).rglob("*.py")]
    assert FRAMES in sources and len(sources) > 30
    offenders = {str(p.relative_to(ROOT)): lines for p in sources if p != FRAMES
                 if (lines := pandas_imports(p))}
    assert offenders == {}, "take pd from dueflow.tasks.core.frames"
    assert pandas_imports(FRAMES)


def test_the_check_sees_every_form_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("import os\nimport pandas as pd\nfrom pandas import DataFrame\n"
                      "import pandas.api.types\nfrom dueflow.tasks.core.frames import pd\n")
    assert pandas_imports(sample) == [2, 3, 4]
