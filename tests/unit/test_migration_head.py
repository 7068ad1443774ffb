"""sql/migrations.HEAD, what a night compares its ledger's version with, is Alembic's head."""

from __future__ import annotations

from alembic.config import Config
from alembic.script import ScriptDirectory

from dueflow.sql.migrations import HEAD


def test_head_is_the_newest_migration():
    config = Config()
    config.set_main_option("script_location", "dueflow.sql:migrations")
    assert ScriptDirectory.from_config(config).get_heads() == [HEAD]
