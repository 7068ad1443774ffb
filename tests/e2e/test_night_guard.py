"""A night that looks wrong waits for a person (issue 40), with a real `prefect server start`
and the deployment served by a real runner process: the accident finance teams fear — paid
invoices set unpaid by a broken sync — pauses the run before anything is reserved; a
second run of the deployment meanwhile sends nothing; the input submitted through the
Prefect API ("send up to 10") continues the same run and exactly 10 reminders go, once;
who approved is kept with the night. A night no one answers ends "Needs attention" with
nothing sent. From the command line the same night stops with one line (exit 2) and goes
on with `--approve`."""

from __future__ import annotations

import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.sql_store import SqlLedger
from dueflow.tasks.core.guard import Figures
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import client, insert, invoice

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
AS_OF = date(2027, 5, 10)
pytestmark = pytest.mark.xdist_group("prefect-server")  # the session's real server lives in one worker


def company(url: str, paid_by_mistake: int) -> None:
    """A company whose ordinary nights sent two reminders each, and whose sync has just set
    `paid_by_mistake` paid invoices unpaid (all due for their first reminder tonight)."""
    db.init_db(db.engine_for(url), sample_tables=True)
    sent = (AS_OF - timedelta(days=8)).isoformat()
    insert(url, "clients", [client("cl1")])
    insert(url, "invoices", [invoice(f"i{n:03d}", "cl1", sent) for n in range(paid_by_mistake)])
    ledger = SqlLedger(db.Database(url))
    for nights_ago in (3, 2, 1):
        ledger.record_night(AS_OF - timedelta(days=nights_ago), f"earlier-{nights_ago}",
                            Figures({"dunning": 2}))


def runs(api: str, deployment_id: str) -> list[dict]:
    return httpx.post(f"{api}/flow_runs/filter", json={"deployments": {"id": {"any_": [deployment_id]}}},
                      timeout=10).json()


def trigger(env: dict[str, str], as_of: date) -> None:
    subprocess.run([PREFECT, "deployment", "run", "nightly-alerts/nightly", "--param", f'as_of="{as_of}"'],
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def test_a_paused_night_goes_on_with_a_persons_word_and_one_no_one_answers_sends_nothing(
        prefect_server_process, smtp_sink, tmp_path):
    api, env = prefect_server_process
    url = f"sqlite:///{tmp_path / 'dueflow.db'}"
    company(url, 40)
    env = env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
                 "PYTHONPATH": str(ROOT), "PREFECT_RUNNER_POLL_FREQUENCY": "1",
                 "DUEFLOW_GUARD_MIN_EMAILS": "5", "DUEFLOW_APPROVAL_TIMEOUT": "45"}
    runner = subprocess.Popen([sys.executable, "-m", "dueflow.deployments.serve"], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        served = wait_for(lambda: [d for d in httpx.post(f"{api}/deployments/filter", json={},
                                                         timeout=5).json() if d["name"] == "nightly"],
                          what="the served deployment")
        deployment = served[0]["id"]
        trigger(env, AS_OF)
        paused = wait_for(lambda: [r for r in runs(api, deployment) if r["state_type"] == "PAUSED"],
                          what="the night to pause")[0]
        assert db.ledger_rows(db.engine_for(url)).empty and smtp_sink.keys() == []  # nothing reserved
        review = httpx.post(f"{api}/artifacts/filter", json={"artifacts": {"key": {"any_": [
            "nightly-alerts-review"]}}}, timeout=10).json()
        assert "40 emails tonight, against a median of 2 over the last 3 nights" in review[0]["data"]

        trigger(env, AS_OF)  # a second run of the deployment while the first waits: it sends nothing
        second = wait_for(lambda: [r for r in runs(api, deployment) if r["id"] != paused["id"]
                                   and r["state_type"] in ("COMPLETED", "CANCELLED")],
                          what="the second run to be turned away")[0]
        said = second["state"]["message"] or ""
        assert second["state_type"] == "CANCELLED" or "another dueflow run is active" in said, said
        assert smtp_sink.keys() == [] and db.ledger_rows(db.engine_for(url)).empty

        answer = {"run_input": {"choice": "send up to", "up_to": 10,
                                "approved_by": "Ana (accounts receivable)"}}
        wait_for(lambda: httpx.post(f"{api}/flow_runs/{paused['id']}/resume", json=answer,
                                    timeout=10).status_code < 300,  # a busy SQLite-backed API says 503
                 what="the answer to be taken")
        wait_for(lambda: httpx.get(f"{api}/flow_runs/{paused['id']}", timeout=5).json()["state_type"]
                 == "COMPLETED", what="the approved night to end", timeout=120)
        sent = smtp_sink.keys()
        assert len(sent) == len(set(sent)) == 10  # exactly the ten a person allowed, once each
        with db.engine_for(url).connect() as conn:
            kept = conn.execute(text("SELECT choice, up_to, approved_by FROM dueflow_nights"
                                     " WHERE as_of = :d"), {"d": AS_OF.isoformat()}).one()
        assert tuple(kept) == ("send up to", 10, "Ana (accounts receivable)")

        trigger(env, AS_OF + timedelta(days=1))  # the rest is still due: no one answers this time
        unanswered = wait_for(lambda: [r for r in runs(api, deployment)
                                       if r["state_name"] == "Needs attention"],
                              what="the unanswered night to end", timeout=120,
                              details=lambda: str([(r["state_type"], r["state_name"], r["state"]["message"])
                                                   for r in runs(api, deployment)]))[0]
        assert "no one answered within" in unanswered["state"]["message"]
        assert len(smtp_sink.keys()) == 10  # nothing more went
    finally:
        runner.terminate()
        runner.wait(30)


def test_from_the_command_line_the_night_stops_in_one_line_and_goes_on_with_approve(
        dueflow_cli, mail_env, smtp_sink, tmp_path):
    url = f"sqlite:///{tmp_path / 'dueflow.db'}"
    company(url, 30)
    env = mail_env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_GUARD_MIN_EMAILS": "5"}
    stopped = dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)
    assert stopped.returncode == 2 and len(stopped.stderr.strip().splitlines()) == 1, stopped.stderr
    assert "30 emails tonight, against a median of 2" in stopped.stderr and "--approve all" in stopped.stderr
    assert smtp_sink.keys() == [] and db.ledger_rows(db.engine_for(url)).empty
    foreseen = dueflow_cli("forecast", "--from", AS_OF.isoformat(), "--days", "2", env=env)
    assert (f"The night of {AS_OF} would wait for a person (docs/operations.md): dunning: 30 emails tonight,"
            " against a median of 2 over the last 3 nights") in foreseen.stdout, foreseen.stdout
    approved = dueflow_cli("run", "--as-of", AS_OF.isoformat(), "--approve", "all", env=env)
    assert approved.returncode == 0, approved.stderr
    assert len(smtp_sink.keys()) == 30 and "The night looked wrong and went on: send all" in approved.stdout
