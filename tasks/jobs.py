"""A night's jobs: what each reads, decides and writes (docs/how-it-works.md).

`RenewalJob` and `DunningJob` each say where their rows come from (`extract`), what is due
(`decide`), how each reminder's paragraph is planned (`plan`) and how their emails are
written (`compose`: the one place a job renders); for a row an earlier run left in the
ledger, `reread` and `decide_again` find its source row again by id and decide it for the
night it was reserved (`render_again`). They read and write only through a `Store` (the
ledger and the sources: tasks/core/ports.py), SQL or in memory. The night
(tasks/night.py), the forecast (tasks/forecast.py) and `dueflow check --sources` call these
same methods; the Prefect tasks that show each step in the UI are tasks/steps.py.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import ClassVar

from dueflow.blocks.settings import LLMConfig, Settings
from dueflow.tasks.adapters.invoice_files import with_invoice_pdfs
from dueflow.tasks.adapters.llm_client import plan_paragraphs
from dueflow.tasks.core.addresses import Mailbox
from dueflow.tasks.core.calendar import BusinessCalendar
from dueflow.tasks.core.decide import Decision
from dueflow.tasks.core.dunning_rule import DunningRules, due_dunning_steps, dunning_steps_for
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.invoice_pdf import PdfTemplate
from dueflow.tasks.core.keys import CLIENT_STEPS, Job
from dueflow.tasks.core.money import amounts_from_minor
from dueflow.tasks.core.parameters import DunningStart, RunParameters, Statements
from dueflow.tasks.core.phrasebook import DRAFTED_STEPS, Phrasebook, default_phrasebook
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.profiles import default_profile
from dueflow.tasks.core.render import (
    Composed,
    EmailLook,
    compose_dunning_emails,
    compose_renewal_alerts,
    stored_drafts,
)
from dueflow.tasks.core.renewal_rule import (
    due_renewal_alerts,
    renewal_alerts_for,
    renewal_window,
    settled_apart,
    with_settled,
)
from dueflow.tasks.core.statements import compose_statements, statement_keys
from dueflow.tasks.core.tone import FREE_TEXT_SOURCE, Draft, Fallback, payment_history_frame

Extracted = dict[str, pd.DataFrame]


class NightJob(ABC):
    """One job of a night: its rows, its rule, its emails."""

    name: ClassVar[Job]
    source: ClassVar[str]  # the source table: quarantined rows are reported as SOURCE/ID
    label: ClassVar[str]  # in task names: extract-renewals, decide-dunning
    plans: ClassVar[bool] = False  # its emails carry a planned paragraph (`plan`)

    @abstractmethod
    def extract(self, store: Store, as_of: date) -> Extracted:
        """The source rows that can be due on `as_of`, and the ledger's history of them."""

    @abstractmethod
    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        """What is due on `as_of` (tasks/core/decide.py), and what is quarantined."""

    def plan(self, winners: pd.DataFrame, store: Store, as_of: date, ask_model: bool = True) -> list[Draft]:
        """The planned paragraphs of the winners' emails (none for most jobs)."""
        return []

    def together(self, winners: pd.DataFrame) -> pd.Series:
        """Per winner, the email it goes in with others (rows with one value are rendered in
        one chunk), NA for an email of its own: every row, for most jobs."""
        return pd.Series(pd.NA, index=winners.index, dtype="string")

    def plan_again(self, rows: pd.DataFrame, due: pd.DataFrame, store: Store,
                   as_of: date) -> dict[str, Draft]:
        """The paragraphs of ledger rows rendered again (`due`: decided again from `rows`):
        the one each row stored, or a plan made now (none for most jobs)."""
        return {}

    @abstractmethod
    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        """The winners' emails; a row that cannot be rendered is a failure with its reason."""

    @abstractmethod
    def reread(self, store: Store, rows: pd.DataFrame, as_of: date) -> Extracted:
        """The source rows of ledger rows (key, subject_id, …) as they are now, by id (an
        invoice with its payments up to `as_of`)."""

    @abstractmethod
    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        """Ledger rows decided again from `reread`'s rows, for the night they were reserved."""

    def render_again(self, store: Store, rows: pd.DataFrame, as_of: date) -> Composed:
        """Messages for ledger rows rendered again from their source rows as they are now:
        rows whose run died before storing one, and failed rows a run retries. A paragraph
        planned for a row stays (G7); a row without one is planned now (the model is only
        asked for keys a run just reserved)."""
        extracted = self.reread(store, rows, as_of)
        decision = self.decide_again(extracted, rows, as_of)
        drafts = self.plan_again(rows, decision.due, store, as_of)
        return self.compose(decision.due, extracted, as_of, drafts) + Composed(failures=[
            (key, f"could not render the email: {reason}") for key, reason in zip(
                decision.quarantined["source_id"], decision.quarantined["reason"], strict=True)])


