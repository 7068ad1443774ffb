"""Issue 25, finding 4: a password in a URL setting never appears in what dueflow prints,
logs or publishes — whatever its characters, written percent-encoded or raw. `init-db`,
`check` and `run` against a real PostgreSQL (trust auth: any password connects) and a
real aiosmtpd server that wants this very password."""

from __future__ import annotations

import string
from datetime import date, timedelta
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings, redact_url
from dueflow.blocks.urls import mask_url, read_url
from dueflow.tasks.adapters import db
from tests import examples
from tests.helpers.factories import contract, insert
from tests.helpers.smtp_server import SmtpSink

AS_OF = date(2027, 1, 1)
# Fixed ends around any printable core: a leak of the password's first or last part shows
# as its mark, which nothing else prints.
START, END = "Vq8", "Zj3"
CORES = st.text(alphabet=string.printable, max_size=12)
FORMS = st.sampled_from(["encoded", "raw"])
_READY: set[str] = set()  # databases given their tables and a contract due (once per test)


def _ready(url: str) -> None:
    if url not in _READY:
        db.init_db(db.engine_for(url), sample_tables=True)
        insert(url, "contracts", [contract("c1", AS_OF + timedelta(days=30))])
        _READY.add(url)


def _published(prefect_server: str) -> str:
    """The text of the latest logs and artifacts on the Prefect server."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.sorting import ArtifactSort, LogSort

    with get_client(sync_client=True) as client:
        logs = client.read_logs(limit=200, sort=LogSort.TIMESTAMP_DESC)
        artifacts = client.read_artifacts(limit=20, sort=ArtifactSort.CREATED_DESC)
    return "\n".join([*(log.message for log in logs), *(str(a.data) + str(a.description) for a in artifacts)])


def _assert_hidden(password: str, *texts: str) -> None:
    for text in texts:
        assert password not in text and START not in text and END not in text, text[-2000:]


def _url_with(template: str, password: str, form: str) -> str:
    return template.format(password=quote(password, safe="") if form == "encoded" else password)


def _commands(dueflow_cli, env: dict[str, str]) -> list:
    return [dueflow_cli("init-db", env=env), dueflow_cli("check", env=env),
            dueflow_cli("run", "--as-of", AS_OF.isoformat(), env=env)]


@pytest.mark.pg
@settings(max_examples=examples(3),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(core=CORES, form=FORMS)
@example(core="pa#ss1", form="raw").via("issue 25: SQLAlchemy reads it, urlsplit did not")
@example(core="pa@ss1", form="raw").via("issue 25: the rest of it became the host")
@example(core="@:/?#%", form="encoded")
def test_a_database_password_never_shows(pg_url, smtp_sink, prefect_server, dueflow_cli, core, form):
    password = START + core + END
    url = _url_with(pg_url.replace("postgres@", "postgres:{password}@", 1), password, form)
    _ready(pg_url)
    env = {"DUEFLOW_DATABASE_URL": url, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{smtp_sink.port}",
           "DUEFLOW_MAIL_FROM": "alerts@dueflow.test",
           "DUEFLOW_ESCALATION_TO": "collections@dueflow.test", "PREFECT_API_URL": prefect_server}
    results = _commands(dueflow_cli, env)
    _assert_hidden(password, *(r.stdout + r.stderr for r in results), _published(prefect_server))
    try:
        read_url(url, "DUEFLOW_DATABASE_URL")
    except ConfigError:  # read otherwise than meant: one line, exit 2, for each command
        assert [r.returncode for r in results] == [2, 1, 2], results
        assert all("percent-encode" in r.stderr + r.stdout for r in results)
        return
    if form == "encoded":
        assert [results[0].returncode, results[2].returncode] == [0, 0], results


@settings(max_examples=examples(3),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(core=CORES, form=FORMS)
@example(core="pa#ss1", form="raw").via("issue 25: 'invalid port', misleading")
@example(core="pa/ss?1", form="raw")
@example(core="@:/?#%", form="encoded")
def test_a_mail_password_never_shows(sqlite_url, prefect_server, dueflow_cli, core, form):
    password = START + core + END
    sink = SmtpSink(login=("alerts", password), plain_auth=True)
    sink.start()
    try:
        url = _url_with(f"smtp://alerts:{{password}}@127.0.0.1:{sink.port}", password, form)
        _ready(sqlite_url)
        env = {"DUEFLOW_DATABASE_URL": sqlite_url, "DUEFLOW_MAIL_URL": url,
               "DUEFLOW_MAIL_FROM": "alerts@dueflow.test",
           "DUEFLOW_ESCALATION_TO": "collections@dueflow.test", "PREFECT_API_URL": prefect_server}
        results = _commands(dueflow_cli, env)
        _assert_hidden(password, *(r.stdout + r.stderr for r in results), _published(prefect_server))
        try:
            read_url(url, "DUEFLOW_MAIL_URL")
        except ConfigError:
            assert [r.returncode for r in results] == [2, 1, 2], results
            assert all("percent-encode" in r.stderr + r.stdout for r in results)
            return
        if form == "encoded":
            assert [results[0].returncode, results[2].returncode] == [0, 0], results
            assert sink.logins >= 1
    finally:
        sink.stop()


@pytest.mark.parametrize(("setting", "url"), [
    ("DUEFLOW_DATABASE_URL", "postgresql://u:pa#ss1@host/db"),  # SQLAlchemy: password pa#ss1
    ("DUEFLOW_DATABASE_URL", "postgresql://u:pa/ss?1@host/db"),
    ("DUEFLOW_DATABASE_URL", "postgresql://u@host/db?password=pass1"),
    ("DUEFLOW_MAIL_URL", "smtp://u:pa@ss1@host:25"),  # urlsplit: up to the last @
])
def test_the_mask_is_the_connecting_parsers_reading(setting, url):
    """Before: `redact_url` used urlsplit for the database URL and printed
    `postgresql://u:pa#ss1@host/db` whole."""
    shown = mask_url(url, setting)
    assert "ss1" not in shown and "***" in shown and "host" in shown
    if setting == "DUEFLOW_DATABASE_URL":  # what init-db, check and the CLI's errors print
        assert redact_url(url) == shown


@pytest.mark.parametrize(("setting", "url"), [
    ("DUEFLOW_DATABASE_URL", "postgresql://u:pa@ss1@host/db"),  # the host would be ss1@host
    ("DUEFLOW_MAIL_URL", "smtp://u:pa#ss1@host:25"),  # was "invalid port"
    ("DUEFLOW_MAIL_URL", "smtp://u:pa/ss1@host:25"),
    ("DUEFLOW_MAIL_URL", "smtp://u:pa?ss1@host:25"),
])
def test_a_url_read_otherwise_than_meant_is_one_line_saying_to_percent_encode(setting, url):
    with pytest.raises(ConfigError) as raised:
        Settings.from_env({setting: url})
    message = str(raised.value)
    assert "percent-encode" in message and setting in message and "ss1" not in message
    assert "\n" not in message


def test_a_password_that_is_a_word_of_the_url_is_masked_and_the_scheme_still_reads(dueflow_cli, tmp_path):
    """issue 36: a password equal to `postgres` masked the scheme too (`***ql://***:***@…`).
    The scheme stays; the password is masked wherever else it appears (here also the user,
    which is the same word)."""
    from tests.helpers.smtp_server import free_port

    url = f"postgresql://postgres:postgres@127.0.0.1:{free_port()}/test"  # nothing listens
    for command in (("ledger",), ("run", "--dry-run")):
        result = dueflow_cli(*command, env={"DUEFLOW_DATABASE_URL": url,
                                            "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}"})
        line = result.stderr.strip().splitlines()[-1]
        assert result.returncode == 2 and "postgresql://***:***@127.0.0.1:" in line, line
        assert "postgres:" not in line and "***ql://" not in line, line
