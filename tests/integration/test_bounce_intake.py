"""Bounce intake with real parts (docs/bounces.md): a real Dovecot IMAP server over TLS
with a login (tests/helpers/imap_server.py) and a real Maildir and mbox, fed with reports as
Postfix, Exim, Exchange Online and Gmail write them, and the awkward ones; on both
databases. Faults: the IMAP connection dropped mid-fetch, the database lost mid-update."""

from __future__ import annotations

import itertools
import mailbox
import threading
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from dueflow.blocks.endpoints import parse_bounce_url
from dueflow.tasks import bounces
from dueflow.tasks.adapters import db, db_errors
from dueflow.tasks.adapters.mailbox import MailboxError, open_mailbox
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.message import message_id_for
from tests import examples
from tests.helpers import bounce_reports as br
from tests.helpers.imap_server import CuttingRelay, Dovecot, missing_reason

SENDER = Mailbox("alerts@dueflow.test")
KEYS = [f"dunning/inv-{i}/REMINDED_1" for i in range(1, 8)]


def original(key: str) -> br.Original:
    return br.Original(message_id_for(key, SENDER), key, recipient=f"{key.split('/')[1]}@clients.example")


def sent_rows(url: str, keys: list[str] = KEYS) -> None:
    """Ledger rows as a night leaves them: sent, with their Message-ID."""
    with db.writing(db.engine_for(url)) as conn:
        conn.execute(text(
            "INSERT INTO dueflow_ledger (key, job, subject_id, cycle, step, step_rank, as_of, status,"
            " attempts, recipient, subject, body_text, message_id, sending_at, sent_at, attempt_as_of)"
            " VALUES (:key, 'dunning', :sid, '', 'REMINDED_1', 1, '2027-01-07', 'sent', 1, :to, 'Reminder',"
            " 'text', :mid, '2027-01-07 06:00:00+00:00', '2027-01-07 06:00:03+00:00', '2027-01-07')"),
            [{"key": k, "sid": k.split("/")[1], "to": original(k).recipient,
              "mid": message_id_for(k, SENDER)} for k in keys])


def ledger(url: str) -> dict[str, tuple[str, str | None]]:
    frame = db.read_frame(db.engine_for(url), "SELECT key, status, error FROM dueflow_ledger", {})
    return {k: (s, e if isinstance(e, str) else None) for k, s, e in frame.itertuples(index=False)}


def recorded(url: str) -> tuple[list[tuple], list[tuple]]:
    engine = db.engine_for(url)
    hits = db.read_frame(engine, "SELECT report_id, key, kind, status_code FROM dueflow_bounces"
                         " ORDER BY report_id", {})
    kept = db.read_frame(engine, "SELECT report_id, reason FROM dueflow_bounce_kept ORDER BY report_id", {})
    return list(hits.itertuples(index=False, name=None)), list(kept.itertuples(index=False, name=None))


def the_mix() -> dict[str, bytes]:
    """Every kind of message the bounce mailbox gets, by what it is."""
    forged = br.Original(message_id_for(KEYS[5], SENDER), "dunning/inv-999/REMINDED_1")
    return {
        "postfix": br.postfix(original(KEYS[0])),
        "exim": br.exim(original(KEYS[1])),
        "exchange": br.exchange(original(KEYS[2])),
        "gmail": br.gmail(original(KEYS[3])),
        "enormous": br.enormous(original(KEYS[4])),
        "soft": br.postfix(original(KEYS[5]), delayed=True),
        "forged": br.postfix(forged),
        "never sent": br.postfix(original("dunning/inv-never/REMINDED_1")),
        "malformed": br.malformed(original(KEYS[6])),
        "human": br.not_a_bounce(),
    }


def assert_the_mix_applied(url: str) -> None:
    rows = ledger(url)
    bounced = {k for k, (s, _) in rows.items() if s == "bounced"}
    assert bounced == set(KEYS[:5])  # the four formats and the enormous one; nothing else
    assert rows[KEYS[0]][1] == ("bounced: 5.1.1 550 5.1.1 <inv-1@clients.example>: Recipient address"
                                " rejected: User unknown in virtual mailbox table")
    assert rows[KEYS[2]][1].startswith("bounced: 5.1.10 550 5.1.10 RESOLVER.ADR.RecipientNotFound")
    assert rows[KEYS[5]] == ("sent", None)  # the soft bounce is recorded, changes nothing
    assert rows[KEYS[6]] == ("sent", None)  # the malformed report names no row it can be sure of
    hits, kept = recorded(url)
    assert sorted((k, kind) for _, k, kind, _ in hits) == sorted(
        [(k, "hard") for k in KEYS[:5]] + [(KEYS[5], "soft")])
    assert sorted(reason for _, reason in kept) == ["mismatched", "unmatched", "unreadable", "unreadable"]


