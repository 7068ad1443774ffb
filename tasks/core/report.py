"""Report: the run's summary object, its text form, and its Prefect artifacts."""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import date
from typing import Any

from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import DunningStep, parse_keys, source_row_keys
from dueflow.tasks.core.money import money_texts
from dueflow.tasks.core.statuses import ATTENTION_ORDER, FAILED_ROWS, NEEDS_ATTENTION, RowStatus
from dueflow.tasks.core.text import wrapped_table
from dueflow.tasks.core.tone import Draft, Fallback, PlanSource
from dueflow.tasks.core.vocabulary import OUTCOMES, ledger_outcomes, todo, todos

ROW_COLUMNS = ("job", "key", "recipient", "status", "detail", "retry", "retry_after")
# What a person knows a key by: the client or vendor, the contract or invoice, the amount
# (a number) in its currency, the date that matters (renewal or due date), and the
# email's subject. A quarantined row's reference says what the source row is.
FACT_COLUMNS = ("key", "party", "reference", "amount", "currency", "date", "subject")
# RunSummary.rows: one typed frame a notebook filters and sums (docs/operations.md,
# "The run's rows in a notebook").
SUMMARY_TYPES = {"job": "string", "key": "string", "step": "string", "status": "string", "party": "string",
                 "reference": "string", "subject": "string", "amount": "Float64", "currency": "string",
                 "date": "datetime64[ns]", "recipient": "string", "detail": "string", "retry": "bool",
                 "retry_after": "datetime64[ns, UTC]"}
SUMMARY_COLUMNS = tuple(SUMMARY_TYPES)
# The table artifact: what a person scans first (status and what to do about it, who, what,
# amount, date), then why, the email's subject, and the ledger's words.
TABLE_COLUMNS = ("status", "what to do", "who", "what", "amount", "date", "detail", "subject", "job", "step",
                 "key")


def key_rows(job: str | pd.Series, frame: pd.DataFrame, status: RowStatus | pd.Series | Sequence[RowStatus],
             detail: str | Mapping[str, str] | pd.Series | Sequence[str | None],
             retry: bool = False, retry_after: Sequence[object] | None = None) -> pd.DataFrame:
    """Summary rows for the keys of `frame` (key, recipient); `detail` is one text for all,
    a text per key, or a Series aligned with `frame`; `retry_after`, when a later run
    retries a failed key. The one place rows are made."""
    if isinstance(detail, Mapping):
        detail = frame["key"].map(detail)
    return pd.DataFrame({"job": job, "key": frame["key"], "recipient": frame["recipient"],
                         "status": status, "detail": detail, "retry": retry,
                         "retry_after": pd.NaT if retry_after is None else list(retry_after)},
                        index=frame.index).reindex(columns=ROW_COLUMNS)


def bounced_rows(ledger: pd.DataFrame) -> pd.DataFrame:
    """Summary rows for the ledger's bounced rows (key, job, recipient, error): listed by
    every run until an operator settles them, as pending rows are."""
    if ledger.empty:
        return no_rows()
    return key_rows(ledger["job"], ledger, RowStatus.BOUNCED, ledger["error"].astype("string"))


def no_rows() -> pd.DataFrame:
    return pd.DataFrame(columns=list(ROW_COLUMNS))


