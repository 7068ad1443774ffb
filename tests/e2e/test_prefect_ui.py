"""dueflow as the data team sees it in the Prefect UI, against a real `prefect server
start`: `prefect deploy` from `prefect.yaml` as a fresh clone has it (no extra
variables), a process work pool and a worker, runs created through the REST API the UI
uses, and what each run says about itself there — name, tags, logs, state, event,
artifacts, persisted result. Slow: one deployment and one worker for the module."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest

from dueflow.tasks.adapters import db
from dueflow.tasks.core.locales import SUPPORTED_LOCALES
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import client, contract, insert, invoice
from tests.helpers.runs import stop
from tests.helpers.smtp_server import SmtpSink

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
AS_OF = date(2027, 1, 1)
RENEWAL = AS_OF + timedelta(days=30)
NOTEBOOK_NIGHT = RENEWAL - timedelta(days=15)  # the contracts' 15-day lead: new keys, with their facts
pytestmark = pytest.mark.xdist_group("prefect-server")


@dataclass
class Deployed:
    api: str
    env: dict[str, str]
    deployment: dict
    url: str  # the database the worker's runs use
    sink: SmtpSink

    def start_run(self, **parameters: object) -> str:
        """A run as the UI's custom-run form creates it."""
        for attempt in range(5):
            response = httpx.post(f"{self.api}/deployments/{self.deployment['id']}/create_flow_run",
                                  json={"parameters": parameters}, timeout=30)
            # 503 is how Prefect's server says "my SQLite database was busy, nothing was
            # done, try again"; its own client retries it, and so does this.
            if response.status_code != 503:
                break
            time.sleep(0.5 * 2 ** attempt)
        response.raise_for_status()
        return response.json()["id"]

    def finished(self, run_id: str) -> dict:
        return wait_for(lambda: (r := httpx.get(f"{self.api}/flow_runs/{run_id}", timeout=10).json())
                        and r["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") and r,
                        what=f"flow run {run_id} to finish", timeout=240)

    def logs(self, run_id: str) -> list[str]:
        body = {"logs": {"flow_run_id": {"any_": [run_id]}}, "sort": "TIMESTAMP_ASC"}
        return [entry["message"] for entry in
                httpx.post(f"{self.api}/logs/filter", json=body, timeout=10).json()]

    def artifacts(self, run_id: str) -> dict[str, dict]:
        body = {"artifacts": {"flow_run_id": {"any_": [run_id]}}}
        found = httpx.post(f"{self.api}/artifacts/filter", json=body, timeout=10).json()
        return {a["key"]: a for a in found if a["key"]}  # keyless ones are Prefect's own (results)


def _prefect(*args: str, env: dict[str, str], cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=240)


@pytest.fixture(scope="module")
def deployed(prefect_server_process, tmp_path_factory) -> Iterator[Deployed]:
    api, env = prefect_server_process
    tmp = tmp_path_factory.mktemp("ui")
    url = f"sqlite:///{tmp / 'dueflow.db'}"
    db.init_db(db.engine_for(url), sample_tables=True)
    insert(url, "contracts", [contract(f"c{i}", RENEWAL) for i in range(3)])
    sink = SmtpSink()
    sink.start()
    # What a fresh clone has: prefect.yaml as committed, no DUEFLOW_PROJECT_DIR or the like.
    env = {k: v for k, v in env.items() if k != "PREFECT_LOGGING_LEVEL"}
    pool = _prefect("work-pool", "create", "dueflow", "--type", "process", env=env)
    assert pool.returncode == 0 or "already exists" in pool.stdout + pool.stderr, pool.stderr
    deploy = _prefect("--no-prompt", "deploy", "--name", "nightly", env=env)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    deployment = httpx.get(f"{api}/deployments/name/nightly-alerts/nightly", timeout=10).json()
    worker_env = env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{sink.port}",
                        "DUEFLOW_MAIL_FROM": "alerts@corp.example", "DUEFLOW_TIMEZONE": "UTC",
                        "PREFECT_WORKER_QUERY_SECONDS": "1"}
    log = open(tmp / "worker.log", "w", encoding="utf-8")  # noqa: SIM115 - open for the worker's lifetime
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "dueflow",
                               "--type", "process"], env=worker_env, cwd=tmp, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        yield Deployed(api, env, deployment, url, sink)
    finally:
        stop([worker])
        log.close()
        sink.stop()
        db.engine_for(url).dispose()