@pytest.fixture
def dovecot(certificate):
    if reason := missing_reason():
        pytest.skip(reason)
    server = Dovecot(certificate)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_every_format_over_imap_once_and_only_once(db_url, dovecot):
    sent_rows(db_url)
    dovecot.deliver(*the_mix().values())
    database = db.Database(db_url)
    config = parse_bounce_url(dovecot.url)
    summary = bounces.intake(database, config, batch=3)
    assert summary.read == 10 and sorted(summary.marked) == sorted(KEYS[:5])
    assert (summary.hard, summary.soft, len(summary.kept)) == (5, 1, 4)
    assert_the_mix_applied(db_url)
    flags = dovecot.flags()
    assert all(b"DueflowProcessed" in f and b"\\Seen" not in f for f in flags) and len(flags) == 10
    before = ledger(db_url), recorded(db_url)
    again = bounces.intake(database, config)  # the same mailbox again: nothing more
    assert (again.read, again.marked, len(again.kept)) == (0, [], 0)
    assert (ledger(db_url), recorded(db_url)) == before


def test_check_logs_in_and_finds_the_folder_reading_nothing(dovecot):
    dovecot.deliver(br.postfix(original(KEYS[0])))
    with open_mailbox(parse_bounce_url(dovecot.url)) as box:
        assert "folder 'INBOX' has 1 message(s)" in box.check()
    (flags,) = dovecot.flags()
    assert b"\\Seen" not in flags and b"DueflowProcessed" not in flags  # neither read nor marked
    with pytest.raises(MailboxError, match="has no folder 'Bounces'"), \
            open_mailbox(parse_bounce_url(dovecot.url.replace("/INBOX", "/Bounces"))) as box:
        box.check()
    # Last: after a refused login, Dovecot makes the next login from this address wait ~4 s.
    wrong = dovecot.url.replace("imap-s3cret-Pw", "wrong-pass")
    with pytest.raises(MailboxError) as refused, open_mailbox(parse_bounce_url(wrong)) as box:
        box.check()
    assert "refused the login of 'bounces'" in str(refused.value) and "wrong-pass" not in str(refused.value)


def test_a_processed_message_can_be_moved_instead(db_url, dovecot):
    sent_rows(db_url)
    client = dovecot.client()
    client.create_folder("Processed")
    client.logout()
    dovecot.deliver(br.gmail(original(KEYS[0])), br.not_a_bounce())
    config = parse_bounce_url(dovecot.url.replace("?", "?move_to=Processed&"))
    assert bounces.intake(db.Database(db_url), config).marked == [KEYS[0]]
    assert dovecot.flags() == [] and len(dovecot.flags("Processed")) == 2  # moved, not deleted


def test_the_connection_dropped_mid_fetch_loses_nothing_and_marks_nothing_twice(db_url, dovecot):
    sent_rows(db_url)
    mix = the_mix()
    dovecot.deliver(*mix.values())
    relay = CuttingRelay(dovecot.port, cut_after=300_000)  # inside the enormous report (3rd batch)
    relay.start()
    cut = dovecot.url.replace(f":{dovecot.port}/", f":{relay.port}/")
    database = db.Database(db_url)
    try:
        with pytest.raises(MailboxError, match="reading failed"):
            bounces.intake(database, parse_bounce_url(cut), batch=2)
    finally:
        relay.stop()
    assert relay.cuts == 1
    # The batches before the cut are committed and marked; the cut one is neither.
    marked = sum(b"DueflowProcessed" in f for f in dovecot.flags())
    assert marked == 4 and len(recorded(db_url)[0]) + len(recorded(db_url)[1]) == 4
    rerun = bounces.intake(database, parse_bounce_url(dovecot.url), batch=2)
    assert rerun.read == 6 and rerun.already_recorded == 0
    assert_the_mix_applied(db_url)
    assert all(b"DueflowProcessed" in f for f in dovecot.flags())