def concat_rows(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    kept = [part for part in parts if not part.empty]
    return pd.concat(kept, ignore_index=True) if kept else no_rows()
COUNT_NAMES = ("due", "won", "already_handled", "retried", "sent", "failed", "failed_permanently", "pending",
               "not_sent",
               "quarantined", "deferred", "adopted", "no_longer_due", "failed_earlier",
               "pending_earlier", "bounced", "below_minimum")
_COUNTED = {"sent": RowStatus.SENT, "failed": FAILED_ROWS, "failed_permanently": RowStatus.FAILED_PERMANENTLY,
            "pending": RowStatus.PENDING,
            "not_sent": RowStatus.NOT_SENT, "quarantined": RowStatus.QUARANTINED,
            "deferred": RowStatus.DEFERRED, "adopted": RowStatus.ADOPTED,
            "no_longer_due": RowStatus.NO_LONGER_DUE, "failed_earlier": RowStatus.FAILED_EARLIER,
            "pending_earlier": RowStatus.PENDING_EARLIER, "bounced": RowStatus.BOUNCED,
            "below_minimum": RowStatus.SKIPPED}
# Statuses of a key this run reserved (or would have, in a dry run).
_WON = (RowStatus.SENT, *FAILED_ROWS, RowStatus.PENDING, RowStatus.NOT_SENT, RowStatus.WOULD_SEND)


@dataclass
class RunSummary:
    """What one run did. `rows` has one row per key or bad source row it touched, typed
    (SUMMARY_TYPES): job, key, status (a `RowStatus`: sent, failed, pending, not sent,
    quarantined, already handled, …), party (the client or vendor), reference (the
    contract or invoice; for a quarantined row, what the source row is), subject, amount
    (a number) and currency, date (the renewal or due date), recipient, detail (SMTP
    reply, error or quarantine reason) and retry (True for an earlier row attempted
    again). Keys handled by earlier runs, rows of earlier runs retried tonight and bounced
    rows carry no party, amount or date (the night reads only what its emails need)."""

    as_of: date
    dry_run: bool
    flow_run_id: str | None
    due: int = 0
    won: int = 0
    already_handled: int = 0  # sent or adopted by earlier runs
    retried: int = 0  # earlier rows attempted again this run (counted in sent/failed/pending)
    sent: int = 0
    failed: int = 0  # all failed, permanently or not
    failed_permanently: int = 0  # of `failed`: refused for good (5xx), not retried to the same address
    pending: int = 0  # handed to SMTP, outcome unknown: an operator settles them
    not_sent: int = 0  # surely never handed to SMTP (interrupted, ledger lost): a later run sends them
    quarantined: int = 0
    deferred: int = 0  # due but held back by the send cap: a later run picks them up
    adopted: int = 0  # recorded as handled without sending (adopt mode)
    no_longer_due: int = 0  # changed between extraction and reservation, or withdrawn
    failed_earlier: int = 0  # due, failed in an earlier run, not retried tonight
    pending_earlier: int = 0  # due, an earlier attempt's outcome still unknown
    below_minimum: int = 0  # due invoices skipped: below DUEFLOW_DUNNING_MINIMUM (not quarantined)
    ledger_pending: int = 0  # whole ledger: handed to SMTP, outcome unknown — an operator's
    ledger_failed: int = 0  # whole ledger: failed, permanently or not
    ledger_failed_permanently: int = 0  # of ledger_failed: refused for good, not retried to the same address
    ledger_unsent: int = 0  # whole ledger: never handed to SMTP — the next run sends them
    # Bounced rows of the whole ledger (accepted, then reported undeliverable), each listed
    # in `rows` as RowStatus.BOUNCED until an operator settles it (docs/bounces.md).
    bounced: int = 0
    ledger_bounced: int = 0
    # Settled rows whose bodies and addresses retention pruned tonight (DUEFLOW_RETAIN_BODIES_DAYS).
    pruned: int = 0
    skipped: str | None = None  # why the run did nothing (another run held the lock)
    # A night that looked wrong (tasks/core/guard.py): who approved it, and what they chose;
    # or why nothing went (no one answered in time).
    approval: str | None = None
    unapproved: str | None = None
    warnings: list[str] = field(default_factory=list)  # e.g. the database lost after the work
    rows: pd.DataFrame = field(default_factory=lambda: typed_rows(no_rows()))
    unsettled: pd.DataFrame = field(default_factory=pd.DataFrame)  # oldest pending/failed keys
    # Reminder paragraphs (`drafts_frame`): key, paragraph, source (model, rule, template),
    # tone, sentences, client, why not the model's plan, tokens.
    drafts: pd.DataFrame = field(default_factory=pd.DataFrame)

    def paragraph_sources(self) -> dict[str, int]:
        """Who planned the night's reminder paragraphs (core.tone.PlanSource), and the
        tokens the model used."""
        d = self.drafts
        counts = {source.value: 0 for source in PlanSource} | {"prompt_tokens": 0, "completion_tokens": 0}
        if d.empty:
            return counts
        return counts | {str(k): int(v) for k, v in d["source"].value_counts().items()} | {
            "prompt_tokens": int(d["prompt_tokens"].sum()),
            "completion_tokens": int(d["completion_tokens"].sum())}

    def fallbacks(self) -> list[tuple[str, int]]:
        """Why paragraphs are not the model's plan (core.tone.Fallback), most frequent first."""
        d = self.drafts
        if d.empty:
            return []
        counts = d["fallback"].dropna().value_counts()
        return [(str(reason), int(n)) for reason, n in counts.items()]

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNT_NAMES}

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # Prefect persists the summary as the flow run's result: pickled, then base64 of the
        # whole, several copies alive at once — 100 MB at the peak of a first night of
        # 88,000 keys. Compressed (several-fold) as the pickler writes its 64 KB frames, the
        # whole pickle is never held at once.
        deflated = _Deflated()
        pickle.Pickler(deflated, protocol=5).dump({f.name: getattr(self, f.name) for f in fields(self)})
        return _restore_summary, (deflated.finish(),)

    def _below(self) -> str:
        return f", {self.below_minimum} skipped below the minimum" if self.below_minimum else ""

    def headline(self) -> str:
        if self.skipped:
            return f"Run for {self.as_of} did nothing: {self.skipped}."
        if self.unapproved:
            return f"Nothing sent for {self.as_of}: {self.unapproved}."
        if self.adopted:
            return (f"Adopted {self.adopted} due email(s) for {self.as_of} as already handled;"
                    " nothing was sent.")
        # Held back by the send cap: said in every headline, never hidden behind "nothing new".
        deferred = (f"{self.deferred} deferred by the send cap (a later run sends them)"
                    if self.deferred else "")
        if self.dry_run:
            return (f"Dry run for {self.as_of}: {self.won} email(s) would be sent"
                    f"{', ' + deferred if deferred else ''}, {self.already_handled} already handled,"
                    f" {self.quarantined} quarantined{self._below()}.")
        earlier = "".join([
            f", {self.failed_earlier} failed earlier" if self.failed_earlier else "",
            f", {self.pending_earlier} pending since an earlier run" if self.pending_earlier else ""])
        if self.won == 0 and self.retried == 0:
            opening = (f"Nothing sent for {self.as_of}: {deferred}, " if deferred
                       else f"Nothing new to send for {self.as_of}: ")
            return (f"{opening}{self.already_handled} due email(s) were "
                    f"already handled by earlier runs{earlier}, {self.quarantined} row(s)"
                    f" quarantined{self._below()}.")
        retried = f" (and {self.retried} retried)" if self.retried else ""
        retried += f"; {deferred}" if deferred else ""
        unsent = f", {self.not_sent} not sent (a later run sends them)" if self.not_sent else ""
        permanent = f" ({self.failed_permanently} permanently)" if self.failed_permanently else ""
        return (f"Run for {self.as_of}: {self.sent} sent, {self.failed} failed{permanent},"
                f" {self.pending} pending"
                f"{unsent} of {self.won} new{retried}; {self.already_handled} already handled{earlier}, "
                f"{self.quarantined} quarantined{self._below()}.")


