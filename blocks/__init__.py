"""Configuration: environment variables (docs/design.md), overridable by Prefect blocks."""

if __name__ != "dueflow.blocks":  # one import name per module (dueflow/__init__.py)
    raise ImportError(f"import dueflow.blocks, not {__name__}: one import name per module")

from dueflow.blocks.settings import Settings, redact_url

__all__ = ["Settings", "redact_url"]