@pytest.mark.pg
def test_the_database_lost_mid_update_loses_nothing_and_a_rerun_finishes(pg_url, dovecot, tmp_path):
    """The intake's transaction is cut by the server (its session terminated while it waits
    for a lock another session holds): nothing is committed, no message is marked, and a
    rerun records everything once."""
    db.init_db(db.engine_for(pg_url))
    sent_rows(pg_url)
    dovecot.deliver(*the_mix().values())
    schema = pg_url.split("application_name=")[1]
    admin = create_engine(pg_url.split("?")[0], isolation_level="AUTOCOMMIT")
    holder = db.engine_for(pg_url).connect()
    holder.exec_driver_sql("BEGIN")
    holder.exec_driver_sql("LOCK TABLE dueflow_ledger IN EXCLUSIVE MODE")

    def cut_when_waiting() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with admin.connect() as conn:
                waiting = conn.execute(text(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = :name AND wait_event_type"
                    " = 'Lock' AND pid <> pg_backend_pid()"), {"name": schema}).scalars().all()
                if waiting:
                    conn.execute(text("SELECT pg_terminate_backend(p) FROM unnest(CAST(:p AS int[])) p"),
                                 {"p": waiting})
                    return
            time.sleep(0.05)

    cutter = threading.Thread(target=cut_when_waiting)
    cutter.start()
    database = db.Database(pg_url)
    with pytest.raises(Exception) as lost:
        bounces.intake(database, parse_bounce_url(dovecot.url), batch=100)
    cutter.join()
    holder.rollback()
    holder.close()
    admin.dispose()
    assert db_errors.transient(lost.value)
    assert recorded(pg_url) == ([], []) and {s for s, _ in ledger(pg_url).values()} == {"sent"}
    assert not any(b"DueflowProcessed" in f for f in dovecot.flags())
    db.engine_for(pg_url).dispose()
    rerun = bounces.intake(database, parse_bounce_url(dovecot.url))
    assert rerun.read == 10 and sorted(rerun.marked) == sorted(KEYS[:5])
    assert_the_mix_applied(pg_url)


def maildir_with(root: Path, messages: list[bytes]) -> Path:
    box = mailbox.Maildir(root, create=True)
    for raw in messages:
        box.add(raw)
    box.close()
    return root


def test_every_format_in_a_maildir_and_an_mbox(db_url, tmp_path):
    sent_rows(db_url)
    root = maildir_with(tmp_path / "Maildir", list(the_mix().values()))
    database = db.Database(db_url)
    summary = bounces.intake(database, parse_bounce_url(f"maildir://{root}"))
    assert summary.read == 10
    assert_the_mix_applied(db_url)
    assert all(p.name.endswith(":2,S") for p in (root / "cur").iterdir())
    assert not list((root / "new").iterdir())
    assert bounces.intake(database, parse_bounce_url(f"maildir://{root}")).read == 0

    box = mailbox.mbox(tmp_path / "bounces.mbox")
    for raw in (br.exim(original(KEYS[6])), br.not_a_bounce()):
        box.add(raw)
    box.close()
    first = bounces.intake(database, parse_bounce_url(f"mbox://{tmp_path / 'bounces.mbox'}"))
    assert (first.read, first.marked) == (2, [KEYS[6]])
    assert bounces.intake(database, parse_bounce_url(f"mbox://{tmp_path / 'bounces.mbox'}")).read == 0


# Reports that can arrive, in any order: hard and soft ones for the same rows, two hard
# ones of different dates for one row (the earliest's reason must win whatever the order).
START = datetime(2027, 1, 8, 6, 0, tzinfo=UTC)


def arrivals() -> list[bytes]:
    return [
        br.postfix(original(KEYS[0]), when=START + timedelta(hours=2)),
        br.gmail(original(KEYS[0]), when=START + timedelta(hours=1)),
        br.postfix(original(KEYS[1]), delayed=True, when=START),
        br.exim(original(KEYS[1]), when=START + timedelta(hours=5)),
        br.exchange(original(KEYS[2]), when=START + timedelta(hours=3)),
        br.postfix(original(KEYS[3]), delayed=True, when=START + timedelta(hours=4)),
        br.postfix(br.Original(message_id_for(KEYS[2], SENDER), KEYS[3]), when=START),
        br.not_a_bounce(when=START),
    ]


def state(url: str) -> tuple:
    return ledger(url), recorded(url)