class NeedsAttention(Exception):
    """What the Failed "Needs attention" state of a run carries (DUEFLOW_ATTENTION_STATE=failed,
    the default): emails wait for a person. Its message is the headline and `summary` the
    RunSummary — calling the flow in Python raises it; `summary_of(state)` reads either kind
    of final state."""

    def __init__(self, headline: str, summary: RunSummary) -> None:
        super().__init__(headline)
        self.summary = summary

    def __reduce__(self) -> tuple[Any, tuple[str, RunSummary]]:
        return NeedsAttention, (str(self), self.summary)


def summary_of(outcome: Any) -> RunSummary:
    """The RunSummary of a nightly run's final state (Completed, or Failed "Needs
    attention"), or of what calling it raised or returned; anything else a run failed with
    is raised as it was (`run_deployment(...).state`, `nightly_alerts(return_state=True)`)."""
    if isinstance(outcome, RunSummary):
        return outcome
    if isinstance(outcome, NeedsAttention):
        return outcome.summary
    if hasattr(outcome, "result"):  # a Prefect State
        result = outcome.result(raise_on_failure=False)
        if isinstance(result, RunSummary | NeedsAttention):
            return summary_of(result)
        outcome.result()  # raises what the run failed with
    raise TypeError(f"not the outcome of a nightly run: {type(outcome).__name__}")


