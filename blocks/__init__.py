"""Configuration: the settings' table (blocks/table.py), read from the environment
(blocks/settings.py) and overridable by Prefect blocks (blocks/prefect_blocks.py).

Nothing is imported here: `dueflow.blocks.errors`, imported by every module that refuses a
setting, loads alone."""

if __name__ != "dueflow.blocks":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.blocks, not {__name__}: one import name per module")
