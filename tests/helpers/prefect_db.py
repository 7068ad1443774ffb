"""One migrated Prefect database per test session, copied into the home of every Prefect
server the tests start (the session's harness, `prefect server start`, the temporary server
of a `dueflow` command without PREFECT_API_URL). A server that finds an empty home spends
8 s or more of CPU creating Prefect's schema; the suite starts about seven of them. The
copy is Prefect's own migrations run once (`prefect server database upgrade`), and a server
started on it runs them again as usual: they find nothing left to do."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

NAME = "prefect-migrated.db"


def build(shared: Path | str) -> Path:
    """The migrated database in `shared` (a folder every xdist worker of the session sees),
    made by the first process that asks for it while the others wait on a file lock."""
    shared = Path(shared)
    template = shared / NAME
    with open(shared / f"{NAME}.lock", "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            building = shared / f"{NAME}.building"
            building.unlink(missing_ok=True)
            env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
            env |= {"PREFECT_HOME": str(shared / "prefect-migrate-home"),
                    "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{building}"}
            prefect = str(Path(sys.executable).parent / "prefect")
            done = subprocess.run([prefect, "server", "database", "upgrade", "-y"], env=env,
                                  capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                raise RuntimeError(f"prefect server database upgrade failed: {done.stderr[-1000:]}")
            os.replace(building, template)
    return template


def seed(database: Path, template: Path) -> Path:
    """`database` (a server's SQLite file, not yet created) as a copy of the template."""
    database.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, database)
    return database


def seed_home(home: Path, template: Path) -> Path:
    """A PREFECT_HOME whose default database (prefect.db) is already migrated."""
    seed(home / "prefect.db", template)
    return home