class _Deflated:
    """A write-only file whose content is compressed as it is written."""

    def __init__(self) -> None:
        self._compressor = zlib.compressobj(1)
        self._parts: list[bytes] = []

    def write(self, data: bytes | pickle.PickleBuffer) -> int:
        view = memoryview(data)  # protocol 5 hands large arrays over as PickleBuffers
        self._parts.append(self._compressor.compress(view))
        return view.nbytes

    def finish(self) -> bytes:
        return b"".join([*self._parts, self._compressor.flush()])


def _restore_summary(blob: bytes) -> RunSummary:
    saved = pickle.loads(zlib.decompress(blob))
    known = {f.name for f in fields(RunSummary)}
    # A result persisted by an earlier version may hold fields since merged away (`facts`).
    return RunSummary(**{name: value for name, value in saved.items() if name in known})


def summarize(
    as_of: date,
    dry_run: bool,
    flow_run_id: str | None,
    rows: pd.DataFrame,
    ledger_counts: dict[str, int],
    unsettled: pd.DataFrame | None = None,
    drafts: pd.DataFrame | None = None,
    warnings: list[str] | None = None,
    facts: pd.DataFrame | None = None,
) -> RunSummary:
    """Counts derived from this run's rows (see RunSummary.rows)."""
    status = rows["status"]
    retry = rows["retry"].fillna(False).astype(bool)
    handled = int((status == RowStatus.ALREADY_HANDLED).sum())
    new = int((status.isin(_WON) & ~retry).sum())
    counted: dict[str, Any] = {name: int(status.isin(value if isinstance(value, tuple) else (value,)).sum())
                               for name, value in _COUNTED.items()}
    return RunSummary(
        as_of=as_of,
        dry_run=dry_run,
        flow_run_id=flow_run_id,
        due=new + handled + counted["deferred"] + counted["adopted"] + counted["failed_earlier"]
        + counted["pending_earlier"],
        won=new,
        already_handled=handled,
        retried=int(retry.sum()),
        **counted,
        ledger_pending=ledger_counts.get("pending", 0),
        ledger_failed=ledger_counts.get("failed", 0) + ledger_counts.get("permanent", 0),
        ledger_failed_permanently=ledger_counts.get("permanent", 0),
        ledger_unsent=ledger_counts.get("unsent", 0),
        ledger_bounced=ledger_counts.get("bounced", 0),
        warnings=list(warnings or []),
        rows=typed_rows(rows, facts),
        unsettled=pd.DataFrame() if unsettled is None else unsettled,
        drafts=pd.DataFrame() if drafts is None else drafts,
    )


def typed_rows(rows: pd.DataFrame, facts: pd.DataFrame | None = None) -> pd.DataFrame:
    """The run's rows with what a person knows each key by (`facts_of`), as one frame of
    SUMMARY_TYPES: party, amount as a number with its currency, dates as dates."""
    rows = rows.reset_index(drop=True)
    if facts is not None and not facts.empty:
        known = facts.drop_duplicates("key").set_index("key").reindex(columns=[
            c for c in FACT_COLUMNS if c != "key"])
        rows = rows.join(known, on="key")
    rows = rows.reindex(columns=SUMMARY_COLUMNS)
    rows["step"] = parse_keys(rows["key"])["step"]  # a renewal's lead (30d) or a dunning step
    rows["retry"] = rows["retry"].fillna(False).astype(bool)
    rows["retry_after"] = pd.to_datetime(rows["retry_after"], errors="coerce", utc=True)
    rows["amount"] = pd.to_numeric(rows["amount"], errors="coerce")
    rows["date"] = pd.to_datetime(rows["date"], errors="coerce")
    return rows.astype(SUMMARY_TYPES)


DRAFT_COLUMNS = ["key", "paragraph", "source", "tone", "sentences", "client", "fallback", "note",
                 "prompt_tokens", "completion_tokens"]


def drafts_frame(drafts: Sequence[Draft]) -> pd.DataFrame:
    """The night's reminder paragraphs (core.tone.Draft) as a DataFrame: who planned each,
    its tone and sentence ids, the client as dueflow read it, and why not the model's plan."""
    return pd.DataFrame([(d.key, d.paragraph, d.source.value, d.plan.tone.value if d.plan else None,
                          " ".join(d.plan.sentences) if d.plan else None,
                          d.relationship.value if d.relationship else None,
                          d.fallback.value if d.fallback else None, d.note, d.prompt_tokens,
                          d.completion_tokens)
                         for d in drafts], columns=DRAFT_COLUMNS)


