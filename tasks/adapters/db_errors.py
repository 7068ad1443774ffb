"""What a database error means for the night, read from the driver's error codes (never
its message): whether another attempt may not meet it (`transient`), and the one line an
operator is told, with the fix (`database_problem`)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError

# SQLSTATEs of a session the server ended (57P01 admin shutdown: pg_terminate_backend, a
# restart; 57P02 crash shutdown; 57P03 cannot connect now) and class 08, connection exceptions.
_SESSION_ENDED = ("57P01", "57P02", "57P03")


def transient(exc: BaseException) -> bool:
    """A database error that another attempt may not meet: the connection was lost (the
    server restarted, a session was terminated) or SQLite's write lock was busy. Read from
    the driver's error codes, never its message."""
    import sqlite3

    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if isinstance(orig, sqlite3.OperationalError):
        return orig.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    import psycopg2

    if isinstance(orig, psycopg2.InterfaceError):  # the connection was already closed
        return True
    if isinstance(orig, psycopg2.OperationalError):
        code = orig.pgcode  # None: libpq's own failure to reach or keep the server
        return code is None or code.startswith("08") or code in _SESSION_ENDED
    return False



# SQLSTATEs a night can meet because of how the database or the user is set up.
READ_ONLY = "25006"  # read_only_sql_transaction: default_transaction_read_only, a standby
NO_PRIVILEGE = "42501"  # insufficient_privilege
CANCELED = "57014"  # query_canceled: statement_timeout (or a cancel)


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of a PostgreSQL error (None for other errors)."""
    return getattr(getattr(exc, "orig", None), "pgcode", None)


def database_problem(exc: BaseException, doing: str) -> str:
    """One line for a database error met while `doing` something, with the fix; by SQLSTATE."""
    said = str(getattr(exc, "orig", None) or exc).strip()
    reason = said.splitlines()[0][:300] if said else type(exc).__name__
    code = sqlstate(exc)
    if code == READ_ONLY:
        fix = ("connect as a user whose transactions may write (this one is read-only:"
               " default_transaction_read_only, or a standby server)")
    elif code == NO_PRIVILEGE:
        fix = "grant this user what dueflow needs: SELECT on the sources, all rights on dueflow's own tables"
    elif code == CANCELED:
        fix = ("raise statement_timeout for this user (ALTER ROLE … SET statement_timeout = '5min'), or"
               " add the indexes `dueflow check --sources` suggests")
    else:
        fix = "see `dueflow check`"
    return f"{doing}: {reason} — fix: {fix}"
