"""What a long run shows an operator (issue 15): a progress line on a terminal — count, rate,
time left — and none when the output is piped; after a run against a Prefect server, one line
with the run's page in the UI, which that server knows. Real `dueflow` processes, a real
pseudo-terminal, a real `prefect server start`."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import threading
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest

from dueflow.tasks.adapters import db
from dueflow.tasks.progress import DeliveryProgress
from tests.helpers.factories import contract, insert
from tests.helpers.prefect_db import seed_home

ROOT = Path(__file__).resolve().parents[2]
AS_OF = date(2027, 1, 1)
URL_LINE = re.compile(r"^Flow run in the Prefect UI: (http://127\.0\.0\.1:\d+)/runs/flow-run/([0-9a-f-]{36})$",
                      re.MULTILINE)


def environment(api: str, url: str, outbox: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(base or {k: v for k, v in os.environ.items() if not k.startswith(("DUEFLOW_", "PREFECT_"))})
    # Nights of hundreds of emails, to show progress: a first one would wait for a person
    # (tests/e2e/test_night_guard.py), which is not what these tests are about.
    return env | {"DUEFLOW_ALLOW_ANY_AS_OF": "on", "PREFECT_API_URL": api, "PYTHONPATH": str(ROOT),
                  "DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"file://{outbox}",
                  "PREFECT_LOGGING_LEVEL": "WARNING", "DUEFLOW_GUARD": "off"}


def dueflow(*args: str) -> list[str]:
    return [sys.executable, "-m", "dueflow.flows.cli", *args]


def seed(url: str, count: int) -> None:
    insert(url, "contracts", [contract(f"c{n:04d}", AS_OF + timedelta(days=30)) for n in range(count)])


def run_on_a_terminal(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (stdout piped); what each showed."""
    master, slave = pty.openpty()
    process = subprocess.Popen(args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, text=True)
    os.close(slave)
    seen = bytearray()

    def read() -> None:
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            seen.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stdout, _ = process.communicate(timeout=300)
    reader.join(10)
    os.close(master)
    return process.returncode, stdout, seen.decode(errors="replace")


def test_progress_line_on_a_terminal_only(sqlite_url, prefect_server, tmp_path):
    db.init_db(db.engine_for(sqlite_url), sample_tables=True)
    seed(sqlite_url, 420)
    env = environment(prefect_server, sqlite_url, tmp_path / "outbox")
    code, stdout, terminal = run_on_a_terminal(dueflow("run", "--as-of", AS_OF.isoformat()), env, tmp_path)
    assert code == 0, stdout + terminal
    assert "420 sent" in stdout
    assert "dueflow: sent 420 of 420 emails (" in terminal
    assert re.search(r"\rdueflow: sent [\d,]+ of 420 emails \([\d,]+/s, \d+:\d\d left\)", terminal)
    assert "dueflow: sent" not in stdout

    more = tmp_path / "more.db"
    url = f"sqlite:///{more}"
    db.init_db(db.engine_for(url), sample_tables=True)
    seed(url, 420)
    piped = subprocess.run(dueflow("run", "--as-of", AS_OF.isoformat()), cwd=tmp_path, text=True,
                           capture_output=True, timeout=300,
                           env=environment(prefect_server, url, tmp_path / "outbox2"))
    assert piped.returncode == 0, piped.stderr
    assert "420 sent" in piped.stdout
    assert "dueflow: sent" not in piped.stdout + piped.stderr
    db.engine_for(url).dispose()


def test_few_emails_show_no_progress_line():
    class Terminal:
        def __init__(self) -> None:
            self.text = ""

        def write(self, text: str) -> None:
            self.text += text

        def flush(self) -> None:
            pass

    small, large = Terminal(), Terminal()
    for stream, total in ((small, 300), (large, 301)):
        progress = DeliveryProgress(stream, interval=0)  # type: ignore[arg-type]
        progress.expect(total)
        for _ in range(total):
            progress.advance()
        progress.finish()
    assert small.text == ""
    assert large.text.count("\r") == 301 and "dueflow: sent 301 of 301 emails (" in large.text
    assert "0:00 left)" in large.text and large.text.endswith("\n")


@pytest.mark.xdist_group("prefect-server")
def test_a_run_against_a_prefect_server_prints_its_page_in_the_ui(prefect_server_process, sqlite_url,
                                                                   migrated_prefect_db, tmp_path):
    api, server_env = prefect_server_process
    db.init_db(db.engine_for(sqlite_url), sample_tables=True)
    seed(sqlite_url, 2)
    env = environment(api, sqlite_url, tmp_path / "outbox", base=server_env)
    result = subprocess.run(dueflow("run", "--as-of", AS_OF.isoformat()), cwd=tmp_path, env=env, text=True,
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr
    match = URL_LINE.search(result.stdout)
    assert match, result.stdout
    assert match.group(1) == api.removesuffix("/api")
    flow_run = httpx.get(f"{api}/flow_runs/{match.group(2)}", timeout=10)
    assert flow_run.status_code == 200
    assert flow_run.json()["state"]["type"] == "COMPLETED"
    assert result.stdout.count("Flow run in the Prefect UI:") == 1

    # Without PREFECT_API_URL the run uses a temporary server: no page to show. Its home
    # holds an already migrated database (tests/helpers/prefect_db.py).
    local = {k: v for k, v in env.items() if k != "PREFECT_API_URL"}
    local["PREFECT_HOME"] = str(seed_home(tmp_path / "home", migrated_prefect_db))
    quiet = subprocess.run(dueflow("run", "--as-of", AS_OF.isoformat(), "--dry-run"), cwd=tmp_path,
                           env=local, text=True, capture_output=True, timeout=300)
    assert quiet.returncode == 0, quiet.stderr
    assert "Flow run in the Prefect UI" not in quiet.stdout


def test_version(dueflow_cli):
    result = dueflow_cli("--version")
    assert result.returncode == 0 and re.fullmatch(r"dueflow \d+\.\d+\.\d+\S*\n", result.stdout)
