"""Prefect blocks for dueflow's settings; secrets are SecretStr and never printed.

Register them once per Prefect server:

    prefect block register -m blocks.prefect_blocks
    prefect block register -m prefect_email      # EmailServerCredentials, for mail

Name a block in the environment and it overrides the matching variables:
DUEFLOW_DATABASE_BLOCK (DueflowDatabase), DUEFLOW_MAIL_BLOCK (prefect-email's
EmailServerCredentials), DUEFLOW_LLM_BLOCK (DueflowLLM).
"""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr


class DueflowDatabase(Block):
    """Where the source tables and the ledger live."""

    _block_type_name = "Dueflow Database"
    url: SecretStr = Field(description="SQLAlchemy URL, e.g. postgresql://user:pass@host/db")


class DueflowLLM(Block):
    """An OpenAI-compatible model that drafts the personalised reminder paragraph."""

    _block_type_name = "Dueflow LLM"
    api_key: SecretStr
    base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint")
    model: str = "gpt-4o-mini"
