"""The SQL that carries dueflow's guarantees, kept as plain files readable on their own."""

from functools import cache
from importlib.resources import files


@cache
def statement(name: str, dialect: str | None = None) -> str:
    """Text of `sql/<name>.sql`, or of `sql/<name>.<dialect>.sql` when a dialect is given."""
    filename = f"{name}.{dialect}.sql" if dialect else f"{name}.sql"
    return files(__package__).joinpath(filename).read_text(encoding="utf-8")
