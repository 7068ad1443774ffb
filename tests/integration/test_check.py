"""`dueflow check` against real parts: a SQLite file, aiosmtpd with STARTTLS or implicit TLS
and a login (a private CA), a local OpenAI-compatible server, and the session's Prefect
server. Every item ok exits 0; each broken part is one `problem` line with its fix, the
rest still checked; nothing is sent, nothing is drafted, no password is printed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from dueflow.tasks.adapters import db
from tests.helpers.openai_server import OpenAIStub, openai_stub
from tests.helpers.smtp_server import SmtpSink, free_port

USER, PASSWORD = "alerts@corp.example", "s3cr=t:pw"
QUOTED = "alerts%40corp.example:s3cr%3Dt%3Apw"


@pytest.fixture(params=["starttls", "ssl"])
def tls_sink(request, certificate) -> Iterator[SmtpSink]:
    sink = SmtpSink(tls=request.param, login=(USER, PASSWORD), certfile=str(certificate))
    sink.start()
    try:
        yield sink
    finally:
        sink.stop()


@pytest.fixture
def llm() -> Iterator[OpenAIStub]:
    with openai_stub() as stub:
        yield stub


@pytest.fixture
def ready_db(sqlite_url) -> str:
    db.init_db(db.engine_for(sqlite_url), sample_tables=True)
    return sqlite_url


def mail_url(sink: SmtpSink, certificate: Path, credentials: str = QUOTED, trusted: bool = True) -> str:
    scheme = "smtps" if sink.tls == "ssl" else "smtp+starttls"
    return f"{scheme}://{credentials}@127.0.0.1:{sink.port}" + (f"?cafile={certificate}" if trusted else "")


def lines(stdout: str) -> dict[str, str]:
    """Each item's line, by the item's name."""
    out = {}
    for line in stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("ok", "problem"):
            out[rest.strip().partition(": ")[0]] = f"{status} {rest.strip()}"
    return out


def test_everything_set_up_is_all_ok_and_nothing_is_sent_or_drafted(
        dueflow_cli, ready_db, tls_sink, certificate, llm, prefect_server):
    env = {"DUEFLOW_DATABASE_URL": ready_db, "DUEFLOW_MAIL_URL": mail_url(tls_sink, certificate),
           "DUEFLOW_MAIL_FROM": USER, "DUEFLOW_ESCALATION_TO": "collections@corp.example",
           "OPENAI_API_KEY": "sk-check-key", "OPENAI_BASE_URL": llm.base_url,
           "DUEFLOW_LLM_MODEL": "local-model", "PREFECT_API_URL": prefect_server,
           "DUEFLOW_DUNNING_START": "due"}  # chosen: not a warning
    result = dueflow_cli("check", env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    items = lines(result.stdout)
    assert all(line.startswith("ok ") for line in items.values()), result.stdout
    assert result.stdout.rstrip().endswith(f"all {len(items)} checks ok")
    tls = "TLS, EHLO" if tls_sink.tls == "ssl" else "EHLO, STARTTLS"
    assert f"{tls}, login as {USER} ok; sender {USER} accepted (nothing sent)" in result.stdout
    assert "reachable; ledger at version" in items[f"database {ready_db}"]
    assert "writable (a write tried in a transaction rolled back)" in items["dueflow's tables"]
    assert items["sources"].startswith("ok sources: read in")
    assert "model local-model offered" in result.stdout
    assert f"Prefect API: {prefect_server} answers" in result.stdout
    assert "12 sample emails render" in items["templates"]
    assert items["dunning start"].startswith("ok dunning start: due (DUEFLOW_DUNNING_START): a first reminder"
                                             " counts from due_date")
    assert tls_sink.messages == [] and tls_sink.data_seen == []
    assert llm.model_lists == 1 and llm.requests == []  # listed the models, drafted nothing
    assert PASSWORD not in result.stdout + result.stderr and "sk-check-key" not in result.stdout


def test_each_broken_part_is_one_problem_with_its_fix(dueflow_cli, tmp_path, tls_sink, certificate, llm):
    llm.models = ["some-other-model"]
    dead = free_port()
    env = {"DUEFLOW_DATABASE_URL": f"sqlite:///{tmp_path / 'missing.db'}",
           "DUEFLOW_MAIL_URL": mail_url(tls_sink, certificate, credentials="alerts%40corp.example:wrong-pw"),
           "DUEFLOW_MAIL_FROM": USER, "OPENAI_API_KEY": "sk-check-key", "OPENAI_BASE_URL": llm.base_url,
           "PREFECT_API_URL": f"http://127.0.0.1:{dead}/api"}
    result = dueflow_cli("check", env=env)
    assert result.returncode == 1
    items = lines(result.stdout)
    database = items[f"database sqlite:///{tmp_path / 'missing.db'}"]
    assert database.startswith("problem") and "does not exist — fix: run `dueflow init-db`" in database
    assert not (tmp_path / "missing.db").exists()  # checking did not create it
    mail = next(v for k, v in items.items() if k.startswith("mail server"))
    assert mail.startswith("problem") and "login refused: 535" in mail
    assert "check the user and password in DUEFLOW_MAIL_URL" in mail
    assert "wrong-pw" not in result.stdout
    llm_line = next(v for k, v in items.items() if k.startswith("LLM"))
    assert "the model gpt-4o-mini is not offered (offered: some-other-model)" in llm_line
    assert "set DUEFLOW_LLM_MODEL" in llm_line
    prefect = items["Prefect API"]
    assert prefect.startswith("problem") and f"127.0.0.1:{dead}" in prefect
    assert "prefect server start" in prefect
    escalation = items["setting DUEFLOW_ESCALATION_TO"]
    assert escalation.startswith("problem") and "set DUEFLOW_ESCALATION_TO=" in escalation
    assert items["templates"].startswith("ok")  # the rest is still checked
    assert "problem(s)" in result.stdout.splitlines()[-1]


def test_untrusted_certificate_and_a_server_that_wants_a_login(dueflow_cli, ready_db, tls_sink, certificate):
    base = {"DUEFLOW_DATABASE_URL": ready_db, "DUEFLOW_ESCALATION_TO": "collections@corp.example"}
    untrusted = dueflow_cli("check", env=base | {"DUEFLOW_MAIL_URL": mail_url(tls_sink, certificate,
                                                                              trusted=False)})
    mail = next(v for k, v in lines(untrusted.stdout).items() if k.startswith("mail server"))
    assert untrusted.returncode == 1
    assert "TLS certificate is not trusted" in mail and "?cafile=" in mail
    assert PASSWORD not in untrusted.stdout

    scheme = "smtps" if tls_sink.tls == "ssl" else "smtp+starttls"
    anonymous = dueflow_cli("check", env=base | {
        "DUEFLOW_MAIL_URL": f"{scheme}://127.0.0.1:{tls_sink.port}?cafile={certificate}"})
    mail = next(v for k, v in lines(anonymous.stdout).items() if k.startswith("mail server"))
    assert "refuses the sender dueflow@localhost: 530" in mail
    assert tls_sink.messages == []


def test_unreachable_mail_and_llm_and_bad_settings(dueflow_cli, ready_db, tmp_path):
    dead = free_port()
    env = {"DUEFLOW_DATABASE_URL": ready_db, "DUEFLOW_MAIL_URL": f"smtp://127.0.0.1:{dead}",
           "DUEFLOW_ESCALATION_TO": "collections@corp.example",
           "OPENAI_API_KEY": "sk-x", "OPENAI_BASE_URL": f"http://127.0.0.1:{dead}/v1"}
    result = dueflow_cli("check", env=env)
    items = lines(result.stdout)
    assert result.returncode == 1
    mail = items[f"mail server smtp://127.0.0.1:{dead}"]
    assert "cannot connect" in mail and "check the host and port in DUEFLOW_MAIL_URL" in mail
    llm_line = items[f"LLM http://127.0.0.1:{dead}/v1"]
    assert "unreachable" in llm_line and "check OPENAI_BASE_URL" in llm_line
    assert items[f"database {ready_db}"].startswith("ok")

    outbox = dueflow_cli("check", env={"DUEFLOW_DATABASE_URL": ready_db,
                                       "DUEFLOW_ESCALATION_TO": "collections@corp.example",
                                       "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}",
                                       "OPENAI_API_KEY": ""})  # LLM off
    assert outbox.returncode == 0, outbox.stdout
    assert "writable (created by the first run)" in outbox.stdout
    assert not (tmp_path / "outbox").exists()

    bad = dueflow_cli("check", env={"DUEFLOW_TIMEZONE": "Mars/Olympus", "DUEFLOW_MAIL_FROM": "Finance",
                                    "DUEFLOW_DATABASE_URL": "postgresql://u:hunter2@127.0.0.1:1/x"})
    assert bad.returncode == 1
    assert ("problem  setting DUEFLOW_TIMEZONE: DUEFLOW_TIMEZONE='Mars/Olympus' is not a known"
            " time zone") in bad.stdout
    assert "problem  setting DUEFLOW_MAIL_FROM" in bad.stdout
    assert "not checked: the settings above are not usable" in bad.stdout
    assert "hunter2" not in bad.stdout + bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.pg
def test_check_names_the_partial_index_of_open_invoices_the_dunning_candidates_read(pg_url):
    from dueflow.tasks.adapters.sources import index_advice

    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    database = db.Database(pg_url).with_sources()

    def open_invoices() -> list:
        return [a for a in index_advice(engine, database.sources)
                if a.source == "invoices" and "open invoices" in a.purpose]

    assert [a.statement for a in open_invoices()] == [None]  # the sample tables have it
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX invoices_open"))
    [advice] = open_invoices()
    assert advice.statement.startswith("CREATE INDEX ON ")
    assert advice.statement.endswith('"invoices" ("status") WHERE "paid_at" IS NULL;'), advice.statement


@pytest.mark.pg
def test_check_names_the_index_the_clients_payment_history_is_read_by(pg_url):
    """Each chunk of reminders reads its clients' invoices (sql/client_payment_history_of):
    without an index on the client column that is a scan of every invoice per chunk."""
    from dueflow.tasks.adapters.sources import index_advice

    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)
    database = db.Database(pg_url).with_sources()

    def by_client() -> list:
        return [a.statement for a in index_advice(engine, database.sources)
                if a.source == "invoices" and "payment history" in a.purpose]

    assert by_client() == [None]  # the sample tables have it
    with engine.begin() as conn:
        conn.execute(text("DROP INDEX invoices_client_id"))
    [statement] = by_client()
    assert statement is not None and statement.endswith('"invoices" ("client_id");'), statement


@pytest.mark.pg
def test_check_names_the_index_on_the_typed_start_the_dunning_candidates_read_by(pg_url, tmp_path):
    """sql/dunning_candidates_typed reads the step-less open invoices by a range on their start:
    `check --sources` names the index on sent_at (due_date when counting from it) and says it
    is there once created; a text start, or 'any', is read as before and needs none."""
    from dueflow.tasks.adapters.sources import index_advice
    from dueflow.tasks.check import check_settings, sources_report

    _, settings = check_settings({"DUEFLOW_DATABASE_URL": pg_url, "DUEFLOW_MAIL_URL": f"file://{tmp_path}",
                                  "DUEFLOW_MAIL_FROM": "ar@ours.example"})
    assert settings is not None
    said = "  invoices: {} for the dunning candidates without a step, by sent_at"

    engine = db.engine_for(pg_url)
    db.init_db(engine, sample_tables=True)

    def by_start(start: str) -> list:
        sources = db.Database(pg_url).with_sources().sources
        assert sources is not None
        return [a.statement for a in index_advice(engine, sources, start)
                if a.source == "invoices" and "without a step" in a.purpose]

    [sent] = by_start("sent")
    assert sent is not None and sent.endswith('"invoices" ("sent_at") WHERE "paid_at" IS NULL;'), sent
    assert said.format("missing") + f": {sent}" in sources_report(settings)
    [due] = by_start("due")
    assert due is not None and due.endswith('"invoices" ("due_date") WHERE "paid_at" IS NULL;'), due
    assert by_start("any") == []
    with engine.begin() as conn:  # on other rows than the open ones: it cannot serve the range
        conn.execute(text("CREATE INDEX invoices_sent_paid ON invoices (sent_at) WHERE paid_at IS NOT NULL"))
    assert by_start("sent") == [sent]
    with engine.begin() as conn:
        conn.execute(text(sent))
        conn.execute(text("CREATE INDEX invoices_due_anywhere ON invoices (due_date, id)"))
    assert by_start("sent") == [None] and by_start("due") == [None]
    assert said.format("ok") in sources_report(settings)
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE invoices ALTER COLUMN sent_at TYPE text"))
    assert by_start("sent") == [] and by_start("due") == []  # the text comparison, as before


OWN_PHRASEBOOK = """disabled = ["open.any.well"]
[[sentence]]
id = "acme.open.partner"
locale = "en"
slot = "opening"
fits = ["long_standing"]
text = "As a long standing Acme partner, you know how we work."
"""


def test_the_phrasebook_is_listed_for_review_with_the_companys_own_and_a_reader_may_leave_early(
        ready_db, tmp_path):
    """`dueflow check --phrasebook` as a process: dueflow's sentences and the company's, each
    with what it may be chosen for; piped into `head`, the command ends quietly."""
    import os
    import subprocess
    import sys

    own = tmp_path / "own.toml"
    own.write_text(OWN_PHRASEBOOK, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DUEFLOW_", "OPENAI_"))} | {
        "DUEFLOW_DATABASE_URL": ready_db, "DUEFLOW_MAIL_URL": f"file://{tmp_path / 'outbox'}",
        "DUEFLOW_ESCALATION_TO": "collections@corp.example", "DUEFLOW_PHRASEBOOK_FILE": str(own)}
    command = [str(Path(sys.executable).parent / "dueflow"), "check", "--phrasebook"]
    whole = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    phrasebook = lines(whole.stdout)["phrasebook"]
    # one of dueflow's sentences turned off in every locale, one of the company's added in English
    assert "en 63, de 62, es 62 sentences" in phrasebook and ": 1 of yours" in phrasebook
    listed = whole.stdout.splitlines()
    at = listed.index("    opening  acme.open.partner  (every step; every tone; long_standing; "
                      f"DUEFLOW_PHRASEBOOK_FILE {own})")
    assert listed[at + 1].strip() == "As a long standing Acme partner, you know how we work."
    assert "open.any.well " not in whole.stdout  # turned off, in every locale

    with subprocess.Popen(command, env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as early:
        assert early.stdout is not None and early.stdout.readline().startswith("ok")
        early.stdout.close()  # what `| head -1` does
        code = early.wait(timeout=120)
        stderr = early.stderr.read() if early.stderr else ""
    assert code in (0, 141) and "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