@dataclass(frozen=True)
class RenewalJob(NightJob):
    """Renewal alerts to contract owners before a contract renews."""

    name: ClassVar[Job] = Job.RENEWAL
    source: ClassVar[str] = "contracts"
    label: ClassVar[str] = "renewals"

    leads: Sequence[int]
    locale: str
    sender: Mailbox
    look: EmailLook | None = None
    calendar: BusinessCalendar | None = None  # alerts wait for business days (None: any day)
    timezone: str = "UTC"  # the business zone a renewal date with an offset is read in

    def extract(self, store: Store, as_of: date) -> Extracted:
        start, end = renewal_window(as_of, self.leads, self.calendar)
        # Rows the ledger already settles come with settled_lead set and are not decided
        # again; the history is read only for the others (docs/performance.md), from the
        # window's start: a renewal that fell on the closed days just past is alerted
        # tonight, and its cycle's history must come along.
        contracts = store.sources.renewal_candidates(as_of, start, end, self.leads)
        return {"contracts": amounts_from_minor(contracts),
                "history": store.ledger.renewal_history(contracts, start, self.timezone)}

    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        contracts, settled = settled_apart(extracted["contracts"])
        return with_settled(due_renewal_alerts(contracts, extracted["history"], as_of, self.leads,
                                               self.calendar, self.timezone), settled, as_of, self.timezone)

    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        return compose_renewal_alerts(winners, self.locale, self.sender, self.look)

    def reread(self, store: Store, rows: pd.DataFrame, as_of: date) -> Extracted:
        ids = rows["subject_id"].unique().tolist()
        return {"contracts": amounts_from_minor(store.sources.by_id("contracts", ids))}

    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        return renewal_alerts_for(extracted["contracts"], rows, as_of, self.timezone)


