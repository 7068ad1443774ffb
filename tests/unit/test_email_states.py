"""The emails as their readers see them, in every state the wording depends on: a first and a
second reminder before, on and after the due date, in every locale, composed as the flow
composes them (the paragraph dueflow's rule plans without a model included); and the
escalation, which names the client as the one who owes and says plainly what each earlier
step was. Rendered, never sent: fast."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pandas as pd
import pytest

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.llm_guard import rule_drafts
from dueflow.tasks.core.message import OutgoingEmail
from dueflow.tasks.core.phrasebook import default_phrasebook
from dueflow.tasks.core.render import EmailLook, compose_dunning_emails

SENDER = Mailbox("billing@harbour.example", "Harbour Supplies")
AS_OF = date(2027, 3, 10)
LOOK = EmailLook(company="Harbour Supplies Ltd", payment_instructions="IBAN GB33 BUKB 2020 1555 5555 55")
# Words that belong only to a late invoice, per reader.
LATE = {"en": re.compile(r"overdue|past due|was due|slip through|without further delay|still unpaid|"
                         r"preventing payment", re.IGNORECASE),
        "de": re.compile(r"überfällig|fällig war|war am .{3,20} fällig|untergehen|Aufschub|unbezahlt|"
                         r"im Wege", re.IGNORECASE),
        "es": re.compile(r"vencid|venció|retraso|desapercibida|sin más demora|sigue sin pagarse|"
                         r"le impide", re.IGNORECASE)}


def compose(step: str, locale: str, due_in: int, history: list[tuple[str, int, str]] = (),  # type: ignore[assignment]
            client: str = "Contoso Retail") -> OutgoingEmail:
    """One reminder or escalation of invoice 2026-0108, due `due_in` days after AS_OF, with
    the paragraph a run without a model plans (rule_drafts)."""
    key = f"dunning/inv-108/{step}"
    due = pd.DataFrame([{
        "key": key, "subject_id": "inv-108", "step": step, "step_rank": {"REMINDED_1": 1, "REMINDED_2": 2,
                                                                          "OVERDUE": 3}[step],
        "number": "2026-0108", "amount": "12400.00", "currency": "USD", "issue_date": date(2027, 1, 1),
        "due_date": AS_OF + timedelta(days=due_in), "client_id": "cl-5", "client_name": client,
        "client_email": "payables@contoso.example", "locale": locale, "notes": None,
        "recipient": "collections@harbour.example" if step == "OVERDUE" else "payables@contoso.example"}])
    ranks = {"REMINDED_1": 1, "REMINDED_2": 2}
    steps = pd.DataFrame([{"subject_id": "inv-108", "step": s, "step_rank": ranks[s],
                           "as_of": (AS_OF - timedelta(days=ago)).isoformat(), "status": status}
                          for s, ago, status in history],
                         columns=["subject_id", "step", "step_rank", "as_of", "status"])
    drafts = {d.key: d for d in rule_drafts(due, pd.DataFrame(), AS_OF, default_phrasebook())}
    composed = compose_dunning_emails(due, steps, SENDER, drafts, as_of=AS_OF, look=LOOK)
    assert not composed.failures, composed.failures
    [email] = composed.emails
    if step != "OVERDUE":  # the draft reported is the paragraph the email carries
        [draft] = composed.drafts
        assert " ".join(draft.paragraph.split()) in " ".join(email.body_text.split())
    return email


def texts(email: OutgoingEmail) -> list[str]:
    return [email.subject, email.body_text, email.body_html]


# (step, locale, days to the due date, what the reader must read, in subject or body)
STATES = [
    ("REMINDED_1", "en", 5, ["falls due in 5 days"]),
    ("REMINDED_1", "en", 0, ["is due today"]),
    ("REMINDED_1", "en", -6, ["was due on 4 March 2027", "6 days ago"]),
    ("REMINDED_2", "en", 3, ["falls due in 3 days"]),
    ("REMINDED_2", "en", 0, ["is due today"]),
    ("REMINDED_2", "en", -21, ["is now 21 days overdue"]),
    ("REMINDED_1", "es", 5, ["vence dentro de 5 días"]),
    ("REMINDED_1", "es", 0, ["vence hoy"]),
    ("REMINDED_1", "es", -6, ["venció el 4 de marzo de 2027", "hace 6 días"]),
    ("REMINDED_2", "es", 3, ["vence dentro de 3 días"]),
    ("REMINDED_2", "es", 0, ["vence hoy"]),
    ("REMINDED_2", "es", -21, ["lleva 21 días de retraso"]),
    ("REMINDED_1", "de", 5, ["in 5 Tagen, am 15. März 2027, fällig"]),
    ("REMINDED_1", "de", 0, ["heute fällig"]),
    ("REMINDED_1", "de", -6, ["am 4. März 2027 (vor 6 Tagen) fällig war"]),
    ("REMINDED_2", "de", 3, ["in 3 Tagen, am 13. März 2027, fällig"]),
    ("REMINDED_2", "de", 0, ["heute fällig"]),
    ("REMINDED_2", "de", -21, ["nun 21 Tage überfällig"]),
]


@pytest.mark.parametrize(("step", "locale", "due_in", "said"), STATES,
                         ids=[f"{s}-{loc}-{d:+d}" for s, loc, d, _ in STATES])
def test_each_reminder_reads_right_for_the_day(step, locale, due_in, said):
    email = compose(step, locale, due_in)
    everything = " ".join(" ".join(t.split()) for t in texts(email))
    for words in said:
        assert words in everything, (words, email.body_text)
    late_said = any(LATE[locale].search(t) for t in texts(email))
    assert late_said == (due_in < 0), email.body_text  # late-invoice words only when it is late
    # The reply the email invites goes somewhere, and how to pay is said.
    assert ("IBAN GB33" in email.body_text) and ("Harbour Supplies Ltd" in email.body_text)


@pytest.mark.parametrize("locale", ["en", "es", "de"])
@pytest.mark.parametrize("due_in", [5, 0, -6])
def test_the_second_reminder_says_it_is_the_second_and_the_first_does_not(locale, due_in):
    first, second = compose("REMINDED_1", locale, due_in), compose("REMINDED_2", locale, due_in)
    word = {"en": "second", "es": "segundo", "de": "zweite"}[locale]
    assert word not in first.body_text.lower() and word not in first.subject.lower()
    assert word in second.subject.lower()
    wrote = {"en": "written to you before", "es": "Ya le hemos escrito",
             "de": "bereits wegen der Rechnung"}[locale]
    assert wrote in second.body_text and wrote not in first.body_text


@pytest.mark.parametrize(("due_in", "said"), [
    (-35, "is 35 days overdue after two reminders"),
    (0, "is due today, unpaid after two reminders"),
    (4, "is unpaid after two reminders, due in 4 days"),
])
def test_the_escalation_names_the_client_as_the_one_who_owes(due_in, said):
    email = compose("OVERDUE", "es", due_in, history=[("REMINDED_1", 20, "sent"), ("REMINDED_2", 12, "sent")])
    assert email.subject == f"Escalation: invoice 2026-0108 to Contoso Retail ($12,400.00) {said}"
    assert "Invoice 2026-0108 for $12,400.00, billed to Contoso Retail, is still unpaid" in email.body_text
    for text in texts(email):
        assert "from Contoso" not in text and "of Contoso" not in text
    html = re.sub(r"<[^>]+>", "", email.body_html)
    assert "billed to Contoso Retail" in " ".join(html.split())


@pytest.mark.parametrize(("status", "line"), [
    ("sent", "First reminder, 18 February 2027: sent"),
    ("adopted", "First reminder, 18 February 2027: handled outside dueflow, before it took over"),
    ("failed", "First reminder, 18 February 2027: could not be sent"),
])
def test_the_escalation_history_says_plainly_what_happened(status, line):
    email = compose("OVERDUE", "en", -35, history=[("REMINDED_1", 20, status), ("REMINDED_2", 12, "sent")])
    assert "Reminders so far:" in email.body_text and "What was sent" not in email.body_text
    assert line in email.body_text
    assert "Second reminder, 26 February 2027: sent" in email.body_text
    assert "not sent by dueflow" not in email.body_text + email.body_html
    assert "Reminders so far" in email.body_html


@pytest.mark.parametrize(("env", "warned"), [
    ({}, "the sender dueflow@localhost is on a local-only domain and DUEFLOW_REPLY_TO is not set"),
    ({"DUEFLOW_MAIL_FROM": "alerts@mailhost"}, "the sender alerts@mailhost is on a local-only domain"),
    ({"DUEFLOW_MAIL_FROM": "billing@corp.example", "DUEFLOW_REPLY_TO": "ar@box.local"},
     "DUEFLOW_REPLY_TO ar@box.local is on a local-only domain"),
    ({"DUEFLOW_REPLY_TO": "accounts@corp.example"}, None),  # replies reach accounts
    ({"DUEFLOW_MAIL_FROM": "billing@corp.example"}, None),
])
def test_check_warns_about_a_reply_address_no_client_can_reach(env, warned):
    from dueflow.tasks.check import check_settings

    checks, settings = check_settings({"DUEFLOW_ESCALATION_TO": "c@corp.example", **env})
    assert settings is not None and all(c.ok for c in checks)  # a warning, not a problem: exit 0
    [reply] = [c for c in checks if c.item == "reply address"] or [None]
    if warned is None:
        assert reply is None
    else:
        assert reply.warning and warned in reply.detail
        assert reply.line().startswith("warning  reply address: ")
        assert "fix: set DUEFLOW_MAIL_FROM" in reply.line()
