"""Configuration: environment variables (docs/design.md), overridable by Prefect blocks."""

from dueflow.blocks.settings import Settings, redact_url

__all__ = ["Settings", "redact_url"]
