"""Issue 25, findings 6 and 7: a night ends cleanly when Prefect does — a real `prefect server
start` killed mid-run, and Ctrl-C (SIGINT to the process group, as a terminal sends it) of
a real `dueflow run` on Prefect's temporary server. Each of these failed before the change."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.helpers.concurrency import wait_for
from tests.helpers.prefect_db import seed_home
from tests.helpers.runs import (
    AS_OF,
    ROOT,
    assert_stopped_mid_delivery_then_rerun,
    due_contracts,
    ledger_by_claim,
)
from tests.helpers.smtp_server import free_port


def base_env(tmp_path: Path, migrated_prefect_db: Path) -> dict[str, str]:
    """A process's environment: no Prefect or dueflow settings of the session's, a Prefect
    home of its own whose database is already migrated (tests/helpers/prefect_db.py)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "DUEFLOW_"))}
    home = seed_home(tmp_path / "prefect-home", migrated_prefect_db)
    return env | {"PYTHONPATH": str(ROOT), "PREFECT_HOME": str(home),
                  "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DUEFLOW_ALLOW_ANY_AS_OF": "on",
                  "PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED": "false"}


def dueflow(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    # A session of its own: killpg reaches it and its children as a terminal's Ctrl-C would.
    return subprocess.Popen([sys.executable, "-m", "dueflow.flows.cli", *args], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@contextmanager
def prefect_server(env: dict[str, str], port: int) -> Iterator[subprocess.Popen]:
    prefect = str(Path(sys.executable).parent / "prefect")
    server = subprocess.Popen([prefect, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                              env=env | {"PREFECT_UI_ENABLED": "false"}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    api = f"http://127.0.0.1:{port}/api"

    def healthy() -> bool:
        try:
            return httpx.get(f"{api}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(healthy, "prefect server", 300)
        yield server
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(30)


def flow_run_state(api: str, run_id: str) -> str:
    return httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json()["state"]["type"]


# The API lost is a matter between the process and Prefect, not the ledger's dialect: one
# backend each (PostgreSQL, as in production, here; SQLite, as on a laptop, for Ctrl-C below;
# test_processes interrupts a PostgreSQL night).
@pytest.mark.parametrize("db_url", [pytest.param("postgresql", marks=pytest.mark.pg)], indirect=True)
def test_6_the_prefect_api_lost_mid_run_ends_the_night_cleanly_and_the_run_is_found_stale(
        db_url, smtp_sink, migrated_prefect_db, tmp_path):
    expected = due_contracts(db_url, 60)
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = base_env(tmp_path, migrated_prefect_db) | {"DUEFLOW_DATABASE_URL": db_url, "PREFECT_API_URL": api,
                                "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}"}
    smtp_sink.delay = 0.1
    with prefect_server(env, port) as server:
        run = dueflow(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
        wait_for(lambda: len(smtp_sink.keys()) >= 10, "10 emails received", 300, interval=0.02)
        os.killpg(server.pid, signal.SIGKILL)  # the API is lost, the night goes on
        killed, at_kill = time.monotonic(), len(set(smtp_sink.data_seen))
        out, err = run.communicate(timeout=400)
        ended = time.monotonic() - killed
    print(f"API killed after {at_kill} of 60 emails; the run ended {ended:.1f} s later")
    assert run.returncode == 0, (out, err)
    assert "Traceback" not in err and "Traceback" not in out and "ERROR" not in err, err
    assert err.count("the Prefect API stopped answering") <= 1, err
    assert "Run for 2027-01-01: 60 sent, 0 failed, 0 pending" in out  # the summary, whole
    assert "the Prefect API was lost" in out
    sent, in_doubt, unsent = ledger_by_claim(db_url)
    assert sent == expected and not in_doubt and not unsent  # every email once, recorded
    assert sorted(smtp_sink.keys()) == sorted(expected)

    # A rerun while the API is down: one line, nothing done.
    rerun = dueflow(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
    out2, err2 = rerun.communicate(timeout=120)
    assert rerun.returncode == 2, (out2, err2)
    assert err2.startswith(f"dueflow: error: the Prefect API at {api} does not answer (")
    assert len(err2.strip().splitlines()) == 1 and "Traceback" not in err2

    # The API back: the run it lost is 'Running', and the next run on the ledger marks it stale.
    with prefect_server(env, port):
        runs = httpx.post(f"{api}/flow_runs/filter", json={}, timeout=10).json()
        lost = [r["id"] for r in runs if r["state"]["type"] == "RUNNING"]
        assert len(lost) == 1
        later = dueflow(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)
        out3, err3 = later.communicate(timeout=400)
        assert later.returncode == 0, (out3, err3)
        assert f"flow run {lost[0]} was left 'Running' by a lost Prefect API: marked Crashed" in out3
        assert flow_run_state(api, lost[0]) == "CRASHED"
    assert sorted(smtp_sink.keys()) == sorted(expected)  # nothing sent twice


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_7_ctrl_c_to_the_process_group_on_the_temporary_server_exits_promptly_and_quietly(
        db_url, smtp_sink, cli_env, migrated_prefect_db, tmp_path):
    expected = due_contracts(db_url, 60)
    env = base_env(tmp_path, migrated_prefect_db) | {"DUEFLOW_DATABASE_URL": db_url,
                                "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}"}
    smtp_sink.delay = 0.1
    run = dueflow(["run", "--as-of", AS_OF.isoformat()], env, tmp_path)  # no PREFECT_API_URL
    wait_for(lambda: len(smtp_sink.keys()) >= 10, "10 emails received", 400, interval=0.02)
    signalled = time.monotonic()
    os.killpg(run.pid, signal.SIGINT)  # what the terminal's Ctrl-C does
    out, err = run.communicate(timeout=120)
    took = time.monotonic() - signalled
    print(f"exited {took:.1f} s after SIGINT")
    assert run.returncode == 130, (out, err)
    assert "Unable to connect" not in err and "ERROR" not in err and "Traceback" not in err, err
    assert took < 15, took  # was: > 120 s retrying the events socket of the stopped server
    assert smtp_sink.data_at[-1] - signalled < 1.0  # no email handed over after the signal
    # Nothing lost: claimed-but-unsent rows are handled as after any Ctrl-C (the rerun on the
    # session's Prefect server).
    assert_stopped_mid_delivery_then_rerun(db_url, smtp_sink, cli_env, tmp_path, expected,
                                           set(smtp_sink.keys()))


@pytest.mark.xdist_group("prefect-server")
def test_a_night_whose_api_was_lost_hands_its_end_to_the_command_and_prefect_records_none(
        prefect_server, monkeypatch):
    """What lets test_6's command end at once, held against Prefect's own engine: a run
    ending with its API lost while a command awaits it (flows/run_end.py) reaches the command
    as a value — RunEndUnrecorded, holding the final state and its summary — and the engine
    proposes no state on the way (the run stays Running for the next run to find stale).
    Called from Python, or with the API back by the end, the same run returns its state as
    Prefect records it."""
    from datetime import date

    from prefect import flow
    from prefect.runtime import flow_run
    from prefect.states import Completed

    from dueflow.flows import prefect_api, run_end
    from dueflow.tasks.core.report import RunSummary, summary_of

    @flow(name="dueflow-lost-end-probe", persist_result=False)
    def night() -> object:
        summary = RunSummary(as_of=date(2027, 1, 1), dry_run=True, flow_run_id=flow_run.get_id())
        return run_end.ended(Completed(message="done", data=summary), summary)

    # As Prefect's clients or the probe say, and the probe again at the end:
    monkeypatch.setattr(prefect_api, "_lost", ["test"])
    monkeypatch.setattr(run_end, "unreachable", lambda: "ConnectError: gone")
    with run_end.night_end() as end, pytest.raises(run_end.RunEndUnrecorded) as raised:
        night(return_state=True)
    summary = summary_of(raised.value.state)
    assert end.state is raised.value.state and run_end.LOST_END in summary.warnings
    assert flow_run_state(prefect_server, summary.flow_run_id) == "RUNNING"

    from_python = night(return_state=True)  # no command awaits it: as Prefect returns it
    assert from_python.is_completed() and run_end.LOST_END not in summary_of(from_python).warnings
    assert flow_run_state(prefect_server, summary_of(from_python).flow_run_id) == "COMPLETED"

    monkeypatch.setattr(run_end, "unreachable", lambda: None)  # lost for a while, back by the end
    with run_end.night_end():
        came_back = night(return_state=True)
    assert came_back.is_completed() and run_end.LOST_END not in summary_of(came_back).warnings
    assert flow_run_state(prefect_server, summary_of(came_back).flow_run_id) == "COMPLETED"
