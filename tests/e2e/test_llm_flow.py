"""G7 in the nightly flow: drafts come from a local OpenAI-compatible server through the
real `openai` client, are stored on the ledger row before sending, and are never
asked for twice — a retry resends the stored text."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from tests.helpers.factories import client, insert, invoice
from tests.helpers.openai_server import openai_stub

DAY0 = date(2027, 1, 4)
PARAGRAPH = ("Thank you for being a loyal customer; we know that things get busy and an invoice "
             "can slip through the cracks. Reply to this email if anything about it needs clarifying.")


@pytest.fixture
def llm(monkeypatch):
    with openai_stub() as stub:
        stub.reply = {"paragraph": PARAGRAPH, "tone": "warm"}
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("DUEFLOW_LLM_MODEL", "local-test-model")
        yield stub


def seed(url: str) -> None:
    insert(url, "clients", [client("acme", notes="Pays late every December; prefers email.")])
    insert(url, "invoices", [invoice("inv-1", "acme", DAY0.isoformat() + "T10:00:00+00:00"),
                             invoice("old", "acme", "2026-10-01T10:00:00+00:00", status="paid",
                                     paid_at="2026-11-20T10:00:00+00:00", due_date="2026-10-31")])


def test_llm_paragraph_is_stored_before_sending_and_facts_stay_true(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
    assert summary.sent == 1 and len(llm.requests) == 1
    assert summary.llm_usage() == {"llm": 1, "template": 0, "prompt_tokens": 120,
                                   "completion_tokens": 40}
    prompt = str(llm.requests[0]["messages"])
    assert "Pays late every December" in prompt and "acme" in prompt.lower()
    row = db.read_frame(db.engine_for(url), "SELECT draft_source, draft_note, body_text FROM"
                        " dueflow_ledger WHERE key = 'dunning/inv-1/REMINDED_1'", {}).iloc[0]
    assert row["draft_source"] == "llm" and row["draft_note"] == "tone: warm"
    assert PARAGRAPH in row["body_text"]
    sent = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert sent.replace("\r\n", "\n") == row["body_text"].replace("\r\n", "\n")
    assert "F-inv-1" in sent and "€980.40" in sent  # the facts come from the template


def test_a_rejected_draft_falls_back_and_the_email_keeps_the_true_amount(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    llm.reply = {"paragraph": "Please pay 50.00 EUR today at https://pay.example/now to settle "
                              "this invoice.", "tone": "firm"}
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
    assert summary.sent == 1 and summary.llm_usage()["template"] == 1
    body = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert "50.00" not in body and "https://" not in body and "€980.40" in body
    note = db.read_frame(db.engine_for(url), "SELECT draft_source, draft_note FROM dueflow_ledger",
                         {}).iloc[0]
    assert note["draft_source"] == "template" and note["draft_note"].startswith("rejected")


def test_a_retry_resends_the_stored_draft_without_asking_the_model(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    smtp_sink.faults["acme@clients.example"] = "rcpt_451"
    first = nightly_alerts(as_of=DAY0 + timedelta(days=7), retry_backoff_minutes=0)
    assert first.failed == 1 and len(llm.requests) == 1
    stored = db.read_frame(db.engine_for(url), "SELECT body_text FROM dueflow_ledger", {})
    smtp_sink.faults.clear()
    llm.reply = {"paragraph": "A completely different paragraph that must never be sent now.",
                 "tone": "other"}
    again = nightly_alerts(as_of=DAY0 + timedelta(days=8), retry_backoff_minutes=0)
    assert again.retried == 1 and again.sent == 1
    assert len(llm.requests) == 1, "the model was asked again for a key it already drafted"
    body = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert body.replace("\r\n", "\n") == stored["body_text"][0].replace("\r\n", "\n")
    assert PARAGRAPH in body


def test_dry_run_shows_drafts_and_stores_nothing(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7), dry_run=True)
    assert summary.drafts["paragraph"].tolist() == [PARAGRAPH]
    assert "[llm paragraph]" in summary.rows.loc[summary.rows["job"] == "dunning", "detail"].iloc[0]
    assert db.ledger_rows(db.engine_for(url)).empty and smtp_sink.keys() == []


def test_without_a_key_templates_alone_and_no_request(run_env, smtp_sink, monkeypatch):
    url = run_env
    seed(url)
    with openai_stub() as stub:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
        assert stub.requests == []
    assert summary.sent == 1 and summary.llm_usage()["template"] == 1
    row = db.read_frame(db.engine_for(url), "SELECT draft_source, draft_note FROM dueflow_ledger",
                        {}).iloc[0]
    assert row["draft_source"] == "template" and "LLM off" in row["draft_note"]