def paragraph_section(summary: RunSummary) -> list[str]:
    """The artifact's account of the night's reminder paragraphs: who planned how many, and
    why not the model, grouped (none when the night had no reminder)."""
    if summary.drafts.empty:
        return []
    sources = summary.paragraph_sources()
    labels = {PlanSource.MODEL: "the model (its plan, checked)",
              PlanSource.RULE: "dueflow's rule (the client's history)",
              PlanSource.TEMPLATE: "the step's template paragraph"}
    lines = ["## Reminder paragraphs", "", "| planned by | paragraphs |", "|---|---|",
             *[f"| {labels[source]} | {sources[source.value]} |" for source in PlanSource], ""]
    if sources["prompt_tokens"] or sources["completion_tokens"]:
        lines += [f"Model tokens: {sources['prompt_tokens']} prompt"
                  f" + {sources['completion_tokens']} completion.", ""]
    reasons = summary.fallbacks()
    if reasons:
        lines += ["| why not the model's plan | paragraphs |", "|---|---|",
                  *[f"| {_cell(reason)} | {n} |" for reason, n in reasons], ""]
    return lines


def paragraph_lines(summary: RunSummary) -> list[str]:
    """What the CLI and the summary artifact say of the night's reminder paragraphs: who
    planned them and, grouped, why not the model (also when every answer was refused)."""
    if summary.drafts.empty:
        return []
    sources = summary.paragraph_sources()
    reasons = summary.fallbacks()
    off = reasons == [(Fallback.MODEL_OFF.value, len(summary.drafts))]
    if off:
        line = (f"Reminder paragraphs: {sources['rule']} planned by dueflow's rule from each client's payment"
                " history (no model configured)")
        return [line + (f", {sources['template']} template paragraph(s)." if sources["template"] else ".")]
    line = (f"Reminder paragraphs: {sources['model']} planned by the model, {sources['rule']} by dueflow's"
            f" rule, {sources['template']} template paragraph(s)")
    if sources["prompt_tokens"] or sources["completion_tokens"]:
        line += f"; tokens {sources['prompt_tokens']} prompt + {sources['completion_tokens']} completion"
    lines = [line + "."]
    if reasons:
        lines.append("Not the model's plan: " + "; ".join(f"{n} {reason}" for reason, n in reasons) + ".")
    return lines


def facts_of(job: str, due: pd.DataFrame, subjects: Mapping[str, str],
             quarantined: pd.DataFrame | None = None, source: str = "") -> pd.DataFrame:
    """FACT_COLUMNS for a job's due rows (decide's columns) and the subjects rendered, and
    for its quarantined rows (`source_id`, `party`, `reference`: what the source row is),
    keyed as the summary names them (`{source}/{id}`)."""
    parts = []
    if not due.empty:
        renewal = job == "renewal"
        party = due["vendor"] if renewal else due["client_name"]
        reference = due["title"] if renewal else "invoice " + due["number"].astype("string")
        day = due["renewal_date"] if renewal else due["due_date"]
        parts.append(pd.DataFrame({
            "key": due["key"], "party": party.astype("string"), "reference": reference.astype("string"),
            "amount": pd.to_numeric(due["amount"], errors="coerce"),
            "currency": due["currency"].astype("string"), "date": pd.to_datetime(day, errors="coerce"),
            "subject": due["key"].map(subjects).astype("string"),
        }))
    if quarantined is not None and not quarantined.empty and "reference" in quarantined:
        parts.append(pd.DataFrame({"key": source_row_keys(source, quarantined["source_id"].astype("string")),
                                   "party": quarantined["party"].astype("string").mask(
                                       quarantined["party"] == ""),
                                   "reference": quarantined["reference"].astype("string")}))
    kept = [part for part in parts if not part.empty]
    return (pd.concat(kept, ignore_index=True) if kept else pd.DataFrame()).reindex(columns=FACT_COLUMNS)


def table_rows(summary: RunSummary, limit: int) -> pd.DataFrame:
    """The table artifact: what needs attention first, in the words of TABLE_COLUMNS. Keys
    already handled by earlier runs are counted, not listed (tens of thousands a night)."""
    rows = summary.rows
    return shown_rows(attention_first(rows[rows["status"] != RowStatus.ALREADY_HANDLED]).head(limit))


