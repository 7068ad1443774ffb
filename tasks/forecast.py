"""Forecast: every email the coming nights would send, decided by the nightly run's own code.

For each night from `start`, the forecast extracts, decides and composes exactly as a
nightly run does — the same job objects of `tasks/jobs.py`, `RenewalJob` and `DunningJob`,
their same methods — and takes what a run would reserve as that night's emails.
It assumes that the nightly run happens every night, that every email goes out and that
nothing is paid, renewed or changed: each later night sees the ledger as it is plus what
the earlier forecast nights reserved (`core.forecast`).

It writes nothing (no ledger row, no quarantine row), sends nothing, and plans no
paragraph (the model is never asked): a reminder's subject does not depend on it. Rows
that earlier runs left in the ledger (never handed to SMTP, failed, in doubt) are not
forecast: `dueflow ledger --status pending|failed` lists them. The
methods run as plain calls: no Prefect server is needed, and the `forecast` flow
(flows/forecast.py) publishes the same frame as an artifact.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings
from dueflow.tasks.adapters.sql_store import open_sql
from dueflow.tasks.core import defaults
from dueflow.tasks.core.forecast import (
    forecast_rows,
    held_invoices,
    nights_that_would_wait,
    no_forecast_rows,
    with_reserved_renewals,
    with_sent_dunning_steps,
)
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.parameters import (
    MAX_FORECAST_DAYS,
    ParameterError,
    Statements,
    delay_unit_of,
    delays_of,
    dunning_start_of,
    forecast_days,
    forecast_start,
    leads_of,
    locale_of,
)
from dueflow.tasks.core.ports import Store
from dueflow.tasks.core.render import Composed
from dueflow.tasks.jobs import DunningJob, RenewalJob, dunning_rules

MAX_DAYS = MAX_FORECAST_DAYS


def _subjects(composed: Composed) -> dict[str, str]:
    """The subject of each rendered email, and for a row that could not be rendered the
    reason (what a dry run shows for it, and what a real run records as `failed`)."""
    return {email.key: email.subject for email in composed.emails} | dict(composed.failures)


def forecast(
    start: date | None = None,
    days: int = 7,
    *,
    settings: Settings | None = None,
    renewal_leads: Sequence[int] = defaults.RENEWAL_LEADS,
    renewal_locale: str = "en",
    dunning_delays: Sequence[int] = defaults.DUNNING_DELAYS,
    dunning_start: str | None = None,
    dunning_delay_unit: str = "calendar",
    renewal_on_any_day: bool = False,
) -> pd.DataFrame:
    """The emails each of `days` nights from `start` (default: today in DUEFLOW_TIMEZONE)
    would send, one row each: night, job, key, step, recipient, name (vendor or client),
    amount, currency, subject, and why that night (moved by closed days, and which). The
    parameters are the nightly flow's. `attrs["held"]`: the invoices held on the first
    night (held_invoices), and until when, as records."""
    settings = settings or Settings.from_env()
    try:  # the nightly flow's own checks, with the forecast's own range of nights
        days = forecast_days(days)
        leads = leads_of(renewal_leads)
        dunning_delays = delays_of(dunning_delays)
        counted_from = dunning_start_of(settings.with_parameters(dunning_start=dunning_start).dunning_start)
        renewal_locale = locale_of(renewal_locale)
        unit = delay_unit_of(dunning_delay_unit)
        start = forecast_start(start or settings.today())
    except ParameterError as exc:
        raise ConfigError(str(exc)) from None
    store = Store(*open_sql(settings))
    sender, look = settings.sender(), settings.email_look()
    calendar = settings.calendar()
    any_day = settings.with_parameters(renewal_on_any_day=renewal_on_any_day).renewal_on_any_day
    renewal = RenewalJob(leads, renewal_locale, sender, look, None if any_day else calendar,
                         settings.timezone)
    dunning = DunningJob(dunning_delays, counted_from, settings.timezone, settings.escalation_address(),
                         sender, look, llm=None,  # the LLM is never asked for a forecast
                         rules=dunning_rules(settings, dunning_delays, counted_from, unit, calendar),
                         statements=Statements(settings.statements))  # as the nights will send them

    # The dunning extraction of every open invoice: one read serves every night.
    invoices = dunning.extract_all(store)
    dunning_history = invoices["history"]
    renewals_reserved = pd.DataFrame(columns=["subject_id", "cycle", "step_rank"])
    parts: list[pd.DataFrame] = []
    for night in (start + timedelta(days=n) for n in range(days)):
        contracts = renewal.extract(store, night)
        contracts["history"] = with_reserved_renewals(contracts["history"], renewals_reserved)
        due = renewal.decide(contracts, night).to_reserve
        if not due.empty:
            composed = renewal.compose(due, contracts, night, {})
            parts.append(forecast_rows(night, renewal.name, due, due["vendor"], _subjects(composed),
                                       renewal.calendar))
            renewals_reserved = pd.concat(
                [renewals_reserved, due.loc[:, ["subject_id", "cycle", "step_rank"]]], ignore_index=True)

        extracted = invoices | {"history": dunning_history}
        due = dunning.decide(extracted, night).to_reserve
        if not due.empty:
            composed = dunning.compose(due, extracted, night, {})
            parts.append(forecast_rows(night, dunning.name, due, due["client_name"], _subjects(composed),
                                       calendar))
            dunning_history = with_sent_dunning_steps(dunning_history, due, night)
    kept = [part for part in parts if not part.empty]
    rows = pd.concat(kept, ignore_index=True) if kept else no_forecast_rows()
    # As records: pandas compares attrs when it combines frames, and a frame in them breaks that.
    rows.attrs["held"] = held_invoices(invoices["invoices"], invoices["clients"], start,
                                       settings.timezone).to_dict("records")
    # The nights that would wait for a person (issue 40): read only when one could.
    bounds = settings.guard_bounds()
    rows.attrs["waits"] = []
    busiest = 0 if rows.empty else int(rows.groupby(["night", "job"]).size().max())
    if bounds is not None and busiest > bounds.min_emails:
        recent = store.ledger.recent_nights(start, bounds.recent_nights)
        rows.attrs["waits"] = nights_that_would_wait(rows, recent, store.sources.open_invoices(), bounds)
    return rows