@settings(max_examples=examples(12), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(order=st.permutations(range(len(arrivals()))),
       cuts=st.lists(st.integers(0, len(arrivals())), max_size=4),
       reruns=st.lists(st.booleans(), min_size=5, max_size=5),
       batch=st.integers(1, 4))
def test_any_runs_over_any_interleaving_equal_one_run_over_all(tmp_path_factory, order, cuts, reruns, batch):
    """The arrivals in any order, split into any number of deliveries, with an intake after
    each (sometimes two), leave the same ledger and records as one intake over them all."""
    reports = arrivals()
    work = tmp_path_factory.mktemp("prop")

    def fresh(name: str) -> str:
        url = f"sqlite:///{work / name}.db"
        db.init_db(db.engine_for(url))
        sent_rows(url)
        return url

    once = fresh("once")
    root_once = maildir_with(work / "once-mail", reports)
    bounces.intake(db.Database(once), parse_bounce_url(f"maildir://{root_once}"))

    many = fresh("many")
    root = maildir_with(work / "mail", [])
    box = mailbox.Maildir(root)
    bounds = sorted({0, *cuts, len(reports)})
    for n, (start, end) in enumerate(itertools.pairwise(bounds)):
        for i in order[start:end]:
            box.add(reports[i])
        for _ in range(2 if reruns[n % len(reruns)] else 1):
            bounces.intake(db.Database(many), parse_bounce_url(f"maildir://{root}"), batch=batch)
    assert state(many) == state(once)
    for url in (once, many):
        db.engine_for(url).dispose()


def test_dueflow_check_verifies_the_bounce_mailbox_without_a_secret(dovecot, tmp_path):
    from dueflow.tasks.check import run_checks

    dovecot.deliver(br.postfix(original(KEYS[0])))
    env = {"DUEFLOW_DATABASE_URL": f"sqlite:///{tmp_path / 'none.db'}", "DUEFLOW_MAIL_URL": f"file://{tmp_path}",
           "DUEFLOW_BOUNCE_URL": dovecot.url, "DUEFLOW_BOUNCE_ADDRESS": "bounces@dueflow.test"}
    lines = [c.line() for c in run_checks(env) if c.item == "bounce mailbox"]
    assert len(lines) == 1 and lines[0].startswith("ok") and "logged in as 'bounces'" in lines[0]
    assert "bounces come back to bounces@dueflow.test" in lines[0]
    (flags,) = dovecot.flags()
    assert b"\\Seen" not in flags and b"DueflowProcessed" not in flags
    # Last: after a refused login, Dovecot makes the next login from this address wait ~4 s.
    wrong = env | {"DUEFLOW_BOUNCE_URL": dovecot.url.replace("imap-s3cret-Pw", "Wr0ng-Secret")}
    text = "\n".join(c.line() for c in run_checks(wrong))
    assert "problem  bounce mailbox:" in text and "Wr0ng-Secret" not in text and "imap-s3cret-Pw" not in text


def test_a_batch_committed_but_not_marked_changes_nothing_when_read_again(db_url, tmp_path):
    """The run died between the commit and the mark: the next run reads the same messages."""
    sent_rows(db_url)
    root = maildir_with(tmp_path / "Maildir", list(the_mix().values()))
    config = parse_bounce_url(f"maildir://{root}")
    database = db.Database(db_url)
    with open_mailbox(config) as box:
        fetched = box.fetch(box.unprocessed())
    first = bounces.record(database, fetched)  # committed; the process dies before marking
    assert sorted(first.marked) == sorted(KEYS[:5]) and first.already == 0
    before = state(db_url)
    rerun = bounces.intake(database, config)
    assert (rerun.read, rerun.already_recorded, rerun.marked, len(rerun.kept)) == (10, 10, [], 0)
    assert state(db_url) == before
    assert_the_mix_applied(db_url)


def test_a_copys_late_bounce_stays_a_copys_after_retention_pruned_the_addresses(db_url, tmp_path):
    """issue 36, case 4: after `dueflow prune`, a report for the Cc or the archive Bcc marked
    the client's row bounced — the addresses it was compared with were gone. Prune keeps
    their digests (never the addresses): the copy's report is kept aside, the recipient's
    own report still marks the row."""
    keys = KEYS[:3]
    sent_rows(db_url, keys)
    with db.writing(db.engine_for(db_url)) as conn:
        conn.execute(text("UPDATE dueflow_ledger SET cc_recipient = 'Manager@Acme.example',"
                          " bcc_recipient = 'archive@corp.example'"))
    assert db.prune_bodies(db.engine_for(db_url), date(2027, 2, 1)) == 3
    with db.engine_for(db_url).connect() as conn:
        left = conn.execute(text("SELECT recipient, cc_recipient, bcc_recipient, copy_digests"
                                 " FROM dueflow_ledger")).all()
    assert all(r[:3] == (None, None, None) for r in left)
    assert all("acme" not in r[3].lower() and len(r[3].split()) == 2 for r in left)  # digests only

    def about(key: str, to: str) -> br.Original:
        return br.Original(message_id_for(key, SENDER), key, recipient=to)

    root = maildir_with(tmp_path / "Maildir", [
        br.postfix(about(keys[0], "manager@acme.example")),  # the Cc, another case
        br.exim(about(keys[1], "archive@corp.example")),  # the Bcc
        br.postfix(about(keys[2], original(keys[2]).recipient))])  # the recipient itself
    bounces.intake(db.Database(db_url), parse_bounce_url(f"maildir://{root}"))
    states = ledger(db_url)
    assert [states[k][0] for k in keys] == ["sent", "sent", "bounced"]
    hits, kept = recorded(db_url)
    assert [reason for _, reason in kept] == ["copy", "copy"] and [h[1] for h in hits] == [keys[2]]