def shown_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Summary rows as a person reads them (TABLE_COLUMNS): who, what — the contract or
    invoice, or what a quarantined source row is — money as the emails write it, the date;
    None where nothing is known. Short columns first: the subject (which repeats who, what
    and when) comes after the detail."""
    rows = typed_rows(rows).reset_index(drop=True)
    what = rows["reference"].fillna(rows["subject"]).fillna(rows["key"])
    detail = rows["detail"].fillna("")
    detail = detail.mask(rows["retry"], "retry of an earlier run: " + detail)
    table = pd.DataFrame({
        "status": rows["status"], "what to do": todos(rows["status"], rows["key"], rows["retry_after"]),
        "who": rows["party"], "what": what,
        "amount": money_texts(rows["amount"], rows["currency"]).mask(lambda m: m == ""),
        "date": rows["date"].dt.strftime("%Y-%m-%d"), "detail": detail, "subject": rows["subject"],
        "job": rows["job"], "step": rows["step"],
        "key": rows["key"],
    }).reindex(columns=TABLE_COLUMNS)
    return table.astype(object).where(table.notna(), None)


def _said(status: RowStatus) -> str:
    """A count's label in the vocabulary: the status word and what it means."""
    return f"{OUTCOMES[status].status} — {OUTCOMES[status].meaning}"


# The counts of the markdown summary, in the words an operator uses; zeros are left out.
# `failed` is said as its two outcomes (retried later; permanently), never as one.
COUNT_LABELS = {
    "due": "due tonight",
    "won": "new emails this run",
    "sent": _said(RowStatus.SENT),
    "retried": "earlier emails attempted again",
    "failed": _said(RowStatus.FAILED),
    "failed_permanently": _said(RowStatus.FAILED_PERMANENTLY),
    "pending": _said(RowStatus.PENDING),
    "not_sent": _said(RowStatus.NOT_SENT) + " (the next run sends them)",
    "quarantined": _said(RowStatus.QUARANTINED),
    "below_minimum": "invoices skipped below the minimum (DUEFLOW_DUNNING_MINIMUM)",
    "deferred": "held back by the send cap (a later run sends them)",
    "adopted": "recorded as handled without sending (adopt)",
    "no_longer_due": "no longer due when reserved or retried",
    "failed_earlier": "failed in an earlier run, not retried tonight (the table says why)",
    "pending_earlier": "pending since an earlier run",
    "already_handled": "already handled by earlier runs",
    "bounced": _said(RowStatus.BOUNCED) + " (all runs)",
}


def shown_counts(summary: RunSummary) -> dict[str, int]:
    """The counts as the summary says them: `failed` only for those retried later."""
    counts = summary.counts()
    counts["failed"] -= counts["failed_permanently"]
    return counts


def escalations(summary: RunSummary) -> int:
    """Escalations this run sent: each asks a colleague to act."""
    rows = summary.rows
    overdue = parse_keys(rows["key"])["step"] == DunningStep.OVERDUE
    return int((overdue.fillna(False) & (rows["status"] == RowStatus.SENT)).sum())


def needs_person(summary: RunSummary) -> bool:
    """Whether the run ended with something a person must look at (the event's trigger)."""
    return bool(summary.failed or summary.pending or summary.not_sent or summary.quarantined
                or summary.bounced or escalations(summary) or summary.warnings or summary.unapproved)


def emails_need_person(summary: RunSummary) -> bool:
    """Whether emails wait for a person's action — failed, pending (outcome unknown) or
    bounced: the run's state is then of the Failed type (red), not Completed (green)."""
    return bool(summary.failed or summary.pending or summary.bounced or summary.unapproved)


def count_line(rows: pd.DataFrame) -> str:
    """'3 sent, 1 failed' for summary rows: the log line of a delivery."""
    counts = rows["status"].astype(str).value_counts()
    return ", ".join(f"{int(n):,} {status}" for status, n in counts.items()) or "nothing"


def extract_line(job: str, extracted: Mapping[str, pd.DataFrame]) -> str:
    """The log line of an extract: the source rows read and, apart, those whose email
    tonight is already in the ledger (read without their history), so that the decision's
    line that follows ('N already in the ledger') is not read as a contradiction."""
    parts = []
    for name, frame in extracted.items():
        if name == "history":
            parts.append(f"{len(frame):,} ledger row(s) of their earlier steps")
            continue
        settled = int(frame["settled_lead"].notna().sum()) if "settled_lead" in frame else 0
        parts.append(f"{len(frame):,} {name}" + (f" ({settled:,} with tonight's email already in the ledger)"
                                                  if settled else ""))
    return f"{job}: read " + ", ".join(parts)


