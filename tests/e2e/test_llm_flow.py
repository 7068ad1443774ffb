"""G7 in the nightly flow: a reminder's tone plan comes from a local OpenAI-compatible
server through the real `openai` client, or from dueflow's rule; the plan and the
paragraph it renders are stored on the ledger row before sending, the model is never
asked twice for a key — a retry resends the stored paragraph —, and free text an earlier
release let a model write is never sent again."""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
from sqlalchemy import text

from dueflow.flows.nightly_alerts import nightly_alerts
from dueflow.tasks.adapters import db
from dueflow.tasks.core.phrasebook import default_phrasebook
from dueflow.tasks.core.tone import read_plan
from tests.helpers.factories import client, insert, invoice
from tests.helpers.openai_server import openai_stub

DAY0 = date(2027, 1, 4)
BOOK = default_phrasebook()
PLAN = {
    "tone": "appreciative",
    "sentences": ["open.any.moment", "body.appreciative.trust", "close.thanks.help"],
}
PARAGRAPH = (
    "Thank you for taking a moment to read this message. We are grateful for your trust and for your"
    " attention to this reminder. We appreciate your help with this."
)
FREE_TEXT = "Thank you for your payment, there is nothing more to do."


@pytest.fixture
def llm(monkeypatch):
    with openai_stub() as stub:
        stub.reply = PLAN
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        monkeypatch.setenv("DUEFLOW_LLM_MODEL", "local-test-model")
        yield stub


def seed(url: str) -> None:
    insert(url, "clients", [client("acme", notes="Pays late every December; prefers email.")])
    insert(
        url,
        "invoices",
        [
            invoice("inv-1", "acme", DAY0.isoformat() + "T10:00:00+00:00"),
            invoice(
                "old",
                "acme",
                "2026-10-01T10:00:00+00:00",
                status="paid",
                paid_at="2026-11-20T10:00:00+00:00",
                due_date="2026-10-31",
            ),
        ],
    )


def ledger(url: str) -> dict:
    return (
        db.read_frame(
            db.engine_for(url),
            "SELECT draft_source, draft_note, paragraph, tone_plan,"
            " refused_answer, body_text, body_html FROM dueflow_ledger"
            " WHERE key = 'dunning/inv-1/REMINDED_1'",
            {},
        )
        .iloc[0]
        .to_dict()
    )


