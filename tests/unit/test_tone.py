"""A reminder's tone without a model (G7, issue 35): dueflow reads each client from its
other invoices — new, long-standing, punctual, lately late, often late —, picks the tone
its step and history call for, and a reviewed sentence for each slot, vectorised and the
same for a key every time. A punctual client's first reminder reads unlike a habitual late
payer's second, with or without a model."""

from __future__ import annotations

from datetime import date, timedelta

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dueflow.tasks.core.llm_guard import Menu, read_answer
from dueflow.tasks.core.phrasebook import (
    DRAFTED_STEPS,
    STEP_TONES,
    Relationship,
    Slot,
    Tone,
    default_phrasebook,
    tones_for,
)
from dueflow.tasks.core.tone import (
    RULE_TONES,
    TonePlan,
    plan_of,
    plan_reminders,
    read_plan,
    read_relationship,
    relationships,
    rule_plans,
    rule_tone,
)
from tests import examples
from tests.unit.test_vectorised import python_calls

AS_OF = date(2027, 3, 1)
BOOK = default_phrasebook()


def history(*invoices: tuple[str, str, int | None, int]) -> pd.DataFrame:
    """(invoice id, due date, days late or None when unpaid, reminders) of client c1."""
    rows = [
        {
            "client_id": "c1",
            "invoice_id": i,
            "number": f"F-{i}",
            "due_date": date.fromisoformat(due),
            "paid_at": None if late is None else date.fromisoformat(due) + timedelta(days=late),
            "days_late": late,
            "reminders": reminders,
        }
        for i, due, late, reminders in invoices
    ]
    frame = pd.DataFrame(
        rows, columns=["client_id", "invoice_id", "number", "due_date", "paid_at", "days_late", "reminders"]
    )
    return frame.astype({"days_late": "Int64"})


def reading(*invoices: tuple[str, str, int | None, int], subject: str = "now") -> str:
    reminders = pd.DataFrame(
        {"key": [f"dunning/{subject}/REMINDED_1"], "subject_id": [subject], "client_id": ["c1"]}
    )
    return str(relationships(reminders, history(*invoices), AS_OF).iloc[0]["relationship"])


@pytest.mark.parametrize(
    ("invoices", "expected"),
    [
        ((), Relationship.NEW),
        ((("a", "2027-02-01", None, 0),), Relationship.NEW),  # nothing settled yet
        (
            (("a", "2026-10-01", 0, 0), ("b", "2026-11-01", -2, 0), ("c", "2027-01-01", 0, 0)),
            Relationship.PUNCTUAL,
        ),
        ((("a", "2024-10-01", 0, 0), ("b", "2026-11-01", 0, 0)), Relationship.LONG_STANDING),
        (
            (("a", "2026-09-01", 0, 0), ("b", "2026-10-01", 0, 0), ("c", "2026-12-01", 9, 1)),
            Relationship.LATELY_LATE,
        ),
        (
            (("a", "2026-09-01", 12, 1), ("b", "2026-10-01", 20, 2), ("c", "2026-12-01", 0, 0)),
            Relationship.OFTEN_LATE,
        ),
        (
            (("a", "2026-09-01", 0, 1), ("b", "2026-10-01", 0, 1)),
            Relationship.OFTEN_LATE,
        ),  # paid after reminders
        (
            (("a", "2026-12-01", None, 0), ("b", "2027-01-01", None, 0), ("c", "2026-01-01", 0, 0)),
            Relationship.OFTEN_LATE,
        ),  # two others past due and unpaid
        (
            (("a", "2024-09-01", 30, 2), ("b", "2024-10-01", 25, 1), ("c", "2026-12-01", 0, 0)),
            Relationship.OFTEN_LATE,
        ),
    ],
)
def test_a_client_is_read_from_its_other_invoices(invoices, expected):
    assert reading(*invoices) == expected


def test_the_reminded_invoice_is_not_part_of_its_own_history():
    late_itself = (("now", "2026-12-01", None, 0), ("x", "2027-01-01", None, 0), ("a", "2026-06-01", 0, 0))
    assert reading(*late_itself) == Relationship.PUNCTUAL  # one other unpaid: not two
    assert reading(*late_itself, subject="elsewhere") == Relationship.OFTEN_LATE


