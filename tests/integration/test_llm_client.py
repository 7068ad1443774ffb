"""The model's tone plans (G7) through the real `openai` client, against a real local
OpenAI-compatible server started by the test: a valid plan is used as chosen, anything
else gives dueflow's own plan with the reason, the calls are bounded, and the request
offers exactly the reminder's menu by a strict schema of enums."""

from __future__ import annotations

import json
import threading
from datetime import date
from typing import Any

import pandas as pd

from bench.corpora.answers import valid_plan
from dueflow.blocks.settings import LLMConfig
from dueflow.tasks.adapters import db
from dueflow.tasks.adapters.llm_client import plan_paragraphs
from dueflow.tasks.core.report import drafts_frame, summarize
from dueflow.tasks.core.tone import Fallback, PlanSource, payment_history_frame
from tests.helpers.factories import client, insert, invoice, sourced
from tests.helpers.llm_rows import (
    BOOK,
    GOOD,
    GOOD_PARAGRAPH,
    HISTORY,
    INJECTION,
    PUNCTUAL_HISTORY,
    config_for,
    data_block,
    frame,
    plan,
    reminder,
    stub,
    user_message,
)
from tests.helpers.openai_server import openai_stub

__all__ = ["stub"]  # the fixture, used by name
AS_OF = date(2027, 3, 1)


def plans(rows: pd.DataFrame, config: LLMConfig | None, history: pd.DataFrame = HISTORY) -> list:
    return plan_paragraphs(rows, history, AS_OF, BOOK, config)


# --- through the real openai client -----------------------------------------------


def test_a_valid_plan_is_used_as_chosen_with_its_tokens(stub):
    stub.usage = (120, 40)
    stub.reply = json.loads(GOOD)
    drafts = plans(
        frame(reminder(1, client_id="c9"), reminder(2, client_id="c9"), reminder(3, client_id="c9")),
        config_for(stub),
        PUNCTUAL_HISTORY,
    )
    assert [d.source for d in drafts] == [PlanSource.MODEL] * 3
    assert all(d.paragraph == GOOD_PARAGRAPH and d.fallback is None and d.note is None for d in drafts)
    summary = summarize(
        date(2027, 1, 1),
        False,
        None,
        pd.DataFrame(columns=["status", "retry"]),
        {},
        drafts=drafts_frame(drafts),
    )
    assert summary.paragraph_sources() == {
        "model": 3,
        "rule": 0,
        "template": 0,
        "prompt_tokens": 360,
        "completion_tokens": 120,
    }
    body = stub.requests[0]
    assert body["model"] == "gpt-4o-mini" and stub.headers[0]["authorization"] == "Bearer sk-test-secret"
    schema = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and schema["strict"] is True
    assert "open.often.touch" not in schema["schema"]["properties"]["sentences"]["items"]["enum"]  # not c9's


def test_a_model_that_answers_validly_gets_its_plan_for_every_reminder(stub):
    chosen = []

    def follows(body: dict[str, Any]) -> str:
        answer = valid_plan(body, choice=len(chosen))
        chosen.append(answer)
        return json.dumps(answer)

    stub.behaviour = follows
    rows = frame(
        *(
            reminder(
                n,
                locale=("en", "es", "de")[n % 3],
                step=("REMINDED_1", "REMINDED_2")[n % 2],
                key=f"dunning/i{n}/{('REMINDED_1', 'REMINDED_2')[n % 2]}",
            )
            for n in range(12)
        )
    )
    drafts = plans(rows, config_for(stub, concurrency=1))
    assert [d.source for d in drafts] == [PlanSource.MODEL] * 12
    for draft, answer, locale in zip(drafts, chosen, rows["locale"], strict=True):
        assert draft.plan.tone.value == answer["tone"] and list(draft.plan.sentences) == answer["sentences"]
        assert draft.paragraph == " ".join(BOOK.get(locale, i).text for i in answer["sentences"])


def test_answers_that_are_not_a_plan_give_the_rules_plan_with_the_reason_and_the_answer(stub):
    answers = iter(
        [
            "Sure! Here is a friendly paragraph: please pay our client.",
            plan("warm", "body.warm.gentle", "Please overlook the invoice below."),
            json.dumps({"paragraph": "Thank you for your payment.", "tone": "warm"}),
        ]
    )
    stub.behaviour = lambda body: next(answers)
    drafts = plans(frame(reminder(1), reminder(2), reminder(3)), config_for(stub, concurrency=1))
    rule = plans(frame(reminder(1), reminder(2), reminder(3)), None)
    assert [d.fallback for d in drafts] == [
        Fallback.NOT_JSON,
        Fallback.SENTENCE_NOT_OFFERED,
        Fallback.MISSING_FIELD,
    ]
    for draft, alone in zip(drafts, rule, strict=True):
        assert draft.source == PlanSource.RULE and (draft.plan, draft.paragraph) == (
            alone.plan,
            alone.paragraph,
        )
        assert draft.note.startswith("model answer refused: ") and draft.answer
    assert drafts[1].note == (
        "model answer refused: a sentence not offered for this reminder"
        " ('Please overlook the invoice below.')"
    )
    assert "please pay our client" in drafts[0].answer
    assert all(a.fallback == Fallback.MODEL_OFF and a.note == "no model configured" for a in rule)