@dataclass(frozen=True)
class DunningJob(NightJob):
    """Reminders for unpaid invoices, then an escalation to a colleague."""

    name: ClassVar[Job] = Job.DUNNING
    source: ClassVar[str] = "invoices"
    label: ClassVar[str] = "dunning"
    plans: ClassVar[bool] = True

    delays: Sequence[int]
    start: DunningStart
    timezone: str
    escalation_to: str | None
    sender: Mailbox
    look: EmailLook | None = None
    llm: LLMConfig | None = None
    phrasebook: Phrasebook = field(default_factory=default_phrasebook)  # the reminders' reviewed sentences
    invoice_pdf: PdfTemplate | None = None  # DUEFLOW_INVOICE_PDF: the PDF each reminder carries
    rules: DunningRules | None = None  # profiles, calendar, minimums (None: the parameters alone)
    statements: Statements = Statements.OFF  # DUEFLOW_STATEMENTS: a client's emails of a night as one

    def _bounds(self) -> tuple[tuple[int, ...], str]:
        """The shortest delays of every profile, and the start they count from ('any' when
        profiles differ): the margin sql/dunning_candidates reads with."""
        profiles = self.rules.profiles if self.rules else None
        if profiles is None:
            return tuple(self.delays), self.start
        starts = profiles.starts()
        return profiles.shortest_delays(), next(iter(starts)) if len(starts) == 1 else "any"

    def candidates_start(self) -> str:
        """What the night's candidates are read by: 'sent', 'due' or 'any' (_bounds)."""
        return self._bounds()[1]

    def extract(self, store: Store, as_of: date) -> Extracted:
        """Tonight's share of `extract_all`: the invoices whose next step may be due
        (sql/dunning_candidates), and only their clients and history. What a night decides
        is the same (tests/integration/test_dunning_candidates.py)."""
        delays, start = self._bounds()
        last_start = as_of - timedelta(days=delays[0])  # the latest start whose first step is due
        invoices = store.sources.dunning_candidates({
            "start": start, "start_by": (last_start + timedelta(days=1)).isoformat(),
            "start_by_text": (last_start + timedelta(days=3)).isoformat(),
            "after_first_by": (as_of - timedelta(days=delays[1])).isoformat(),
            "after_second_by": (as_of - timedelta(days=delays[2])).isoformat(),
            "hold_as_of": as_of.isoformat(), "as_of": as_of.isoformat()}, self.timezone)

        def distinct(column: str) -> list[str]:
            return invoices[column].dropna().astype(str).unique().tolist()

        return {"invoices": amounts_from_minor(invoices),
                "clients": store.sources.by_id("clients", distinct("client_id")),
                "history": store.ledger.dunning_history(distinct("id"))}

    @staticmethod
    def extract_all(store: Store, as_of: date | None = None) -> Extracted:
        """Every open invoice, their clients, and the dunning steps already in the ledger for
        them, whatever the night (the forecast looks at the nights ahead); payments up to
        `as_of` (None: every one recorded)."""
        invoices = store.sources.every("invoices", as_of)
        ids = invoices["id"].dropna().astype(str).unique().tolist()
        return {"invoices": amounts_from_minor(invoices), "clients": store.sources.every("clients"),
                "history": store.ledger.dunning_history(ids)}

    def decide(self, extracted: Extracted, as_of: date) -> Decision:
        return due_dunning_steps(extracted["invoices"], extracted["clients"], extracted["history"], as_of,
                                 self.delays, self.timezone, self.escalation_to, self.start, self.rules)

    def plan(self, winners: pd.DataFrame, store: Store, as_of: date, ask_model: bool = True) -> list[Draft]:
        """The paragraph of each REMINDED_1/2 among `winners` (G7): dueflow's plan from the
        client's payment history, and the model's where one is configured and its answer is
        a valid plan. Planning happens after reservation: the model is only ever asked
        about keys a run won (`ask_model`), once, and the paragraph is stored before
        sending; a retry resends the stored paragraph."""
        # A statement's rows carry no paragraph (tasks/core/statements.py): nobody is asked.
        reminders = winners[winners["step"].isin(DRAFTED_STEPS).to_numpy()
                            & statement_keys(winners, self.statements).isna().to_numpy()]
        if reminders.empty:
            return []
        # Through the same text reading as the extract: no value of a source column can
        # raise here where the extract would have quarantined its row.
        clients = reminders["client_id"].dropna().astype(str).unique().tolist()
        history = payment_history_frame(store.sources.client_payment_history(clients), self.timezone)
        return plan_paragraphs(reminders, history, as_of, self.phrasebook, self.llm, ask_model)

    def together(self, winners: pd.DataFrame) -> pd.Series:
        """A statement's rows (tasks/core/statements.py): its carrier's key."""
        return statement_keys(winners, self.statements)

    def plan_again(self, rows: pd.DataFrame, due: pd.DataFrame, store: Store,
                   as_of: date) -> dict[str, Draft]:
        kept = stored_drafts(rows)
        fresh = due[~due["key"].isin(list(kept))]
        free_text = set(rows.loc[rows["draft_source"].astype("string").eq(FREE_TEXT_SOURCE).fillna(False)
                                 .to_numpy(), "key"])
        planned = {d.key: replace(d, fallback=Fallback.FREE_TEXT) if d.key in free_text and d.fallback else d
                   for d in self.plan(fresh, store, as_of, ask_model=False)}
        return planned | kept

    def compose(self, winners: pd.DataFrame, extracted: Extracted, as_of: date,
                drafts: dict[str, Draft]) -> Composed:
        # The invoice PDF each reminder carries, checked and hashed now: its size and SHA-256
        # are stored with the message (G2) and the file must still match when it is sent.
        due = attach_invoices(winners, self.invoice_pdf)
        carriers = statement_keys(due, self.statements)
        alone = carriers.isna().to_numpy()
        history = extracted["history"]
        composed = compose_dunning_emails(due[alone], history, self.sender, drafts, as_of, self.look)
        if not alone.all():
            composed += compose_statements(due[~alone], carriers[~alone], history, self.sender, as_of,
                                           self.look)
        return with_owed_states(composed, winners)

    def reread(self, store: Store, rows: pd.DataFrame, as_of: date) -> Extracted:
        ids = rows["subject_id"].unique().tolist()
        invoices = amounts_from_minor(store.sources.by_id("invoices", ids, as_of))
        clients = store.sources.by_id("clients", invoices["client_id"].dropna().astype(str).unique().tolist())
        return {"invoices": invoices, "clients": clients, "history": store.ledger.dunning_history(ids)}

    def decide_again(self, extracted: Extracted, rows: pd.DataFrame, as_of: date) -> Decision:
        return dunning_steps_for(extracted["invoices"], extracted["clients"], rows, as_of, self.timezone,
                                 self.escalation_to, self.rules.profiles if self.rules else None, self.rules)


