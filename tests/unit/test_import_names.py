"""One import name per module: the repository's folders are `dueflow.flows`, `dueflow.tasks`,
... and nothing else. Imported under its bare name (`import tasks`, as a clone's root on
sys.path allows), a folder would load every module a second time as another object — two
`deliver.STOP` events, two `Job` enums — so each refuses with one line naming the fix."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("flows", "tasks", "blocks", "deployments", "sql")


@pytest.fixture
def clone_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The clone's root importable, as from a shell in it; no bare-named module left behind."""
    monkeypatch.syspath_prepend(str(ROOT))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if name.split(".")[0] in FOLDERS:
            del sys.modules[name]


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_refuses_its_bare_name(folder: str, clone_on_path: None):
    with pytest.raises(ImportError) as refused:
        importlib.import_module(folder)
    assert str(refused.value) == f"import dueflow.{folder}, not {folder}: one import name per module"
    assert folder not in sys.modules


def test_a_module_deeper_down_is_refused_too(clone_on_path: None):
    with pytest.raises(ImportError, match=r"import dueflow\.tasks, not tasks"):
        importlib.import_module("tasks.core.statuses")
    assert "tasks.core.statuses" not in sys.modules


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_dueflow_name_is_the_folder(folder: str):
    """`dueflow.X` is the repository's folder X (dueflow/X is a link to it), not a copy."""
    package = importlib.import_module(f"dueflow.{folder}")
    assert package.__name__ == f"dueflow.{folder}"
    assert Path(package.__file__).resolve() == ROOT / folder / "__init__.py"