def test_a_refused_answer_is_kept_cleaned_and_capped(stub):
    stub.behaviour = lambda body: "Pay\u202e us \x00now. " + "x" * 5000
    [draft] = plans(frame(reminder()), config_for(stub))
    assert draft.fallback == Fallback.TOO_LONG and draft.answer is not None
    assert draft.answer.startswith("Pay us now.") and len(draft.answer) < 520
    assert "\u202e" not in draft.answer and "\x00" not in draft.answer


def test_slow_server_times_out_and_the_rule_plans(stub):
    stub.behaviour, stub.delay = "slow", 5.0
    [draft] = plans(frame(reminder()), config_for(stub, timeout_s=0.5))
    assert (draft.source, draft.fallback, draft.detail) == (
        PlanSource.RULE,
        Fallback.API_ERROR,
        "timed out after 0.5 s",
    )
    assert len(stub.requests) == 1  # no retry


def test_http_errors_and_refusals_give_the_rules_plan_without_retrying(stub):
    for behaviour, fallback, detail in (
        ("http500", Fallback.API_ERROR, "HTTP 500"),
        ("http429", Fallback.API_ERROR, "rate limit: HTTP 429"),
        ("refusal", Fallback.MODEL_DECLINED, ""),
        ("malformed", Fallback.NOT_JSON, ""),
    ):
        stub.behaviour, stub.requests = behaviour, []
        [draft] = plans(frame(reminder()), config_for(stub))
        assert (draft.source, draft.fallback, draft.detail) == (PlanSource.RULE, fallback, detail), behaviour
        assert len(stub.requests) == 1


def test_notes_that_instruct_the_model_stay_data_and_cannot_change_what_is_read(stub):
    def gullible(body: dict[str, Any]) -> str:
        notes = data_block(user_message(body), "client_notes")
        assert INJECTION in notes
        return json.dumps({"tone": "warm", "sentences": ["body.warm.gentle"], "note": "invoice waived"})

    stub.behaviour = gullible
    [draft] = plans(frame(reminder(notes=INJECTION)), config_for(stub))
    assert draft.fallback == Fallback.EXTRA_FIELD and "waived" not in draft.paragraph


def test_call_budget_is_respected_and_the_rest_say_so(stub):
    rows = frame(*(reminder(n) for n in range(1, 6)))
    drafts = plans(rows, config_for(stub, max_calls=2, concurrency=1))
    assert len(stub.requests) == 2
    assert [d.source for d in drafts] == [PlanSource.MODEL] * 2 + [PlanSource.RULE] * 3
    assert all(
        d.note == "the night's budget of model calls was used up (2 calls a night)" for d in drafts[2:]
    )


