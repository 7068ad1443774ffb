"""Settings from Prefect blocks: a named block overrides the environment, and its
secrets reach neither logs nor artifacts."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pytest
from prefect_email import EmailServerCredentials
from prefect_email.credentials import SMTPType
from pydantic import SecretStr

from dueflow.blocks.prefect_blocks import DueflowDatabase
from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from tests.helpers.factories import contract, insert

AS_OF = date(2027, 1, 1)
ROOT = Path(__file__).resolve().parents[2]


def test_block_types_register_with_the_prefect_cli(prefect_server):
    env = {**os.environ, "PREFECT_API_URL": prefect_server, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([str(Path(sys.executable).parent / "prefect"), "block", "register", "-m",
                             "dueflow.blocks.prefect_blocks"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Dueflow Database" in result.stdout and "Dueflow LLM" in result.stdout


@pytest.mark.pg
def test_named_blocks_override_the_environment_and_keep_secrets(pg_url, smtp_sink, prefect_server,
                                                                monkeypatch):
    secret = "s3cret-Pa55"  # trust auth accepts any password; the point is where it shows up
    url_with_password = pg_url.replace("postgres@", f"postgres:{secret}@")
    db.init_db(db.engine_for(url_with_password), sample_tables=True)
    insert(url_with_password, "contracts", [contract("c1", AS_OF + timedelta(days=15))])
    DueflowDatabase(url=SecretStr(url_with_password)).save("finance-db", overwrite=True)
    EmailServerCredentials(smtp_server="127.0.0.1", smtp_port=smtp_sink.port,
                           smtp_type=SMTPType.INSECURE).save("relay", overwrite=True)
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/not-this-one")
    monkeypatch.setenv("DUEFLOW_MAIL_URL", "smtp://127.0.0.1:1")
    monkeypatch.setenv("DUEFLOW_DATABASE_BLOCK", "finance-db")
    monkeypatch.setenv("DUEFLOW_MAIL_BLOCK", "relay")

    summary = nightly_alerts(as_of=AS_OF)
    assert summary.sent == 1 and smtp_sink.keys() == [f"renewal/c1/{AS_OF + timedelta(days=15)}/15d"]

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    with get_client(sync_client=True) as client:
        run_filter = FlowRunFilter(id=FlowRunFilterId(any_=[summary.flow_run_id]))
        artifacts = client.read_artifacts(flow_run_filter=run_filter)
        flow_run = client.read_flow_run(summary.flow_run_id)
    assert artifacts, "the run published no artifacts"
    for artifact in artifacts:
        assert secret not in str(artifact.data) and secret not in str(artifact.description)
    assert secret not in str(flow_run.parameters)
    assert secret not in repr(summary)


def test_a_missing_block_is_a_clear_error(prefect_server, monkeypatch, db_url):
    monkeypatch.setenv("DUEFLOW_DATABASE_URL", db_url)
    monkeypatch.setenv("DUEFLOW_DATABASE_BLOCK", "no-such-block")
    from dueflow.blocks.errors import ConfigError

    with pytest.raises(ConfigError, match="cannot load DueflowDatabase block 'no-such-block'"):
        nightly_alerts(as_of=AS_OF)