def test_the_models_plan_is_stored_before_sending_and_the_facts_stay_true(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
    assert summary.sent == 1 and len(llm.requests) == 1
    assert summary.paragraph_sources() == {
        "model": 1,
        "rule": 0,
        "template": 0,
        "prompt_tokens": 120,
        "completion_tokens": 40,
    }
    prompt = str(llm.requests[0]["messages"])
    assert "Pays late every December" in prompt and "invoice F-old: paid 20 days late" in prompt
    row = ledger(url)
    assert (row["draft_source"], row["draft_note"], row["paragraph"]) == ("model", None, PARAGRAPH)
    assert json.loads(row["tone_plan"]) == PLAN | {"client": "lately_late"}
    assert PARAGRAPH in row["body_text"] and row["refused_answer"] is None
    sent = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert sent.replace("\r\n", "\n") == row["body_text"].replace("\r\n", "\n")
    assert "F-inv-1" in sent and "€980.40" in sent  # the facts come from the template


def test_a_refused_answer_gives_the_rules_plan_and_is_kept_with_its_reason(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    llm.behaviour = lambda body: json.dumps(
        {"paragraph": "Please pay 50.00 EUR today at https://pay.example/now.", "tone": "firm"}
    )
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
    assert summary.sent == 1 and summary.paragraph_sources()["rule"] == 1
    assert summary.fallbacks() == [("the answer lacks a field", 1)]
    body = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert "50.00" not in body and "https://" not in body and "€980.40" in body
    row = ledger(url)
    assert (
        row["draft_source"] == "rule"
        and row["draft_note"] == "model answer refused: the answer lacks a field (sentences)"
    )
    assert "pay.example" in row["refused_answer"]
    plan = read_plan(row["tone_plan"])
    assert (
        plan is not None and row["paragraph"] == BOOK.text("en", plan.sentences) and row["paragraph"] in body
    )


def test_a_retry_resends_the_stored_paragraph_without_asking_the_model(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    smtp_sink.faults["acme@clients.example"] = "rcpt_451"
    first = nightly_alerts(as_of=DAY0 + timedelta(days=7), retry_backoff_minutes=0)
    assert first.failed == 1 and len(llm.requests) == 1
    stored = ledger(url)
    smtp_sink.faults.clear()
    llm.reply = {"tone": "neutral", "sentences": ["body.neutral.remind"]}
    again = nightly_alerts(as_of=DAY0 + timedelta(days=8), retry_backoff_minutes=0)
    assert again.retried == 1 and again.sent == 1
    assert len(llm.requests) == 1, "the model was asked again for a key it already planned"
    body = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert body.replace("\r\n", "\n") == stored["body_text"].replace("\r\n", "\n")
    assert PARAGRAPH in body and ledger(url)["tone_plan"] == stored["tone_plan"]


def test_free_text_an_earlier_release_stored_is_never_sent_again(run_env, smtp_sink, monkeypatch):
    """A failed row whose paragraph a model wrote (draft_source 'llm', before issue 35) is
    retried with a plan of reviewed sentences, and says why."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = run_env
    seed(url)
    smtp_sink.faults["acme@clients.example"] = "rcpt_451"
    nightly_alerts(as_of=DAY0 + timedelta(days=7), retry_backoff_minutes=0)
    with db.engine_for(url).begin() as conn:  # what an earlier release stored
        conn.execute(
            text(
                "UPDATE dueflow_ledger SET draft_source = 'llm', draft_note = 'tone: warm',"
                " tone_plan = NULL, paragraph = :free, body_text = :free"
            ),
            {"free": FREE_TEXT},
        )
    smtp_sink.faults.clear()
    again = nightly_alerts(as_of=DAY0 + timedelta(days=8), retry_backoff_minutes=0)
    assert again.retried == 1 and again.sent == 1
    body = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert FREE_TEXT not in body
    row = ledger(url)
    assert row["draft_source"] == "rule" and row["draft_note"].startswith("free text of an earlier release")
    assert read_plan(row["tone_plan"]) is not None and row["paragraph"] in body


def test_dry_run_shows_the_plans_and_stores_nothing(run_env, smtp_sink, llm):
    url = run_env
    seed(url)
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7), dry_run=True)
    assert summary.drafts["paragraph"].tolist() == [PARAGRAPH]
    assert summary.drafts["sentences"].tolist() == [" ".join(PLAN["sentences"])]
    assert "[model paragraph]" in summary.rows.loc[summary.rows["job"] == "dunning", "detail"].iloc[0]
    assert db.ledger_rows(db.engine_for(url)).empty and smtp_sink.keys() == []


def test_without_a_key_the_rule_plans_and_no_request_is_made(run_env, smtp_sink, monkeypatch):
    url = run_env
    seed(url)
    with openai_stub() as stub:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
        summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
        assert stub.requests == []
    assert summary.sent == 1 and summary.paragraph_sources()["rule"] == 1
    assert summary.fallbacks() == [("no model configured", 1)]
    row = ledger(url)
    assert row["draft_source"] == "rule" and row["draft_note"] == "no model configured"
    plan = read_plan(row["tone_plan"])
    # acme paid its one earlier invoice late: lately late, a neutral first reminder.
    assert plan is not None and plan.tone.value == "neutral"
    assert json.loads(row["tone_plan"])["client"] == "lately_late" and row["paragraph"] in row["body_text"]


def own_phrasebook(tmp_path) -> tuple[str, set[str]]:
    """A company's phrasebook that replaces dueflow's English: one body per step and tone."""
    from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, STEP_TONES

    texts = {}
    for step in DRAFTED_STEPS:
        for tone in STEP_TONES[step]:
            texts[f"acme.{step.lower()}.{tone.value}"] = (
                f"Acme accounts writes to you, {tone.value}, {'once' if step == 'REMINDED_1' else 'twice'}.")
    own = tmp_path / "acme-phrasebook.toml"
    own.write_text('mode = "replace"\n' + "".join(
        f'[[sentence]]\nid = "{key}"\nlocale = "en"\nslot = "body"\ntones = ["{key.split(".")[2]}"]\n'
        f'steps = ["{key.split(".")[1].upper()}"]\ntext = "{words}"\n' for key, words in texts.items()),
        encoding="utf-8")
    return str(own), set(texts.values())


def test_a_companys_own_phrasebook_is_what_the_model_is_offered_and_the_email_says(
        run_env, smtp_sink, llm, monkeypatch, tmp_path):
    url = run_env
    seed(url)
    path, texts = own_phrasebook(tmp_path)
    monkeypatch.setenv("DUEFLOW_PHRASEBOOK_FILE", path)
    llm.reply = {"tone": "appreciative", "sentences": ["acme.reminded_1.appreciative"]}
    summary = nightly_alerts(as_of=DAY0 + timedelta(days=7))
    assert summary.sent == 1
    prompt = str(llm.requests[0]["messages"])
    assert "Acme accounts writes to you" in prompt and "open.any.moment" not in prompt
    row = ledger(url)
    assert row["draft_source"] == "model"
    assert row["paragraph"] == "Acme accounts writes to you, appreciative, once."
    assert row["paragraph"] in texts
    sent = smtp_sink.by_key()["dunning/inv-1/REMINDED_1"].get_body(("plain",)).get_content()
    assert row["paragraph"] in sent
