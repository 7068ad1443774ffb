"""A reminder's tone (G7), pure: who the client is by its payment history, which tone and
reviewed sentences its paragraph takes, and the paragraph they make.

A paragraph is a `TonePlan` — a tone and one to three ids of the phrasebook — rendered by
dueflow from the phrasebook's text (core.phrasebook). The plan is chosen by a model where
one is configured (core.llm_guard asks for it and checks the answer), else, and whenever
the model's answer is not a valid plan for the reminder, by `rule_plans`: a deterministic
choice from the same history, so that every company's reminders follow the client — a
punctual client's first reminder reads unlike a habitual late payer's second. No word a
model writes is rendered: a model's answer is only ever read as ids of reviewed sentences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from enum import StrEnum
from functools import lru_cache

import numpy as np

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.locales import DEFAULT_LOCALE, SUPPORTED_LOCALES
from dueflow.tasks.core.phrasebook import (
    STEP_TONES,
    Phrasebook,
    Relationship,
    Slot,
    Tone,
    tones_for,
)
from dueflow.tasks.core.validate import as_dates, business_dates


class PlanSource(StrEnum):
    """Who chose a reminder's paragraph (the ledger's `draft_source`)."""

    MODEL = "model"  # the model's plan, checked against the reminder's menu
    RULE = "rule"  # dueflow's rule, from the client's payment history
    TEMPLATE = "template"  # the step's template paragraph: no plan could be made


# `draft_source` of rows an earlier release wrote: a paragraph the model wrote itself. It
# is never rendered again (G7): such a row is planned anew when it is sent again.
FREE_TEXT_SOURCE = "llm"


class Fallback(StrEnum):
    """Why a reminder's paragraph is not the model's plan: the summary groups by it, code
    branches on it (never on the note's text)."""

    MODEL_OFF = "no model configured"
    RENDERED_AGAIN = "rendered again after its night: the model is asked only when a key is reserved"
    FREE_TEXT = "free text of an earlier release is never sent: planned again"
    BUDGET = "the night's budget of model calls was used up"
    BREAKER = "the model's API failed too often tonight"
    API_ERROR = "the model's API failed"
    MODEL_DECLINED = "the model declined to answer"
    NO_ANSWER = "the model gave no answer"
    CUT_OFF = "the answer was cut off"
    TOO_LONG = "the answer is too long"
    NOT_JSON = "the answer is not one JSON object"
    NOT_AN_OBJECT = "the answer is not a JSON object"
    DUPLICATE_FIELD = "the answer names a field twice"
    MISSING_FIELD = "the answer lacks a field"
    EXTRA_FIELD = "the answer has a field that is not in the plan"
    WRONG_TYPE = "a field of the answer has the wrong type"
    TONE_NOT_OFFERED = "a tone not offered for this reminder"
    SENTENCE_NOT_OFFERED = "a sentence not offered for this reminder"
    DUPLICATE_SENTENCE = "a sentence chosen twice"
    SENTENCE_COUNT = "not one to three sentences"
    SLOT_TAKEN = "two sentences for one place (opening, body or closing)"
    NO_BODY = "no body sentence"
    TONE_MISMATCH = "a sentence that does not carry the chosen tone"
    NO_PLAN = "the phrasebook has no sentence for this reminder: template paragraph"

    @property
    def refused_answer(self) -> bool:
        """The model answered, and its answer was not a valid plan."""
        return self in _REFUSALS


_REFUSALS = frozenset({Fallback.MODEL_DECLINED, Fallback.NO_ANSWER, Fallback.CUT_OFF, Fallback.TOO_LONG,
                       Fallback.NOT_JSON, Fallback.NOT_AN_OBJECT, Fallback.DUPLICATE_FIELD,
                       Fallback.MISSING_FIELD, Fallback.EXTRA_FIELD, Fallback.WRONG_TYPE,
                       Fallback.TONE_NOT_OFFERED, Fallback.SENTENCE_NOT_OFFERED,
                       Fallback.DUPLICATE_SENTENCE, Fallback.SENTENCE_COUNT, Fallback.SLOT_TAKEN,
                       Fallback.NO_BODY, Fallback.TONE_MISMATCH})


@dataclass(frozen=True)
class TonePlan:
    """A paragraph as chosen: a tone and the ids of its sentences, in slot order."""

    tone: Tone
    sentences: tuple[str, ...]

    def as_json(self, relationship: Relationship | None = None) -> str:
        """What the ledger's `tone_plan` keeps (with the client as dueflow read it)."""
        stored: dict[str, object] = {"tone": self.tone.value, "sentences": list(self.sentences)}
        if relationship is not None:
            stored["client"] = relationship.value
        return json.dumps(stored, separators=(",", ":"))


@dataclass(frozen=True)
class Draft:
    """The paragraph of one reminder, who chose it, and why not the model when it did not."""

    key: str
    paragraph: str
    source: PlanSource
    plan: TonePlan | None = None
    relationship: Relationship | None = None
    fallback: Fallback | None = None  # None: the model's plan (or no paragraph at all)
    detail: str = ""  # what the fallback is about: the refused id, the HTTP status…
    answer: str | None = None  # the model's refused answer, cleaned and capped
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def note(self) -> str | None:
        """The ledger's `draft_note`: why the model's plan is not the one used."""
        if self.fallback is None:
            return None
        prefix = "model answer refused: " if self.fallback.refused_answer else ""
        return prefix + self.fallback.value + (f" ({self.detail})" if self.detail else "")

    @property
    def stored_plan(self) -> str | None:
        return self.plan.as_json(self.relationship) if self.plan else None


def read_plan(text: str | None) -> TonePlan | None:
    """A ledger row's `tone_plan` read back (None when absent or not one)."""
    try:
        data = json.loads(text or "")
        return TonePlan(Tone(data["tone"]), tuple(str(s) for s in data["sentences"]))
    except (ValueError, KeyError, TypeError):
        return None


def read_relationship(text: str | None) -> Relationship | None:
    """The client as the row's `tone_plan` says dueflow read it."""
    try:
        return Relationship(json.loads(text or "")["client"])
    except (ValueError, KeyError, TypeError):
        return None


# --------------------------------------------------------------------------- the client


def payment_history_frame(raw: pd.DataFrame, timezone: str = "UTC") -> pd.DataFrame:
    """The rows of sql/client_payment_history_of (the reminded clients' invoices) typed.

    `days_late` is computed here rather than in SQL because date arithmetic differs
    between SQLite and PostgreSQL: paid_at taken to its date in the business time zone
    (like every timestamp in dueflow) minus due_date, in days; negative means paid early;
    NA while unpaid or without a due date. `reminders` counts the reminders surely sent
    for the invoice (0 when absent)."""
    frame = raw.reset_index(drop=True)
    due = business_dates(frame["due_date"], timezone)
    paid = business_dates(frame["paid_at"], timezone)
    reminders = frame["reminders"] if "reminders" in frame else pd.Series(0, index=frame.index)
    return pd.DataFrame({
        "client_id": frame["client_id"].astype("string"),
        "invoice_id": frame["invoice_id"].astype("string"),
        "number": frame["number"].astype("string"),
        "due_date": due.dt.date.astype(object).where(due.notna(), None),
        "paid_at": paid.dt.date.astype(object).where(paid.notna(), None),
        "days_late": (paid - due).dt.days.astype("Int64"),
        "reminders": pd.to_numeric(reminders, errors="coerce").fillna(0).astype("int64"),
    })


LONG_STANDING_DAYS = 730  # a client invoiced for two years or more
OFTEN_LATE_SHARE = 0.5  # of its settled invoices paid late, or needing a reminder
OFTEN_LATE_OPEN = 2  # other invoices of its past their due date and unpaid


def relationships(reminders: pd.DataFrame, history: pd.DataFrame, as_of: date) -> pd.DataFrame:
    """Each reminder's client as its other invoices show it, vectorised.

    `reminders`: key, subject_id (the invoice), client_id. `history`: the clients' invoices
    (`payment_history_frame`: client_id, invoice_id, due_date, paid_at, days_late,
    reminders). The reminded invoice is not part of its own history. Returns, by key:
    `previous`, `settled`, `late`, `reminded`, `open_late`, `first_due`, `last_late` and
    `relationship` — the first that holds of: often late (half its settled invoices paid
    late or after a reminder, or two others past due), new (nothing settled yet), lately
    late (its last settled invoice was paid late), long-standing (invoiced for two years),
    punctual.
    """
    keys = pd.Index(reminders["key"].astype(str), name="key")
    counts = ["previous", "settled", "late", "reminded", "open_late"]
    stats = pd.DataFrame(dict.fromkeys(counts, 0) | {"first_due": pd.NaT, "last_late": False}, index=keys)
    if not history.empty and not reminders.empty:
        # Each client's invoices counted once, then each reminder's own invoice taken out of
        # its client's counts: linear in the rows, however many reminders a client has.
        invoices = history.assign(client_id=history["client_id"].astype(str),
                                  invoice_id=history["invoice_id"].astype(str)).drop_duplicates(
                                      ["client_id", "invoice_id"])
        due = as_dates(invoices["due_date"])
        settled = invoices["paid_at"].notna()
        late = settled & (pd.to_numeric(invoices["days_late"], errors="coerce") > 0).fillna(False)
        reminded = settled & (pd.to_numeric(invoices["reminders"], errors="coerce").fillna(0) > 0)
        open_late = ~settled & (due < pd.Timestamp(as_of)).fillna(False)
        flags = {"settled": settled, "late": late, "reminded": late | reminded, "open_late": open_late}
        as_counts = {name: flag.astype(bool).astype("int64") for name, flag in flags.items()}
        invoices = invoices.assign(due=due, previous=1, **as_counts)
        per_client = invoices.groupby("client_id")[counts].sum().join(
            invoices.groupby("client_id")["due"].min().rename("first_due"))
        own = reminders[["subject_id", "client_id"]].astype(str).merge(
            invoices[["client_id", "invoice_id", *counts]], how="left", left_on=["client_id", "subject_id"],
            right_on=["client_id", "invoice_id"])[counts].fillna(0).astype("int64")
        theirs = per_client.reindex(reminders["client_id"].astype(str).to_numpy())
        stats[counts] = (theirs[counts].fillna(0).astype("int64").to_numpy() - own.to_numpy())
        stats["first_due"] = theirs["first_due"].to_numpy()  # its own invoice included: never the oldest
        tonight = invoices["invoice_id"].isin(reminders["subject_id"].astype(str))
        last = (invoices[invoices["settled"].astype(bool) & ~tonight].sort_values("due")
                .groupby("client_id")["late"].last().astype(bool))
        clients = reminders["client_id"].astype(str).to_numpy()
        stats["last_late"] = last.reindex(clients).fillna(False).to_numpy(dtype=bool)
    settled_n = stats["settled"].astype("int64")
    share = stats["reminded"].astype("float64") / settled_n.where(settled_n > 0)
    often = (((settled_n >= 2) & (share >= OFTEN_LATE_SHARE))
             | (stats["open_late"].astype("int64") >= OFTEN_LATE_OPEN))
    tenure = (pd.Timestamp(as_of) - pd.to_datetime(stats["first_due"])).dt.days
    relationship = np.select(
        [often.to_numpy(), (settled_n == 0).to_numpy(), stats["last_late"].astype(bool).to_numpy(),
         (tenure >= LONG_STANDING_DAYS).fillna(False).to_numpy()],
        [Relationship.OFTEN_LATE.value, Relationship.NEW.value, Relationship.LATELY_LATE.value,
         Relationship.LONG_STANDING.value], Relationship.PUNCTUAL.value)
    return stats.assign(relationship=relationship)


# --------------------------------------------------------------------------- the rule

# The rule's tone for each step and client; before the due date it takes the mildest of
# the step's tones instead of the firmest (phrasebook.NOT_BEFORE_DUE).
RULE_TONES: dict[str, dict[Relationship, Tone]] = {
    "REMINDED_1": {Relationship.NEW: Tone.WARM, Relationship.PUNCTUAL: Tone.WARM,
                   Relationship.LONG_STANDING: Tone.APPRECIATIVE, Relationship.LATELY_LATE: Tone.NEUTRAL,
                   Relationship.OFTEN_LATE: Tone.FIRM},
    "REMINDED_2": {Relationship.NEW: Tone.FIRM, Relationship.PUNCTUAL: Tone.NEUTRAL,
                   Relationship.LONG_STANDING: Tone.NEUTRAL, Relationship.LATELY_LATE: Tone.FIRM,
                   Relationship.OFTEN_LATE: Tone.PRESSING},
}
assert all(tone in STEP_TONES[step] for step, tones in RULE_TONES.items() for tone in tones.values())


def rule_tone(step: str, relationship: Relationship, not_yet_due: bool) -> Tone:
    tone = RULE_TONES[step][relationship]
    allowed = tones_for(step, not_yet_due)
    return tone if tone in allowed else allowed[-1]


# The rule's tone for every step, client and due state, keyed as rule_plans looks it up.
_RULE_TONE = pd.Series({f"{step}|{rel.value}|{early}": rule_tone(step, rel, early).value
                        for step in RULE_TONES for rel in Relationship for early in (False, True)},
                       dtype=object)


@lru_cache(maxsize=8)
def _menu_maps(book: Phrasebook) -> tuple[pd.Series, pd.Series]:
    """For each "locale|step|relationship|tone|slot" a sentence may fill: how many sentences
    can, and which is at each position ("…|slot|n"), by id: what rule_plans looks up."""
    groups: dict[str, list[str]] = {}
    for s in book.sentences:
        for step in s.steps:
            for rel in Relationship:
                if s.suits(step, rel):
                    for tone in s.tones:
                        group = f"{s.locale}|{step}|{rel.value}|{tone.value}|{s.slot.value}"
                        groups.setdefault(group, []).append(s.id)
    sizes = pd.Series({group: len(ids) for group, ids in groups.items()}, dtype="uint64")
    at = pd.Series({f"{group}|{n}": sentence_id for group, ids in groups.items()
                    for n, sentence_id in enumerate(sorted(ids))}, dtype=object)
    return sizes, at


def rule_plans(reminders: pd.DataFrame, book: Phrasebook) -> pd.DataFrame:
    """dueflow's plan of each reminder, vectorised: the rule's tone for its step and client
    (`RULE_TONES`), then per slot one of the sentences that fit — picked by a stable hash
    of the key, so that clients read different sentences and a key always the same.

    `reminders`: key, locale, step, relationship, not_yet_due. Returns, by key: tone and
    the chosen id of each slot (None where the book has none; a row without a body has no
    plan: the template paragraph)."""
    index = pd.Index(reminders["key"].astype(str), name="key")
    out = pd.DataFrame(index=index, columns=["tone", *[slot.value for slot in Slot]], dtype=object)
    if reminders.empty:
        return out
    step = reminders["step"].astype(str).to_numpy(dtype=object)
    relationship = reminders["relationship"].astype(str).to_numpy(dtype=object)
    early = np.where(reminders["not_yet_due"].astype(bool).to_numpy(), "True", "False").astype(object)
    tone = pd.Series(step + "|" + relationship + "|" + early, index=index).map(_RULE_TONE)
    out["tone"] = tone
    sizes, at = _menu_maps(book)
    base = reminders["locale"].astype(str).to_numpy(dtype=object) + "|" + step + "|" + relationship + "|"
    keys = pd.Series(index.to_numpy(dtype=object), index=index)
    for slot in Slot:
        group = pd.Series(base + tone.to_numpy(dtype=object) + "|" + slot.value, index=index)
        size = group.map(sizes)
        has = size.notna().to_numpy()
        if not has.any():
            continue
        seed = pd.util.hash_pandas_object(keys[has] + "/" + slot.value, index=False).to_numpy()
        position = (seed % size[has].to_numpy(dtype="uint64")).astype(str).astype(object)
        out.loc[has, slot.value] = (group[has] + "|" + position).map(at)
    return out


def plan_reminders(reminders: pd.DataFrame, history: pd.DataFrame, as_of: date,
                   book: Phrasebook) -> pd.DataFrame:
    """dueflow's reading of each reminder (key, subject_id, client_id, step, locale,
    due_date) on `as_of`: its client (`relationships`), whether it is not yet due (or has
    no due date: never pressed), and the rule's plan (`rule_plans`), by key."""
    if reminders.empty:
        return pd.DataFrame(columns=["relationship", "not_yet_due", "tone", *[s.value for s in Slot]])
    standing = relationships(reminders, history, as_of)
    due = as_dates(reminders["due_date"]).to_numpy()
    not_yet_due = ~(due <= np.datetime64(as_of, "ns"))  # NaT compares False: unknown is not yet due
    locale = reminders["locale"]  # decided rows carry a supported locale; anything else is written in English
    facts = pd.DataFrame({"key": reminders["key"].astype(str).to_numpy(),
                          "locale": locale.where(locale.isin(SUPPORTED_LOCALES), DEFAULT_LOCALE).to_numpy(),
                          "step": reminders["step"].to_numpy(),
                          "relationship": standing["relationship"].to_numpy(), "not_yet_due": not_yet_due})
    return facts.set_index("key")[["relationship", "not_yet_due"]].join(rule_plans(facts, book))


def plan_of(row: pd.Series) -> TonePlan | None:
    """One row of `plan_reminders` as a plan (None without a body sentence)."""
    return plan_from(row["tone"], row[Slot.OPENING.value], row[Slot.BODY.value], row[Slot.CLOSING.value])


def plan_from(tone: object, opening: object, body: object, closing: object) -> TonePlan | None:
    """The plan of a tone and its slots' ids (None without a body sentence)."""
    if not isinstance(body, str):
        return None
    return TonePlan(Tone(str(tone)), tuple(i for i in (opening, body, closing) if isinstance(i, str)))