def test_each_reminder_of_one_client_leaves_out_only_itself():
    reminders = pd.DataFrame({"key": ["k1", "k2"], "subject_id": ["a", "b"], "client_id": ["c1", "c1"]})
    read = relationships(
        reminders,
        history(("a", "2026-12-01", None, 0), ("b", "2026-12-15", None, 0), ("c", "2026-01-01", 0, 0)),
        AS_OF,
    )
    assert read["previous"].tolist() == [2, 2] and read["open_late"].tolist() == [1, 1]


@pytest.mark.parametrize("step", DRAFTED_STEPS)
def test_the_rules_tone_follows_the_client_and_is_never_pressing_before_the_due_date(step):
    for relationship in Relationship:
        due = rule_tone(step, relationship, not_yet_due=False)
        early = rule_tone(step, relationship, not_yet_due=True)
        assert due == RULE_TONES[step][relationship] and due in STEP_TONES[step]
        assert (
            early in tones_for(step, True)
            and early != {"REMINDED_1": Tone.FIRM, "REMINDED_2": Tone.PRESSING}[step]
        )
    assert rule_tone("REMINDED_1", Relationship.PUNCTUAL, False) == Tone.WARM
    assert rule_tone("REMINDED_2", Relationship.OFTEN_LATE, False) == Tone.PRESSING
    assert rule_tone("REMINDED_2", Relationship.OFTEN_LATE, True) == Tone.FIRM


