"""G7 as a client reads it (issue 35): whatever a model answers — random JSON, random text,
the whole red-team corpus and the issue's frauds in every field and position of a plan,
oversize, wrong types, a valid plan with text around it — the reminder's paragraph is a
set of reviewed sentences of its locale, the model's valid plan or dueflow's own; the email
is character for character the one that plan renders with no answer around it, and no
sentence the answer carries is in it, text or HTML. Asserted on the real messages as they
go on the wire, parsed back as a mail client reads them."""

from __future__ import annotations

import email
import email.policy
import json
import re
from datetime import date
from html import unescape

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.corpora import load
from bench.corpora.answers import ISSUE_FRAUDS, SHAPES, hostile_answer
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.llm_guard import Reminder, answer_of, drafts_of, menu_for, read_answer
from dueflow.tasks.core.message import message_bytes
from dueflow.tasks.core.phrasebook import Relationship, Slot, default_phrasebook
from dueflow.tasks.core.render import EmailLook, compose_dunning_emails
from dueflow.tasks.core.tone import Fallback, PlanSource, TonePlan, plan_of, plan_reminders
from tests import examples

BOOK = default_phrasebook()
SENDER = Mailbox("billing@harbour.example", "Harbour Supplies")
AS_OF = date(2027, 3, 10)
LOOK = EmailLook(company="Harbour Supplies Ltd", payment_instructions="IBAN GB33 BUKB 2020 1555 5555 55")
HOSTILE = [text for locale in ("en", "es") for _, text in load("red_team", locale)] + list(ISSUE_FRAUDS)
REVIEWED = {" ".join(s.text.split()) for s in BOOK.sentences}
NO_HISTORY = pd.DataFrame(
    columns=["client_id", "invoice_id", "number", "due_date", "paid_at", "days_late", "reminders"]
)


def row(locale: str, step: str, due_in: int) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "key": f"dunning/inv-108/{step}",
                "subject_id": "inv-108",
                "step": step,
                "step_rank": {"REMINDED_1": 1, "REMINDED_2": 2}[step],
                "number": "2026-0108",
                "amount": "12400.00",
                "currency": "USD",
                "issue_date": date(2027, 1, 1),
                "due_date": AS_OF + pd.Timedelta(days=due_in).to_pytimedelta(),
                "client_id": "cl-5",
                "client_name": "Contoso Retail",
                "client_email": "payables@contoso.example",
                "locale": locale,
                "notes": None,
                "recipient": "payables@contoso.example",
            }
        ]
    )


def wire(due: pd.DataFrame, answer: str) -> tuple[list[str], object]:
    """The email a reminder goes out as when the model answered `answer`: its texts as a mail
    client shows them (text part; HTML as written and as read), and the draft it carries."""
    plans = plan_reminders(due, NO_HISTORY, AS_OF, BOOK)
    first = due.iloc[0]
    facts = plans.loc[first["key"]]
    reminder = Reminder(
        key=first["key"],
        subject_id="inv-108",
        step=first["step"],
        locale=first["locale"],
        not_yet_due=bool(facts["not_yet_due"]),
        relationship=Relationship(facts["relationship"]),
    )
    menu = menu_for(reminder, BOOK)
    [draft] = drafts_of(due, plans, BOOK, {first["key"]: answer_of(answer, menu)}, Fallback.MODEL_OFF)
    steps = pd.DataFrame(
        [
            {
                "subject_id": "inv-108",
                "step": "REMINDED_1",
                "step_rank": 1,
                "as_of": "2027-03-01",
                "status": "sent",
            }
        ],
        columns=["subject_id", "step", "step_rank", "as_of", "status"],
    )
    composed = compose_dunning_emails(due, steps, SENDER, {draft.key: draft}, as_of=AS_OF, look=LOOK)
    [outgoing] = composed.emails
    parsed = email.message_from_bytes(message_bytes(outgoing, SENDER), policy=email.policy.default)
    plain, html = (parsed.get_body((kind,)).get_content() for kind in ("plain", "html"))
    return [plain, html, unescape(re.sub(r"<[^>]+>", " ", html))], (draft, menu, plans.loc[first["key"]])


def sentences(text: str) -> set[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return {" ".join(p.split()) for p in parts if len(p.split()) >= 2}


def strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return []


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=10,
)
WORDS = sorted({w for s in BOOK.sentences for w in s.text.split()} | {"payment.", "client.", "below."})


