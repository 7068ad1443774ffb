"""Several companies from one worker (issue 29), against a real `prefect server start`: the
two company deployments of `prefect.yaml` (nightly-acme, nightly-globex) deployed as a fresh
clone has them, one process worker on the `dueflow` pool, and a run of each through the
REST API the UI uses. Each run names its own DueflowEmail block (the `email_block`
parameter) and its own DueflowDatabase block (the deployment's environment): Acme's
reminder leaves as Acme — its sender, Reply-To, company, archive Bcc, Spanish renewal
alerts — and Globex's as Globex, each from its own ledger, each deployment on its own
schedule. Slow: a deployment, blocks and a worker."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest
from sqlalchemy import text

from dueflow.tasks.adapters import db
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import client, contract, insert, invoice
from tests.helpers.runs import stop
from tests.helpers.smtp_server import SmtpSink

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
AS_OF = date(2027, 3, 1)
SENT = (AS_OF - timedelta(days=8)).isoformat() + "T09:00:00+00:00"
pytestmark = pytest.mark.xdist_group("prefect-server")
PDF = b"%PDF-1.4\n% an invoice\n%%EOF\n"

COMPANIES = {
    "acme": {"mail_from": "Acme Finance <ar@acme.example>", "reply_to": "Cobros <cobros@acme.example>",
             "company_name": "Acme Ibérica S.L.", "signature": "Ana García\nCuentas a cobrar",
             "bcc": "archive@acme.example", "escalation_to": "collections@acme.example"},
    "globex": {"mail_from": "Globex Receivables <ar@globex.example>", "company_name": "Globex Corporation",
               "bcc": "records@globex.example", "payment_link": "https://pay.globex.example/{number}"},
}


def prefect(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "prefect"), *args], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def start_run(api: str, deployment_id: str, **parameters: object) -> str:
    for attempt in range(5):
        response = httpx.post(f"{api}/deployments/{deployment_id}/create_flow_run",
                              json={"parameters": parameters}, timeout=30)
        if response.status_code != 503:  # the server's SQLite was busy: nothing done, try again
            break
        time.sleep(0.5 * 2 ** attempt)
    response.raise_for_status()
    return response.json()["id"]


def finished(api: str, run_id: str) -> dict:
    return wait_for(lambda: (r := httpx.get(f"{api}/flow_runs/{run_id}", timeout=10).json())
                    and r["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") and r,
                    what=f"flow run {run_id} to finish", timeout=300)


def seed(url: str, name: str) -> None:
    db.init_db(db.engine_for(url), sample_tables=True)
    insert(url, "clients", [client(f"{name}-client", cc_email=f"manager@{name}.example")])
    insert(url, "invoices", [invoice(f"{name}-inv", f"{name}-client", SENT, number=f"{name.upper()}-1")])
    insert(url, "contracts", [contract(f"{name}-c", AS_OF + timedelta(days=30),
                                       notify_email=f"owner@{name}.example")])


def test_two_deployments_on_one_worker_send_for_two_companies(prefect_server_process, tmp_path):
    api, env = prefect_server_process
    sink = SmtpSink()
    sink.start()
    urls = {}
    for name in COMPANIES:
        urls[name] = f"sqlite:///{tmp_path / f'{name}.db'}"
        seed(urls[name], name)
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name.upper()}-1.pdf").write_bytes(PDF + name.encode())
        COMPANIES[name]["invoice_pdf"] = f"{tmp_path / name}/{{number}}.pdf"
    blocks = textwrap.dedent(f"""
        import json
        from pydantic import SecretStr
        from dueflow.blocks.prefect_blocks import DueflowDatabase, DueflowEmail
        companies, urls = json.loads({json.dumps(json.dumps(COMPANIES))}), {urls!r}
        for name, fields in companies.items():
            DueflowEmail(**fields).save(name, overwrite=True)
            DueflowDatabase(url=SecretStr(urls[name])).save(name, overwrite=True)
    """)
    made = subprocess.run([sys.executable, "-c", blocks], env=env, capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0, made.stderr
    pool = prefect("work-pool", "create", "dueflow", "--type", "process", env=env)
    assert pool.returncode == 0 or "already exists" in pool.stdout + pool.stderr, pool.stderr
    deploy = prefect("--no-prompt", "deploy", "--name", "nightly-acme", "--name", "nightly-globex", env=env)
    assert deploy.returncode == 0, deploy.stdout + deploy.stderr
    deployments = {name: httpx.get(f"{api}/deployments/name/nightly-alerts/nightly-{name}", timeout=10).json()
                   for name in COMPANIES}
    schedules = {name: (d["schedules"][0]["schedule"]["cron"], d["schedules"][0]["schedule"]["timezone"])
                 for name, d in deployments.items()}
    assert schedules == {"acme": ("0 6 * * *", "Europe/Madrid"),
                         "globex": ("30 7 * * 1-5", "America/New_York")}  # each its own schedule
    assert {d["work_pool_name"] for d in deployments.values()} == {"dueflow"}  # one pool
    assert deployments["acme"]["parameters"]["email_block"] == "acme"
    form = deployments["acme"]["parameter_openapi_schema"]["properties"]["email_block"]
    assert "DueflowEmail block" in form["description"]

    # One worker, with only what every company shares: the mail relay.
    worker_env = env | {"DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{sink.port}", "DUEFLOW_TIMEZONE": "UTC",
                        "PREFECT_WORKER_QUERY_SECONDS": "1"}
    log = open(tmp_path / "worker.log", "w", encoding="utf-8")  # noqa: SIM115 - open for the worker's lifetime
    worker = subprocess.Popen([str(BIN / "prefect"), "worker", "start", "--pool", "dueflow", "--type",
                               "process"], env=worker_env, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
    try:
        runs = {name: start_run(api, d["id"], as_of=str(AS_OF)) for name, d in deployments.items()}
        ended = {name: finished(api, run_id) for name, run_id in runs.items()}
        for name, run in ended.items():
            said = (tmp_path / "worker.log").read_text()[-3000:]
            assert run["state_type"] == "COMPLETED", (name, run["state"], said)
            assert run["state"]["message"].startswith(f"Run for {AS_OF}: 2 sent"), run["state"]["message"]
        by_key = sink.by_key()
        renews = AS_OF + timedelta(days=30)
        assert sorted(by_key) == sorted([f"dunning/{n}-inv/REMINDED_1" for n in COMPANIES]
                                        + [f"renewal/{n}-c/{renews}/30d" for n in COMPANIES])
        acme, globex = by_key["dunning/acme-inv/REMINDED_1"], by_key["dunning/globex-inv/REMINDED_1"]
        assert str(acme["From"]) == "Acme Finance <ar@acme.example>"
        assert acme["Reply-To"].addresses[0].addr_spec == "cobros@acme.example"
        assert "Acme Ibérica S.L." in acme.get_body(("html",)).get_content()
        assert "Ana García" in acme.get_body(("plain",)).get_content()
        assert str(globex["From"]) == "Globex Receivables <ar@globex.example>" and "Reply-To" not in globex
        globex_text = globex.get_body(("plain",)).get_content()
        assert "Globex Corporation" in globex_text and "https://pay.globex.example/GLOBEX-1" in globex_text
        assert "Acme" not in globex_text and "Globex" not in acme.get_body(("plain",)).get_content()
        assert [a.get_content() for a in acme.iter_attachments()] == [PDF + b"acme"]
        assert [a.get_content() for a in globex.iter_attachments()] == [PDF + b"globex"]
        assert by_key[f"renewal/acme-c/{renews}/30d"]["Subject"].startswith("El contrato se renueva")
        assert by_key[f"renewal/globex-c/{renews}/30d"]["Subject"].startswith("Contract renews")
        envelopes = {str(m["X-Dueflow-Key"]): to
                     for m, to in zip(sink.messages, sink.envelope_to, strict=True)}
        assert envelopes["dunning/acme-inv/REMINDED_1"] == ["acme-client@clients.example",
                                                            "manager@acme.example", "archive@acme.example"]
        assert envelopes["dunning/globex-inv/REMINDED_1"][-1] == "records@globex.example"
        for name, url in urls.items():  # each company's ledger holds its own emails, and only them
            with db.engine_for(url).connect() as conn:
                keys = sorted(conn.execute(text("SELECT key FROM dueflow_ledger")).scalars())
            assert keys and all(f"/{name}-" in key for key in keys), keys
    finally:
        stop([worker])
        log.close()
        sink.stop()
        for url in urls.values():
            db.engine_for(url).dispose()