def attention_level(rows: pd.DataFrame) -> int:
    """The log level of a line about these rows: WARNING when any needs a person (failed,
    pending, not sent, bounced, quarantined), so that filtering for warnings finds them."""
    import logging

    return logging.WARNING if rows["status"].isin(NEEDS_ATTENTION).any() else logging.INFO


def decision_line(decision: Any) -> str:
    """The log line of a decision (decide.Decision): due, new, handled, quarantined."""
    due, handled = len(decision.due), int(decision.due["handled"].sum()) if len(decision.due) else 0
    return (f"{due:,} due ({due - handled:,} new, {handled:,} already in the ledger), "
            f"{len(decision.quarantined):,} source row(s) quarantined")


def attention_payload(summary: RunSummary) -> dict[str, Any]:
    """The payload of the needs-attention event (docs/operations.md, "Needs attention: the
    event"): counts only, no addresses or amounts."""
    return {"as_of": summary.as_of.isoformat(), "headline": summary.headline(),
            "failed": summary.failed, "pending": summary.pending, "not_sent": summary.not_sent,
            "quarantined": summary.quarantined, "bounced": summary.bounced,
            "escalations": escalations(summary),
            "ledger_pending": summary.ledger_pending, "ledger_failed": summary.ledger_failed,
            "warnings": len(summary.warnings)}


def markdown(summary: RunSummary, limit: int = 50) -> str:
    """The markdown artifact: one headline, the counts that are not zero, what was sent,
    and what needs attention with the reason and what settles it."""
    mode = " (dry run)" if summary.dry_run else ""
    lines = [f"# dueflow — {summary.as_of}{mode}", "", summary.headline(), ""]
    if summary.approval:  # a night that looked wrong went on with a person's word
        lines += [f"The night looked wrong and went on: {_cell(summary.approval)}.", ""]
    counts: list[tuple[str, int | str]] = [(COUNT_LABELS[name], value)
                                           for name, value in shown_counts(summary).items() if value]
    counts += [(label, value) for label, value in (
        ("pending in the ledger, all runs", summary.ledger_pending),
        ("failed, retried later, in the ledger, all runs",
         summary.ledger_failed - summary.ledger_failed_permanently),
        ("failed permanently in the ledger, all runs", summary.ledger_failed_permanently),
        ("never handed to the mail server, all runs (the next run sends them)", summary.ledger_unsent),
        ("escalation(s) sent to a colleague", escalations(summary))) if value]
    lines += [*[f"- **{value}** {label}" for label, value in counts], ""] if counts else []
    lines += paragraph_section(summary)
    lines += [f"> **Warning:** {_cell(w)}" for w in summary.warnings]
    listed = attention_first(summary.rows[summary.rows["status"] != RowStatus.ALREADY_HANDLED])
    attention = listed[listed["status"].isin(NEEDS_ATTENTION)]
    if not attention.empty:
        # What to do comes right after the status: the table stays readable at 1,400 px,
        # the long SMTP reply last.
        lines += ["## Needs attention", "", "| status | what to do | who | what | reason |",
                  "|---|---|---|---|---|"]
        for shown in shown_rows(attention.head(limit)).to_dict("records"):
            lines.append(f"| {shown['status']} | {_wrappable(shown['what to do'])} "
                         f"| {_lines(shown['who'], 20)} | {_lines(shown['what'], 24)} "
                         f"| {_lines(_short(shown['detail']), 30)} |")
        if len(attention) > limit:
            lines.append(f"| … | `dueflow ledger` | {len(attention) - limit} more | | |")
        lines.append("")
    done = listed[listed["status"].isin((RowStatus.SENT, RowStatus.WOULD_SEND))]
    if not done.empty:
        heading = "Would be sent" if summary.dry_run else "Sent"
        lines += [f"## {heading}", "", "| who | what | amount | date | to | subject |",
                  "|---|---|---|---|---|---|"]
        first = done.head(limit).reset_index(drop=True)
        for row, to in zip(shown_rows(first).itertuples(index=False), first["recipient"], strict=True):
            lines.append(f"| {_lines(row.who, 20)} | {_lines(row.what, 24)} | {_cell(row.amount)} "
                         f"| {_cell(row.date)} | {_cell(to)} | {_lines(row.subject, 40)} |")
        if len(done) > limit:
            lines.append(f"| … | {len(done) - limit} more | | | | |")
        lines.append("")
    if not summary.unsettled.empty:
        unsettled = summary.unsettled
        outcome = ledger_outcomes(unsettled["status"], unsettled["permanent"].astype("boolean"),
                                  unsettled["sending_at"])
        lines += ["## Unsettled in the ledger (all runs, oldest first)", "",
                  "| status | what to do | key | attempts | detail |", "|---|---|---|---|---|"]
        for row, said in zip(unsettled.itertuples(index=False), outcome, strict=True):
            lines.append(f"| {said} | {_wrappable(todo(said, 'KEY'))} | `{row.key}` | {row.attempts} "
                         f"| {_lines(_short(row.error), 30)} |")
    return "\n".join(lines).rstrip() + "\n"


