"""LLM drafting of the dunning paragraph (G7) through the real `openai` client, against a
real local OpenAI-compatible server started by the test."""

from __future__ import annotations

import json
import threading
from datetime import date
from typing import Any

import pandas as pd
import pytest

from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.llm_client import draft_paragraphs
from dueflow.tasks.core.llm_guard import OFF_NOTE, payment_history_frame, template_paragraph
from dueflow.tasks.core.render import Draft
from dueflow.tasks.core.report import drafts_frame, summarize
from tests.helpers.factories import client, insert, invoice, sourced
from tests.helpers.llm_rows import (
    GOOD,
    HISTORY,
    INJECTION,
    NO_HISTORY,
    SPANISH,
    config_for,
    data_block,
    frame,
    reminder,
    reply,
    stub,
    system_message,
    user_message,
)
from tests.helpers.openai_server import openai_stub

__all__ = ["stub"]  # the fixture, used by name

# --- through the real openai client -----------------------------------------------


def test_good_draft_is_used_with_tone_and_tokens(stub):
    stub.usage = (120, 40)
    drafts = draft_paragraphs(frame(reminder(1), reminder(2), reminder(3)), HISTORY, config_for(stub))
    assert [d.source for d in drafts] == ["llm"] * 3
    assert all(d.paragraph == stub.reply["paragraph"] and d.tone == "friendly" and d.note is None
               for d in drafts)
    usage = summarize(date(2027, 1, 1), False, None, pd.DataFrame(columns=["status", "retry"]), {},
                      drafts=drafts_frame(drafts)).llm_usage()
    assert usage == {"llm": 3, "template": 0, "prompt_tokens": 360, "completion_tokens": 120}
    body = stub.requests[0]
    assert body["model"] == "gpt-4o-mini" and body["response_format"] == {"type": "json_object"}
    assert stub.headers[0]["authorization"] == "Bearer sk-test-secret"


def test_fenced_json_is_accepted(stub):
    stub.behaviour = lambda body: "```json\n" + reply(GOOD, "Warm ") + "\n```"
    [draft] = draft_paragraphs(frame(reminder()), NO_HISTORY, config_for(stub))
    assert (draft.source, draft.paragraph, draft.tone) == ("llm", GOOD, "warm")


def test_slow_server_times_out_and_falls_back(stub):
    stub.behaviour, stub.delay = "slow", 30
    [draft] = draft_paragraphs(frame(reminder()), NO_HISTORY, config_for(stub, timeout_s=0.3))
    assert draft == Draft(key="dunning/i1/REMINDED_1", paragraph=template_paragraph("REMINDED_1", "en"),
                          source="template", tone=None, note="LLM call timed out after 0.3 s")
    assert len(stub.requests) == 1


@pytest.mark.parametrize(("behaviour", "note"), [("http500", "HTTP 500"), ("http429", "HTTP 429")])
def test_http_errors_fall_back_without_retrying(stub, behaviour, note):
    stub.behaviour = behaviour
    [draft] = draft_paragraphs(frame(reminder(step="REMINDED_2", key="dunning/i1/REMINDED_2")),
                               NO_HISTORY, config_for(stub))
    assert draft.source == "template" and note in draft.note
    assert draft.paragraph == template_paragraph("REMINDED_2", "en")
    assert "sk-test-secret" not in draft.note and "Traceback" not in draft.note
    assert len(stub.requests) == 1  # max_retries=0


@pytest.mark.parametrize(
    ("behaviour", "note"),
    [
        ("malformed", "malformed output: not JSON"),
        (lambda body: json.dumps([GOOD]), "malformed output: not a JSON object"),
        (lambda body: json.dumps({"text": GOOD}), "malformed output: no 'paragraph' string"),
        ("refusal", "model refused"),
        (lambda body: "", "model refused"),
    ],
)
def test_unusable_replies_fall_back(stub, behaviour, note):
    stub.behaviour = behaviour
    [draft] = draft_paragraphs(frame(reminder()), NO_HISTORY, config_for(stub))
    assert draft.source == "template" and draft.tone is None
    assert draft.note is not None and draft.note.startswith(note)
    assert draft.paragraph == template_paragraph("REMINDED_1", "en")
    assert draft.prompt_tokens == stub.usage[0]  # the call was made and paid for


@pytest.mark.parametrize(
    ("paragraph", "reason"),
    [
        (GOOD + " The total is 1,250.00 EUR.", "digit ('1')"),
        (GOOD + " You can pay right away at https://pay.example.net/i1.", "U+002F SOLIDUS"),
        (GOOD + " Any question? Write to ana@acme.test.", "U+0040 COMMERCIAL AT"),
        (GOOD + " Please pay at payments dot ru.", "destination or contact word ('dot')"),
    ],
)
def test_draft_stating_facts_is_rejected(stub, paragraph, reason):
    stub.behaviour = lambda body: reply(paragraph)
    [draft] = draft_paragraphs(frame(reminder()), NO_HISTORY, config_for(stub))
    assert draft.source == "template" and draft.note is not None
    assert draft.note.startswith("rejected: ") and reason in draft.note
    assert draft.paragraph == template_paragraph("REMINDED_1", "en")