def with_owed_states(composed: Composed, due: pd.DataFrame) -> Composed:
    """Each message with what the amount it states was read from (the due row's
    payment_state), stored beside it: a payment recorded before it is claimed is noticed
    (tasks/night.py: restate_owed)."""
    if "payment_state" not in due or not composed.emails:
        return composed
    state = due["payment_state"].astype(object)
    states = dict(zip(due["key"], state.where(state.notna(), None), strict=True))
    return replace(composed, emails=[replace(e, owed_state=states.get(e.key)) for e in composed.emails])


def attach_invoices(due: pd.DataFrame, template: PdfTemplate | None) -> pd.DataFrame:
    """Dunning rows with their invoice PDFs checked and hashed (tasks/adapters/invoice_files):
    the reminders to the client carry it; the escalation, to a colleague, does not."""
    if due.empty or template is None:
        return due
    return with_invoice_pdfs(due, template, reminders=due["step"].isin(list(CLIENT_STEPS)))


def night_jobs(settings: Settings, params: RunParameters,
               message_id_key: str = "") -> tuple[RenewalJob, DunningJob]:
    """A night's jobs, in the order it runs them, with its settings and parameters; their
    Message-IDs keyed with the database's secret (empty: a check or a preview, which sends
    nothing)."""
    sender, look = settings.sender(), replace(settings.email_look(), message_id_key=message_id_key)
    calendar = settings.calendar()
    any_day = settings.with_parameters(renewal_on_any_day=params.renewal_on_any_day).renewal_on_any_day
    return (RenewalJob(params.leads, params.renewal_locale, sender, look, None if any_day else calendar,
                       settings.timezone),
            DunningJob(params.delays, params.dunning_start, settings.timezone, settings.escalation_address(),
                       sender, look, settings.llm, settings.phrasebook(), settings.invoice_pdf_template(),
                       dunning_rules(settings, params.delays, params.dunning_start, params.delay_unit,
                                     calendar), Statements(settings.statements)))


def dunning_rules(settings: Settings, delays: Sequence[int], start: DunningStart, unit: str,
                  calendar: BusinessCalendar | None) -> DunningRules:
    """The profiles (over the run's parameters, the default profile) and minimums the
    settings give, with the calendar read from them once (`settings.calendar()`)."""
    default = default_profile(delays, start, unit, settings.escalation_address())
    return DunningRules(settings.profiles(default), calendar, settings.minimums(), settings.rates())