def frame(n: int, locales=("en", "es", "de"), relationships_=tuple(Relationship)) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "key": [f"dunning/i{k}/{DRAFTED_STEPS[k % 2]}" for k in range(n)],
            "locale": [locales[k % len(locales)] for k in range(n)],
            "step": [DRAFTED_STEPS[k % 2] for k in range(n)],
            "relationship": [relationships_[(k // 2) % len(relationships_)].value for k in range(n)],
            "not_yet_due": [k % 3 == 0 for k in range(n)],
        }
    )


def test_every_rule_plan_is_a_valid_plan_for_its_reminders_menu():
    reminders = frame(600)
    plans = rule_plans(reminders, BOOK)
    for r in reminders.itertuples(index=False):
        plan = plan_of(plans.loc[r.key])
        assert plan is not None and len(plan.sentences) == 3, r
        tones = tones_for(r.step, r.not_yet_due)
        menu = Menu(tones, BOOK.menu(r.locale, r.step, Relationship(r.relationship), tones))
        answer = f'{{"tone": "{plan.tone.value}", "sentences": {list(plan.sentences)!r}}}'.replace("'", '"')
        assert read_answer(answer, menu) == plan


def test_rule_plans_are_stable_per_key_and_vary_between_keys():
    reminders = frame(400, locales=("en",), relationships_=(Relationship.PUNCTUAL,))
    once, again = rule_plans(reminders, BOOK), rule_plans(reminders.iloc[::-1], BOOK)
    assert once.equals(again.loc[once.index])
    first = once[reminders["step"].eq("REMINDED_1").to_numpy()]
    assert first["tone"].eq("warm").all()
    assert first[Slot.BODY.value].nunique() >= 3 and first[Slot.OPENING.value].nunique() >= 2


def test_a_punctual_clients_first_reminder_reads_unlike_a_late_payers_second():
    reminders = pd.DataFrame(
        {
            "key": ["dunning/a/REMINDED_1", "dunning/b/REMINDED_2"],
            "locale": ["en", "en"],
            "step": ["REMINDED_1", "REMINDED_2"],
            "relationship": ["punctual", "often_late"],
            "not_yet_due": [False, False],
        }
    )
    plans = rule_plans(reminders, BOOK)
    punctual, late = (plan_of(plans.loc[k]) for k in reminders["key"])
    assert punctual is not None and late is not None
    assert (punctual.tone, late.tone) == (Tone.WARM, Tone.PRESSING)
    assert not set(punctual.sentences) & set(late.sentences)
    assert BOOK.get("en", punctual.sentences[0]).fits >= {Relationship.PUNCTUAL}


def test_without_a_body_for_its_tone_a_reminder_has_no_plan():
    only_warm = type(BOOK)(tuple(s for s in BOOK.sentences if s.slot != Slot.BODY or Tone.WARM in s.tones))
    reminders = frame(4, locales=("en",))
    plans = rule_plans(reminders, only_warm)
    has = plans[Slot.BODY.value].notna()
    assert (plans.loc[has, "tone"] == "warm").all() and not has.all()


def test_plan_reminders_reads_the_due_date_and_the_client():
    reminders = pd.DataFrame(
        {
            "key": ["k1", "k2", "k3"],
            "subject_id": ["i1", "i2", "i3"],
            "client_id": ["c1"] * 3,
            "step": ["REMINDED_2"] * 3,
            "locale": ["es", "EN ", "fr"],
            "due_date": [AS_OF + timedelta(days=3), AS_OF - timedelta(days=3), None],
        }
    )
    plans = plan_reminders(
        reminders, history(("a", "2026-09-01", 12, 1), ("b", "2026-10-01", 20, 2)), AS_OF, BOOK
    )
    assert plans["not_yet_due"].tolist() == [True, False, True]
    assert plans["relationship"].eq("often_late").all()
    assert plans["tone"].tolist() == ["firm", "pressing", "firm"]
    assert (
        BOOK.get("en", plans.loc["k3", Slot.BODY.value]) is not None
    )  # an unknown locale is written in English


def test_a_stored_plan_reads_back():
    plan = TonePlan(Tone.FIRM, ("open.any.well", "body.firm.attention"))
    stored = plan.as_json(Relationship.LATELY_LATE)
    assert read_plan(stored) == plan and read_relationship(stored) == Relationship.LATELY_LATE
    assert read_plan("free text") is None and read_plan(None) is None and read_relationship("{}") is None


def test_planning_makes_as_many_python_calls_for_20000_reminders_as_for_200():
    def planning(n: int) -> pd.DataFrame:
        reminders = pd.DataFrame(
            {
                "key": [f"dunning/i{k}/REMINDED_1" for k in range(n)],
                "subject_id": [f"i{k}" for k in range(n)],
                "client_id": [f"c{k % 50}" for k in range(n)],
                "step": "REMINDED_1",
                "locale": "en",
                "due_date": AS_OF,
            }
        )
        past = pd.DataFrame(
            {
                "client_id": [f"c{k % 50}" for k in range(2 * n)],
                "invoice_id": [f"p{k}" for k in range(2 * n)],
                "number": "F",
                "due_date": date(2026, 6, 1),
                "paid_at": date(2026, 6, 5),
                "days_late": pd.array([k % 7 - 3 for k in range(2 * n)], dtype="Int64"),
                "reminders": 0,
            }
        )
        return reminders, past

    small, large = planning(200), planning(20_000)
    plan_reminders(*small, AS_OF, BOOK)  # warm caches (the menu table)
    calls = [python_calls(lambda d=d: plan_reminders(*d, AS_OF, BOOK)) for d in (small, large)]
    assert calls[1] <= calls[0] + 200, calls


@settings(max_examples=examples(40), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["en", "es", "de", "xx"]),
            st.sampled_from(DRAFTED_STEPS),
            st.sampled_from(list(Relationship)),
            st.booleans(),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_any_reminder_gets_a_plan_of_reviewed_sentences_of_its_locale(rows):
    reminders = pd.DataFrame(
        [
            {"key": f"k{n}", "locale": locale, "step": step, "relationship": rel.value, "not_yet_due": early}
            for n, (locale, step, rel, early) in enumerate(rows)
        ]
    )
    known = reminders.assign(locale=reminders["locale"].where(reminders["locale"] != "xx", "en"))
    plans = rule_plans(known, BOOK)
    for r in known.itertuples(index=False):
        plan = plan_of(plans.loc[r.key])
        assert plan is not None and plan.tone in tones_for(r.step, r.not_yet_due)
        sentences = [BOOK.get(r.locale, i) for i in plan.sentences]
        assert all(
            s is not None and s.suits(r.step, Relationship(r.relationship)) and plan.tone in s.tones
            for s in sentences
        )