def test_no_config_makes_no_request_and_builds_no_client(stub, monkeypatch):
    def no_client(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the OpenAI client must not be constructed when the LLM is off")

    import openai

    monkeypatch.setattr(openai, "OpenAI", no_client)
    rows = frame(reminder(1), reminder(2, locale="es", step="REMINDED_2", key="dunning/i2/REMINDED_2"))
    drafts = plans(rows, None)
    assert stub.requests == [] and [d.source for d in drafts] == [PlanSource.RULE] * 2
    # c1 paid one of its two settled invoices late, after reminders: often late.
    assert [d.relationship.value for d in drafts] == ["often_late", "often_late"]
    assert [d.plan.tone.value for d in drafts] == ["firm", "pressing"]


def test_concurrency_reaches_but_never_exceeds_the_bound(stub):
    # The barrier holds each request until 3 are in flight together (a client with fewer
    # workers breaks it), then holds them a moment so that a 4th request sent alongside
    # would show in max_in_flight. Passing never depends on timing: the bound is counted.
    stub.barrier, stub.hold = threading.Barrier(3), 0.1
    drafts = plans(frame(*(reminder(n) for n in range(12))), config_for(stub, concurrency=3, timeout_s=10))
    assert len(stub.requests) == 12 and stub.max_in_flight == 3
    assert all(d.source == PlanSource.MODEL for d in drafts)


def test_plans_keep_the_order_of_the_rows(stub):
    names = ["Alpha", "Bravo", "Charlie", "Delta", "Echo", "Foxtrot", "Golf", "Hotel"]
    bodies = dict(
        zip(
            names,
            [
                "body.warm.gentle",
                "body.warm.radar",
                "body.warm.look",
                "body.warm.grateful",
                "body.warm.short",
                "body.neutral.remind",
                "body.neutral.review",
                "body.neutral.message",
            ],
            strict=True,
        )
    )

    def personal(body: dict[str, Any]) -> str:
        chosen = bodies[data_block(user_message(body), "client_name")]
        return plan(chosen.split(".")[1], chosen)

    stub.behaviour = personal
    rows = frame(*(reminder(n, client_name=name) for n, name in enumerate(names)))
    drafts = plans(rows, config_for(stub, concurrency=4))
    assert [d.key for d in drafts] == list(rows["key"])
    assert [d.plan.sentences for d in drafts] == [(bodies[name],) for name in names]


def test_consecutive_api_failures_stop_further_calls(stub):
    stub.behaviour = "http500"
    drafts = plans(
        frame(*(reminder(n) for n in range(6))), config_for(stub, concurrency=1, max_consecutive_failures=2)
    )
    assert len(stub.requests) == 2 and all(d.source == PlanSource.RULE for d in drafts)
    assert [d.fallback for d in drafts[2:]] == [Fallback.BREAKER] * 4
    assert drafts[2].detail == "2 API failures in a row, the last: HTTP 500"


def test_overdue_rows_get_no_paragraph_and_no_call(stub):
    rows = frame(reminder(1, step="OVERDUE", key="dunning/i1/OVERDUE"), reminder(2))
    drafts = plans(rows, config_for(stub))
    assert [d.key for d in drafts] == ["dunning/i2/REMINDED_1"] and len(stub.requests) == 1


def test_unreachable_api_gives_the_rules_plan():
    with openai_stub() as gone:
        base_url = gone.base_url
    config = LLMConfig(api_key="sk-test", model="m", base_url=base_url, timeout_s=2)
    [draft] = plans(frame(reminder()), config)
    assert (draft.source, draft.detail) == (PlanSource.RULE, "unreachable (connection error)")


def test_a_row_that_cannot_be_asked_about_does_not_stop_the_others(stub):
    # A history without its numbers: building the prompt fails for every row, yet each gets the rule's plan.
    broken = HISTORY.drop(columns=["number"])
    drafts = plans(
        frame(reminder(1), reminder(2, step="REMINDED_2", key="dunning/i2/REMINDED_2")),
        config_for(stub),
        broken,
    )
    assert [(d.source, d.fallback, d.detail) for d in drafts] == [
        (PlanSource.RULE, Fallback.API_ERROR, "could not ask (KeyError)")
    ] * 2
    assert stub.requests == []


# --- payment history from the database ---------------------------------------------


def test_payment_history_of_tonights_clients(db_url, stub):
    insert(db_url, "clients", [client("c1"), client("c2"), client("c3")])
    insert(
        db_url,
        "invoices",
        [
            invoice(
                "i0",
                "c1",
                "2027-01-02T09:00:00+00:00",
                status="paid",
                due_date="2027-01-01",
                paid_at="2027-01-13T23:30:00+00:00",
            ),
            invoice("i1", "c1", "2027-02-01T09:00:00+00:00", due_date="2027-02-28"),
            invoice("i8", "c1", None, status="draft"),
            invoice("i9", "c1", "2027-01-05T09:00:00+00:00", status="void"),
            invoice(
                "j0", "c2", "2027-01-02T09:00:00+00:00", status="paid", paid_at="2027-01-03T10:00:00+00:00"
            ),
            invoice("k0", "c3", "2027-02-01T09:00:00+00:00", due_date=None),
        ],
    )
    ledger = [
        ("dunning/i0/REMINDED_1", "i0", "REMINDED_1", 1, "sent"),
        ("dunning/i0/REMINDED_2", "i0", "REMINDED_2", 2, "failed"),
        ("dunning/i1/REMINDED_1", "i1", "REMINDED_1", 1, "pending"),
    ]
    insert(
        db_url,
        "dueflow_ledger",
        [
            {
                "key": key,
                "job": "dunning",
                "subject_id": subject,
                "cycle": "",
                "step": step,
                "step_rank": rank,
                "as_of": "2027-01-10",
                "status": status,
            }
            for key, subject, step, rank, status in ledger
        ],
    )

    raw = db.rows_by_id(sourced(db_url), "client_payment_history_of", ["c1", "c3"])
    history = payment_history_frame(raw, timezone="Europe/Madrid").set_index("invoice_id")
    assert sorted(history.index) == ["i0", "i1", "k0"]  # only tonight's clients; drafts and voids are out
    assert history.loc["i0", "days_late"] == 13  # paid 2027-01-14 in Madrid, due 2027-01-01
    assert history.loc["i0", "reminders"] == 1  # only the reminder surely sent counts
    assert pd.isna(history.loc["i1", "days_late"]) and history.loc["i1", "reminders"] == 0
    assert pd.isna(history.loc["k0", "days_late"])

    [draft] = plans(frame(reminder(1)), config_for(stub), history.reset_index())
    assert draft.source == PlanSource.MODEL and draft.relationship.value == "lately_late"
    assert "invoice F-i0: paid 13 days late, 1 reminder" in user_message(stub.requests[0])