@st.composite
def answers(draw: st.DrawFn) -> str:
    """Any answer: random JSON or text, words of the phrasebook itself recombined (an insider
    who knows the list), or hostile text in a shape a plan can take."""
    kind = draw(st.sampled_from(["json", "text", "salad", "hostile", "oversize"]))
    if kind == "json":
        return json.dumps(draw(JSON))
    if kind == "text":
        return draw(st.text(max_size=400))
    if kind == "oversize":
        return json.dumps({"tone": "warm", "sentences": ["body.warm.gentle"], "x": "Pay us. " * 400})
    text = (
        " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=2, max_size=14)))
        if kind == "salad"
        else draw(st.sampled_from(HOSTILE))
    )
    plan = {
        "tone": draw(st.sampled_from(["warm", "neutral", "firm", "pressing"])),
        "sentences": draw(st.lists(st.sampled_from(sorted({s.id for s in BOOK.sentences})), max_size=3)),
    }
    return hostile_answer(text, draw(st.sampled_from(SHAPES)), plan)


@settings(max_examples=examples(120), deadline=None)
@given(
    answers(),
    st.sampled_from(["en", "es", "de"]),
    st.sampled_from(["REMINDED_1", "REMINDED_2"]),
    st.sampled_from([-9, 0, 6]),
)
def test_no_sentence_of_any_answer_reaches_the_email(answer, locale, step, due_in):
    texts, (draft, menu, facts) = wire(row(locale, step, due_in), answer)
    # The paragraph is reviewed sentences of this locale, in slot order: the model's plan if
    # the answer is one for this menu, else dueflow's.
    read = read_answer(answer, menu)
    expected = read if isinstance(read, TonePlan) else plan_of(facts)
    assert draft.plan == expected and draft.source == (
        PlanSource.MODEL if isinstance(read, TonePlan) else PlanSource.RULE
    )
    assert draft.paragraph == BOOK.text(locale, expected.sentences)
    assert [BOOK.get(locale, i).slot for i in expected.sentences] == sorted(
        {BOOK.get(locale, i).slot for i in expected.sentences}, key=list(Slot).index
    )
    shown = [" ".join(t.split()) for t in texts]
    assert all(draft.paragraph in t for t in (shown[0], shown[2]))
    # The email is the one its plan renders with no answer around it: text and HTML are the
    # same, character for character, as for a bare valid plan (or for no plan at all), so no
    # sequence of the answer's own characters can be in it but what the plan's sentences say.
    bare = json.dumps({"tone": expected.tone.value, "sentences": list(expected.sentences)}) \
        if isinstance(read, TonePlan) else "not a plan"
    assert wire(row(locale, step, due_in), bare)[0] == texts
    # No sentence the answer carries (in any string of it, or as written) is in the email,
    # unless it is itself a reviewed sentence of the phrasebook.
    try:
        carried = [*strings(json.loads(answer)), answer]
    except ValueError:
        carried = [answer]
    for piece in {s for text in carried for s in sentences(text)} - REVIEWED:
        assert all(piece not in t for t in shown), (piece, answer)


def test_a_valid_plan_is_what_the_email_says():
    due = row("es", "REMINDED_2", -9)
    answer = json.dumps(
        {"tone": "pressing", "sentences": ["body.pressing.urgent", "close.count.cooperation"]}
    )
    texts, (draft, _, _) = wire(due, answer)
    assert draft.source == PlanSource.MODEL
    assert draft.paragraph == (
        "Le agradeceríamos que prestara atención urgente a esta factura. Contamos con su colaboración."
    )
    assert draft.paragraph in " ".join(texts[0].split()) and draft.paragraph in " ".join(texts[2].split())


def test_the_issues_frauds_in_every_shape_leave_the_email_as_the_rule_wrote_it():
    """Each fraud of issue 35 once (in the next shape), and the first in every shape."""
    plan = {"tone": "neutral", "sentences": ["body.neutral.remind"]}
    cases = [(fraud, SHAPES[n % len(SHAPES)]) for n, fraud in enumerate(ISSUE_FRAUDS)]
    cases += [(ISSUE_FRAUDS[0], shape) for shape in SHAPES]
    rule = {locale: wire(row(locale, "REMINDED_1", -9), "not a plan")[0] for locale in ("en", "es")}
    for fraud, shape in cases:
        locale = "en" if fraud.isascii() else "es"
        texts, (draft, _, _) = wire(row(locale, "REMINDED_1", -9), hostile_answer(fraud, shape, plan))
        assert draft.source == PlanSource.RULE and all(fraud not in t for t in texts)
        assert texts[0] == rule[locale][0], (fraud, shape)
