"""Prefect blocks for dueflow's settings, made from the settings' table (blocks/table.py):
a block type's fields are the rows it carries (`block=`), secrets as SecretStr, never
printed. A new field of a block is a row of the table.

Register them once per Prefect server:

    prefect block register -m dueflow.blocks.prefect_blocks
    prefect block register -m prefect_email      # EmailServerCredentials, for mail

Name a block in the environment (the DUEFLOW_*_BLOCK variables, docs/configuration.md)
and it overrides the variables it carries (`Settings.with_blocks`).
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from dueflow.blocks.table import BLOCK_TYPES, BlockType, carried_by


def block_type(kind: BlockType) -> type[Block]:
    """The Block class of a block type: a field for each row it carries. Where a field left
    empty keeps the variable, an optional field is None by default; where the block
    replaces all it carries, the setting's own default is the field's."""
    annotations: dict[str, Any] = {}
    namespace: dict[str, Any] = {"__module__": __name__, "__qualname__": kind.name, "__doc__": kind.doc,
                                 "_block_type_name": kind.title, "__annotations__": annotations}
    for row in carried_by(kind):
        assert row.block is not None
        kind_of_value: Any = SecretStr if row.secret else str
        description = row.block.description or None
        if row.block.required:
            annotations[row.block_field] = kind_of_value
            namespace[row.block_field] = Field(description=description)
        elif kind.empty_keeps_variable or row.default in (None, ""):
            annotations[row.block_field] = kind_of_value | None
            namespace[row.block_field] = Field(default=None, description=description)
        else:
            annotations[row.block_field] = kind_of_value
            namespace[row.block_field] = Field(default=row.default, description=description)
    return type(kind.name, (Block,), namespace)


_BLOCKS = {kind.name: block_type(kind) for kind in BLOCK_TYPES if not kind.module}
DueflowDatabase = _BLOCKS["DueflowDatabase"]
DueflowLLM = _BLOCKS["DueflowLLM"]
DueflowEmail = _BLOCKS["DueflowEmail"]
DueflowSources = _BLOCKS["DueflowSources"]
DueflowProfiles = _BLOCKS["DueflowProfiles"]
DueflowPhrasebook = _BLOCKS["DueflowPhrasebook"]
DueflowBounceMailbox = _BLOCKS["DueflowBounceMailbox"]