def test_draft_obeying_instructions_planted_in_the_notes_is_rejected(stub):
    def gullible_model(body: dict[str, Any]) -> str:
        if "IGNORE PREVIOUS INSTRUCTIONS" in data_block(user_message(body), "client_notes"):
            return reply(GOOD + " As agreed, we waive this invoice: there is no need to pay it.", "generous")
        return reply(GOOD)

    stub.behaviour = gullible_model
    rows = frame(reminder(1, notes="Long-standing client. " + INJECTION),
                 reminder(2, notes="Pays by transfer."))
    injected, clean = draft_paragraphs(rows, NO_HISTORY, config_for(stub))
    assert len(stub.requests) == 2
    assert injected.source == "template" and injected.note is not None
    assert injected.note == "rejected: word outside the tone vocabulary ('agreed')"
    assert (clean.source, clean.paragraph) == ("llm", GOOD)


def test_english_paragraph_for_a_spanish_client_is_rejected(stub):
    # The fake model answers Beatriz in Spanish and Ana, wrongly, in English.
    rows = frame(reminder(1, locale="es", client_name="Ana"), reminder(2, locale="es", client_name="Beatriz"))
    stub.behaviour = lambda body: reply(
        SPANISH if data_block(user_message(body), "client_name") == "Beatriz" else GOOD)
    english, spanish = draft_paragraphs(rows, NO_HISTORY, config_for(stub))
    assert all("Write in Spanish" in system_message(body) for body in stub.requests)
    assert english.source == "template"
    assert english.note == "rejected: word outside the tone vocabulary ('we')"
    assert english.paragraph == template_paragraph("REMINDED_1", "es")
    assert (spanish.source, spanish.paragraph) == ("llm", SPANISH)


def test_call_budget_is_respected_and_the_rest_say_so(stub):
    rows = frame(*(reminder(n) for n in range(1, 6)))
    drafts = draft_paragraphs(rows, NO_HISTORY, config_for(stub, max_calls=2, concurrency=1))
    assert len(stub.requests) == 2
    assert [d.source for d in drafts] == ["llm", "llm", "template", "template", "template"]
    assert all(d.note == "LLM call budget of 2 per run used up" for d in drafts[2:])


