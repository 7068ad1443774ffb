"""One statement per client (docs/design.md, "Statements"): when a company asks for it
(DUEFLOW_STATEMENTS), a client whose several invoices have a reminder step due tonight gets
one email listing them all, as a follow-up letter does, instead of one email per invoice.

Exactly once stays per invoice step: each step keeps its own key and ledger row (G1), and a
statement is made only of keys this run won. Its rows store the same message under the
Message-ID of its carrier — its smallest key — and name the carrier (`statement_key`): the
carrier's claim brings the other rows along (sql/claim_sending), one email goes, and its
outcome, or a bounce of it, is recorded on each row.

Grouped together: the same client, the same kind (reminders; escalations too with `all`),
to the same address and copy, in the same language. A group of one is an ordinary email.
"""

from __future__ import annotations

from datetime import date

from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import CLIENT_STEPS, DunningStep
from dueflow.tasks.core.locales import DEFAULT_LOCALE
from dueflow.tasks.core.parameters import Statements
from dueflow.tasks.core.render import (
    DEFAULT_LOOK,
    Composed,
    EmailLook,
    _email,
    reminder_history,
    render,
    statement_context,
)

# What a statement template is named after: statement.LOCALE.PART for reminders,
# statement.OVERDUE.en.PART for an escalation listing several invoices.
STATEMENT_KIND = "statement"


def statement_keys(due: pd.DataFrame, grouping: Statements) -> pd.Series:
    """Per row of `due` (dunning rows: key, step, client_id, recipient, locale, [cc_recipient],
    [statements: the client's profile's choice, NA for `grouping`]), the key of the statement it
    goes in — the smallest key of its group —, or NA for a row that goes as an email of its own."""
    alone = pd.Series(pd.NA, index=due.index, dtype="string")
    if due.empty:
        return alone
    # Each row's choice: its client's profile's (`statements` column), else `grouping`.
    chosen = (due["statements"].astype("string") if "statements" in due
              else pd.Series(pd.NA, index=due.index, dtype="string")).fillna(grouping.value)
    steps = due["step"].astype("string")
    reminders = steps.isin([s.value for s in CLIENT_STEPS]) & chosen.ne(Statements.OFF)
    grouped = reminders | (steps.eq(DunningStep.OVERDUE.value) & chosen.eq(Statements.ALL))
    grouped = grouped.fillna(False) & due["client_id"].notna() & due["recipient"].notna()
    if not grouped.any():
        return alone
    rows = due[grouped.to_numpy()]
    escalation = rows["step"].astype("string").eq(DunningStep.OVERDUE.value)
    cc = (rows["cc_recipient"] if "cc_recipient" in rows else pd.Series(pd.NA, index=rows.index))
    by = pd.DataFrame({
        "client": rows["client_id"].astype(str),
        "kind": escalation.map({True: "escalation", False: "reminder"}),
        "to": rows["recipient"].astype(str).str.lower(),
        "cc": cc.astype("string").str.lower().fillna(""),
        # Escalations are written in English, whatever the client's locale.
        "locale": rows["locale"].astype("string").fillna(DEFAULT_LOCALE).where(~escalation, DEFAULT_LOCALE),
    }, index=rows.index)
    keys = rows["key"].astype(str)
    groups = keys.groupby([by[c] for c in by.columns], sort=False)
    carrier = groups.transform("min").where(groups.transform("size") >= 2)
    return alone.where(~grouped.to_numpy(), carrier.reindex(due.index).astype("string"))


def compose_statements(due: pd.DataFrame, carriers: pd.Series, history: pd.DataFrame, sender: Mailbox,
                       as_of: date | None = None, look: EmailLook | None = None) -> Composed:
    """The statements of the rows of `due` that `carriers` (`statement_keys`) puts in one:
    one message per statement, stored on each of its rows under the carrier's Message-ID,
    each row naming its own invoice's PDF. A statement that cannot be rendered is a failure
    of each of its rows, with why (G6). It carries no planned paragraph: the phrasebook's
    sentences speak of one invoice, so a statement's words are all its template's (G7)."""
    look = look or DEFAULT_LOOK
    steps = reminder_history(history[history["subject_id"].isin(due["subject_id"])])
    emails, failures = [], []
    for carrier_key, rows in due.groupby(carriers.astype(str), sort=True):
        carrier = rows[rows["key"].astype(str) == carrier_key]
        escalation = str(carrier["step"].iloc[0]) == DunningStep.OVERDUE
        locale = DEFAULT_LOCALE if escalation else str(carrier["locale"].iloc[0])
        try:
            context = statement_context(rows, steps, as_of, locale, look)
            rendered = render(STATEMENT_KIND, locale, context,
                              DunningStep.OVERDUE.value if escalation else None, look)
            message = _email(next(carrier.itertuples(index=False)), sender, rendered, look=look)
        except Exception as exc:
            why = f"could not render the statement {carrier_key}: {exc}"
            failures += [(str(k), why) for k in rows["key"]]
            continue
        for row in rows.itertuples(index=False):
            own = _email(row, sender, rendered, look=look)  # its own PDF and copies
            emails.append(own.with_message_of(message, statement_key=carrier_key))
    return Composed(emails, failures)