def test_prefect_yaml_deploys_from_a_fresh_clone_with_its_schedule_limit_and_form(deployed):
    d = deployed.deployment
    pull = d["pull_steps"]
    assert pull and all("{{" not in json.dumps(step) for step in pull)  # nothing left unresolved
    assert pull[0]["prefect.deployments.steps.set_working_directory"]["directory"] == str(ROOT)
    schedule = d["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("0 6 * * *", "Europe/Madrid")
    assert d["global_concurrency_limit"]["limit"] == 1
    assert d["concurrency_options"]["collision_strategy"] == "CANCEL_NEW"
    assert "invoice reminders" in d["description"]
    form = d["parameter_openapi_schema"]["properties"]
    assert all(field.get("description") for field in form.values()), form  # every field explained
    assert "today in the business time zone" in form["as_of"]["description"]
    assert form["renewal_locale"]["enum"] == list(SUPPORTED_LOCALES)
    # Optional values are plain fields, left empty (no "date | None" switch in the form).
    assert (form["as_of"]["type"], form["as_of"]["default"]) == ("string", "")  # empty: today
    assert not [name for name, field in form.items() if "anyOf" in field or field.get("type") == "null"], form
    assert (form["send_cap"]["type"], form["email_block"]["type"]) == ("integer", "string")
    assert "profile" in form["dunning_delays"]["description"]
    assert "one-time take-over" in form["adopt"]["title"] and "sends nothing" in form["adopt"]["description"]


def test_prefect_yaml_deploys_the_bounce_intake_hourly_under_its_own_limit(deployed):
    deploy = _prefect("--no-prompt", "deploy", "--name", "bounces", env=deployed.env)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    d = httpx.get(f"{deployed.api}/deployments/name/ingest-bounces/bounces", timeout=10).json()
    schedule = d["schedules"][0]["schedule"]
    assert (schedule["cron"], schedule["timezone"]) == ("15 * * * *", "Europe/Madrid")
    assert d["global_concurrency_limit"]["limit"] == 1
    nightly = deployed.deployment["global_concurrency_limit"]
    assert d["global_concurrency_limit"]["id"] != nightly["id"]  # its own limit, not the night's
    assert d["entrypoint"] == "flows/bounces.py:ingest_bounces"


def test_a_run_from_the_form_sends_once_and_explains_itself(deployed):
    dry = deployed.finished(deployed.start_run(as_of=str(AS_OF), dry_run=True))
    assert dry["state_type"] == "COMPLETED" and deployed.sink.keys() == []
    assert dry["name"] == f"{AS_OF} dry run" and "dry-run" in dry["tags"]
    assert set(deployed.artifacts(dry["id"])) == {"nightly-alerts-dry-run-rows",
                                                  "nightly-alerts-dry-run-summary"}

    first = deployed.finished(deployed.start_run(as_of=str(AS_OF)))
    again = deployed.finished(deployed.start_run(as_of=str(AS_OF)))
    keys = sorted(f"renewal/c{i}/{RENEWAL}/30d" for i in range(3))
    assert sorted(deployed.sink.keys()) == keys  # sent once, over three runs
    assert first["name"] == str(AS_OF) and "dry-run" not in first["tags"]
    assert (first["state_type"], first["state_name"]) == ("COMPLETED", "Completed")
    assert first["state"]["message"].startswith(f"Run for {AS_OF}: 3 sent")
    assert again["state"]["message"].startswith(f"Nothing new to send for {AS_OF}")

    logs = "\n".join(deployed.logs(first["id"]))
    for line in ("renewal: read 3 contracts", "renewal: 3 due (3 new, 0 already in the ledger)",
                 "renewal: reserved 3 of 3 new", "renewal: composed and stored 3 email(s)", "renewal: 3 sent",
                 f"Run for {AS_OF}: 3 sent", "dunning: delays in force: clients without a profile"):
        assert line in logs, logs
    assert logs.count("Finished in state") <= 1, logs  # the flow run's own; its tasks' are quiet

    artifacts = deployed.artifacts(first["id"])
    summary = artifacts["nightly-alerts-summary"]["data"]
    assert summary.count(f"Run for {AS_OF}") == 1 and "## Sent" in summary
    assert artifacts["nightly-alerts-summary"]["description"] is None  # the headline once, inside
    assert "Vendor c0" in summary and "| adopted" not in summary and "LLM" not in summary
    assert all(a["task_run_id"] is None for a in artifacts.values())  # the flow run's, not a task's
    rows = json.loads(artifacts["nightly-alerts-rows"]["data"])
    assert list(rows[0])[:6] == ["status", "what to do", "who", "what", "amount", "date"]  # scanned first
    assert {r["who"] for r in rows} == {"Vendor c0", "Vendor c1", "Vendor c2"}
    assert {(r["amount"], r["date"], r["status"]) for r in rows} == {("€1,250.50", str(RENEWAL), "sent")}
    assert all(r["what"] and r["key"] in keys for r in rows)


def test_a_run_with_problems_needs_attention_and_says_so_with_an_event(deployed):
    insert(deployed.url, "clients", [client("cl", email="ap@client.example")])
    sent_at = (AS_OF - timedelta(days=10)).isoformat() + "T10:00:00+00:00"
    insert(deployed.url, "invoices", [invoice("ok", "cl", sent_at), invoice("bad", "cl", sent_at,
                                                                            currency="XXY")])
    deployed.sink.faults["ap@client.example"] = "rcpt_550"
    run = deployed.finished(deployed.start_run(as_of=str(AS_OF)))
    # A failed email: not green in the UI (DUEFLOW_ATTENTION_STATE's default), the summary kept.
    assert (run["state_type"], run["state_name"]) == ("FAILED", "Needs attention")
    assert "1 failed" in run["state"]["message"] and "1 quarantined" in run["state"]["message"]

    body = {"filter": {"event": {"name": ["dueflow.run.needs-attention"]},
                       "related": {"id": [f"prefect.flow-run.{run['id']}"]}}, "limit": 10}
    events = wait_for(lambda: httpx.post(f"{deployed.api}/events/filter", json=body, timeout=10)
                      .json()["events"], what="the needs-attention event")
    payload = events[0]["payload"]
    assert (payload["failed"], payload["quarantined"], payload["pending"]) == (1, 1, 0)
    assert "ap@client.example" not in json.dumps(events[0])  # counts only

    summary = deployed.artifacts(run["id"])["nightly-alerts-summary"]["data"]
    attention = summary.split("## Needs attention", 1)[1].replace("<br>", " ")  # a cell's lines
    assert "unknown currency 'XXY'" in attention and "fix the source row" in attention
    assert "| quarantined |" in attention and "| invoice row bad, no. " in attention  # what the row is
    # A 550 is a permanent refusal: said so, with what to do right after the status.
    assert "550" in attention
    assert "| failed permanently | fix the address (the next run sends it)" in attention
    assert "a later run retries" not in attention


def test_run_deployment_gives_a_notebook_the_run_summary(deployed):
    script = textwrap.dedent(f"""
        from prefect.deployments import run_deployment
        run = run_deployment("nightly-alerts/nightly",
                             parameters={{"as_of": "{NOTEBOOK_NIGHT}", "dry_run": True}}, timeout=240)
        summary = run.state.result()
        print(type(summary).__name__, summary.as_of, summary.dry_run, type(summary.rows).__name__,
              len(summary.rows))
        # What a notebook does with it (docs/operations.md): the contracts by currency.
        print(summary.rows.groupby("currency")["amount"].sum().to_dict())
    """)
    result = subprocess.run([sys.executable, "-c", script], env=deployed.env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    printed = result.stdout.split()
    assert printed[:4] == ["RunSummary", str(NOTEBOOK_NIGHT), "True", "DataFrame"], result.stdout
    assert int(printed[4]) >= 3  # a row per key: the three contracts at least
    # Their 15-day alerts, 3 × 1,250.50 EUR, summed as numbers (and any reminder in EUR).
    assert ast.literal_eval(result.stdout.splitlines()[1])["EUR"] >= 3751.5, result.stdout


def test_the_cli_keeps_the_console_quiet_and_sends_its_logs_to_the_api(deployed, tmp_path):
    env = deployed.env | {"DUEFLOW_DATABASE_URL": deployed.url, "DUEFLOW_MAIL_URL": f"file://{tmp_path}",
                          "DUEFLOW_TIMEZONE": "UTC", "DUEFLOW_MAIL_FROM": "alerts@corp.example"}
    env.pop("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", None)
    result = subprocess.run([str(BIN / "dueflow"), "run", "--as-of", str(AS_OF), "--dry-run"], env=env,
                            capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "INFO" not in result.stdout + result.stderr and "renewal: read" not in result.stderr
    runs = httpx.post(f"{deployed.api}/flow_runs/filter", json={
        "flow_runs": {"name": {"any_": [f"{AS_OF} dry run"]}, "deployment_id": {"is_null_": True}}},
        timeout=10).json()
    assert runs, "the CLI's run is not on the server"
    assert any("renewal: read" in line for line in deployed.logs(runs[-1]["id"]))
    assert os.environ.get("PREFECT_API_URL") != deployed.api  # the test's own process untouched