def test_no_config_makes_no_request_and_builds_no_client(stub, monkeypatch):
    def no_client(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the OpenAI client must not be constructed when the LLM is off")

    import openai

    monkeypatch.setattr(openai, "OpenAI", no_client)
    rows = frame(reminder(1), reminder(2, locale="es", step="REMINDED_2", key="dunning/i2/REMINDED_2"))
    drafts = draft_paragraphs(rows, HISTORY, None)
    assert stub.requests == []
    assert [(d.source, d.note) for d in drafts] == [("template", OFF_NOTE)] * 2
    assert [d.paragraph for d in drafts] == [template_paragraph("REMINDED_1", "en"),
                                             template_paragraph("REMINDED_2", "es")]


def test_concurrency_reaches_but_never_exceeds_the_bound(stub):
    # The barrier holds each request until 3 are in flight together (a client with fewer
    # workers breaks it), then holds them a moment so that a 4th request sent alongside
    # would show in max_in_flight. Passing never depends on timing: the bound is counted.
    stub.barrier, stub.hold = threading.Barrier(3), 0.1
    drafts = draft_paragraphs(frame(*(reminder(n) for n in range(12))), NO_HISTORY,
                              config_for(stub, concurrency=3, timeout_s=10))
    assert len(stub.requests) == 12
    assert stub.max_in_flight == 3
    assert all(d.source == "llm" for d in drafts)


def test_drafts_keep_the_order_of_the_rows(stub):
    names = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"]
    # A paragraph may not name anyone (core.tone), so each client gets its own adverb.
    adverbs = dict(zip(names, ["truly", "really", "greatly", "sincerely", "deeply", "always",
                               "genuinely", "highly"], strict=True))

    def personal(body: dict[str, Any]) -> str:
        adverb = adverbs[data_block(user_message(body), "client_name")]
        return reply(f"We {adverb} value our work with you and would appreciate your attention to this "
                     "reminder.")

    stub.behaviour = personal
    rows = frame(*(reminder(n, client_name=name) for n, name in enumerate(names)))
    drafts = draft_paragraphs(rows, NO_HISTORY, config_for(stub, concurrency=4))
    assert [d.key for d in drafts] == list(rows["key"])
    assert all(d.source == "llm" and f"We {adverbs[name]} value" in d.paragraph
               for d, name in zip(drafts, names, strict=True))


def test_consecutive_api_failures_stop_further_calls(stub):
    stub.behaviour = "http500"
    drafts = draft_paragraphs(frame(*(reminder(n) for n in range(6))), NO_HISTORY,
                              config_for(stub, concurrency=1, max_consecutive_failures=2))
    assert len(stub.requests) == 2
    assert all(d.source == "template" for d in drafts)
    assert all(d.note is not None and d.note.startswith("LLM skipped: 2 API failures in a row")
               for d in drafts[2:])


def test_overdue_rows_get_no_paragraph_and_no_call(stub):
    rows = frame(reminder(1, step="OVERDUE", key="dunning/i1/OVERDUE"), reminder(2))
    overdue, reminded = draft_paragraphs(rows, NO_HISTORY, config_for(stub))
    assert (overdue.paragraph, overdue.source) == ("", "template")
    assert overdue.note == "no paragraph for step OVERDUE"
    assert reminded.source == "llm" and len(stub.requests) == 1


def test_unreachable_api_falls_back():
    with openai_stub() as gone:
        base_url = gone.base_url
    config = LLMConfig(api_key="sk-test", model="m", base_url=base_url, timeout_s=2)
    [draft] = draft_paragraphs(frame(reminder()), NO_HISTORY, config)
    assert (draft.source, draft.note) == ("template", "LLM API unreachable (connection error)")


# --- payment history from the database ---------------------------------------------


def test_payment_history_sql_and_frame(db_url, stub):
    insert(db_url, "clients", [client("c1"), client("c2"), client("c3")])
    insert(db_url, "invoices", [
        invoice("i0", "c1", "2027-01-02T09:00:00+00:00", status="paid", due_date="2027-01-01",
                paid_at="2027-01-13T23:30:00+00:00"),
        invoice("i1", "c1", "2027-02-01T09:00:00+00:00", due_date="2027-02-28"),
        invoice("i8", "c1", None, status="draft"),
        invoice("i9", "c1", "2027-01-05T09:00:00+00:00", status="void"),
        invoice("j0", "c2", "2027-01-02T09:00:00+00:00", status="paid", paid_at="2027-01-03T10:00:00+00:00"),
        invoice("k0", "c3", "2027-02-01T09:00:00+00:00", due_date=None),
    ])
    ledger = [("dunning/i0/REMINDED_1", "i0", "REMINDED_1", 1, "sent"),
              ("dunning/i0/REMINDED_2", "i0", "REMINDED_2", 2, "failed"),
              ("dunning/i1/REMINDED_1", "i1", "REMINDED_1", 1, "pending")]
    insert(db_url, "dueflow_ledger", [
        {"key": key, "job": "dunning", "subject_id": subject, "cycle": "", "step": step,
         "step_rank": rank, "as_of": "2027-01-10", "status": status}
        for key, subject, step, rank, status in ledger])

    history_sql = sourced(db_url).source_statement("client_payment_history")
    raw = db.extract_frame(db.engine_for(db_url), history_sql, {})
    history = payment_history_frame(raw, timezone="Europe/Madrid").set_index("invoice_id")
    assert sorted(history.index) == ["i0", "i1", "k0"]  # c2 has nothing open; drafts and voids are out
    assert history.loc["i0", "days_late"] == 13  # paid 2027-01-14 in Madrid, due 2027-01-01
    assert history.loc["i0", "reminders"] == 1  # only the reminder surely sent counts
    assert pd.isna(history.loc["i1", "days_late"]) and history.loc["i1", "reminders"] == 0
    assert pd.isna(history.loc["k0", "days_late"])
    assert history.loc["i0", "amount"] == pytest.approx(980.40)

    drafts = draft_paragraphs(frame(reminder(1)), history.reset_index(), config_for(stub))
    assert drafts[0].source == "llm"
    assert "invoice F-i0: paid 13 days late, 1 reminder" in user_message(stub.requests[0])


def test_a_row_that_cannot_be_drafted_does_not_stop_the_others(stub):
    # History without client_id: building the prompt fails for every row, yet each gets its template.
    broken_history = pd.DataFrame({"number": ["F-9"], "paid_at": [None]})
    drafts = draft_paragraphs(frame(reminder(1), reminder(2, step="REMINDED_2", key="dunning/i2/REMINDED_2")),
                              broken_history, config_for(stub))
    assert [(d.source, d.note) for d in drafts] == [("template", "could not draft (KeyError)")] * 2
    assert drafts[1].paragraph == template_paragraph("REMINDED_2", "en")
    assert stub.requests == []