def _wrappable(todo: object) -> str:
    """What to do as a table cell says it: the same words, without the code marks (a
    command in them is broken into lines like the rest: `_lines`)."""
    return _lines(str(todo or "").replace("`", ""), 40)


def _lines(value: object, width: int) -> str:
    """A cell's text in lines of at most `width` characters, at spaces: the Prefect UI
    never wraps a table's cell, and a command with its key pushed the summary's table past
    1,400 px. Each line is made a safe cell first; lines are joined by <br>, which the UI
    renders (seen in a headless Chromium)."""
    import textwrap

    text = _cell(value)
    return "<br>".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)) or text


def _short(value: object, width: int = 90) -> object:
    """A long reason cut to `width` characters (the ledger keeps it whole)."""
    text = "" if value is None else str(value)
    return text if len(text) <= width else text[:width - 1] + "…"


def _cell(value: object) -> str:
    """A markdown table cell: one line, pipes escaped, missing values empty."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):  # type: ignore[call-overload]
        return ""
    return " ".join(str(value).split()).replace("|", "\\|")


def left_out(summary: RunSummary) -> list[str]:
    """What the terminal's listing of a run leaves out, and the counts its headline does
    not say, in plain words (the listing shows what this run did, not what earlier runs did)."""
    lines = []
    if summary.already_handled:
        lines.append(f"Not listed: {summary.already_handled:,} due email(s) already handled by earlier runs"
                     " (`dueflow ledger`). An invoice reminded by an earlier run is not due again until its"
                     " next step (`dueflow invoices`).")
    extra = [f"{summary.no_longer_due:,} no longer due when reserved or retried" if summary.no_longer_due
             else "",
             f"{summary.bounced:,} bounced (accepted, then reported undeliverable)" if summary.bounced
             else ""]
    if any(extra):
        lines.append("Also: " + "; ".join(e for e in extra if e) + ".")
    return lines


def attention_first(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows ordered by what an operator must look at first: pending, failed, quarantined…"""
    order = {str(s): i for i, s in enumerate(ATTENTION_ORDER)}
    rank = rows["status"].astype(str).map(order).fillna(len(order))
    return rows.assign(_rank=rank).sort_values("_rank", kind="stable").drop(columns="_rank")


def text_table(rows: pd.DataFrame, limit: int = 40) -> str:
    """A plain, aligned table of rows for the terminal, what needs attention first."""
    if rows.empty:
        return "(no rows)"
    total = len(rows)
    rows = attention_first(rows).head(limit)
    retry_after = rows.get("retry_after")
    shown = rows.assign(**{"what to do": todos(rows["status"], rows["key"], retry_after)})
    columns = ["status", "what to do", "key", "recipient", "detail"]
    if not shown["what to do"].astype(bool).any():  # a dry run, a night all sent: nothing to do
        columns.remove("what to do")
    cells = [[str(v) for v in row]
             for row in shown.loc[:, columns].astype(object).fillna("").itertuples(index=False)]
    widths: list[int | None] = ([None, 40, None, None, 50] if "what to do" in columns
                                else [None, None, None, 60])
    text = "\n".join(wrapped_table(columns, cells, widths))
    if total > limit:
        text += (f"\n… and {total - limit} more (see `dueflow ledger` and `dueflow quarantine`)")
    return text
