"""G5's first fence with a real `prefect server start`: the served deployment has a
concurrency limit of 1 (CANCEL_NEW), so two runs triggered at once never execute
together. Slow: it starts a Prefect server and a runner."""

from __future__ import annotations

import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import httpx
import pytest

from dueflow.tasks.adapters import db
from tests.helpers.concurrency import wait_for
from tests.helpers.factories import contract, insert

ROOT = Path(__file__).resolve().parents[2]
PREFECT = str(Path(sys.executable).parent / "prefect")
AS_OF = date(2027, 1, 1)
# The session's real Prefect server lives in one worker: its tests run there.
pytestmark = pytest.mark.xdist_group("prefect-server")


def flow_runs(api: str, deployment_id: str | None = None) -> list[dict]:
    body = {"deployments": {"id": {"any_": [deployment_id]}}} if deployment_id else {}
    return httpx.post(f"{api}/flow_runs/filter", json=body, timeout=10).json()


def states(api: str, run_id: str) -> list[str]:
    history = httpx.get(f"{api}/flow_run_states/", params={"flow_run_id": run_id}, timeout=10).json()
    return [s["type"] for s in sorted(history, key=lambda s: s["timestamp"])]


def test_two_runs_triggered_at_once_never_execute_together(prefect_server_process, smtp_sink,
                                                           tmp_path):
    api, env = prefect_server_process
    url = f"sqlite:///{tmp_path / 'dueflow.db'}"
    db.init_db(db.engine_for(url), sample_tables=True)
    insert(url, "contracts", [contract(f"c{i}", AS_OF + timedelta(days=30)) for i in range(3)])
    smtp_sink.gate.clear()  # the first run holds its first DATA until we open the gate
    env = env | {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
            "PYTHONPATH": str(ROOT), "DUEFLOW_RUN_LOCK": "off",  # only the first fence here
            "PREFECT_RUNNER_POLL_FREQUENCY": "1"}  # the runner looks for triggered runs each second, not 10
    runner = subprocess.Popen([sys.executable, "-m", "dueflow.deployments.serve"], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        served = wait_for(lambda: [d for d in httpx.post(f"{api}/deployments/filter", json={}, timeout=5)
                                   .json() if d["name"] == "nightly"], what="the served deployment")
        deployment_id = served[0]["id"]
        triggers = [subprocess.Popen([PREFECT, "deployment", "run", "nightly-alerts/nightly",
                                      "--param", f'as_of="{AS_OF}"'], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    for _ in range(2)]
        assert [t.wait(60) for t in triggers] == [0, 0]
        wait_for(lambda: len(smtp_sink.data_seen) >= 1, what="the first run to deliver")
        # One run is blocked mid-delivery; the other must not be running beside it.
        runs = wait_for(lambda: (r := [x for x in flow_runs(api, deployment_id) if x["state_type"] in
                                       ("RUNNING", "CANCELLED", "CANCELLING")]) and len(r) == 2 and r,
                        what="the second run to be turned away")
        assert sorted(r["state_type"] for r in runs) in (["CANCELLED", "RUNNING"],
                                                         ["CANCELLING", "RUNNING"])
        smtp_sink.gate.set()
        ids = {r["id"] for r in runs}  # the schedule may add future runs: ignore those
        final = wait_for(lambda: (r := [x for x in flow_runs(api, deployment_id) if x["id"] in ids]) and all(
            x["state_type"] in ("COMPLETED", "CANCELLED") for x in r) and r, what="both runs to end")
        by_type = sorted(r["state_type"] for r in final)
        assert by_type == ["CANCELLED", "COMPLETED"]
        cancelled = next(r for r in final if r["state_type"] == "CANCELLED")
        assert "RUNNING" not in states(api, cancelled["id"])  # it never executed
        assert sorted(smtp_sink.keys()) == sorted(
            f"renewal/c{i}/{AS_OF + timedelta(days=30)}/30d" for i in range(3))
    finally:
        runner.terminate()
        runner.wait(30)
