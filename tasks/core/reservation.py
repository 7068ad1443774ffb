"""The reservation, the pure part: what becomes of every row a job decided, before and
after the ledger's one `INSERT … ON CONFLICT (key) DO NOTHING RETURNING` decides who
sends (docs/how-it-works.md, step 4). The I/O that performs it is `reserve` in
tasks/jobs.py: read the ledger's status of the keys already there, record the
quarantine, reserve the candidates, read the status of the keys it did not win.

Before (`plan_reservation`): bad rows are quarantined with their reason; a due row whose
key the ledger already holds is reported by what the ledger says of it (handled, failed
earlier, pending earlier); past the send cap, the least urgent wait for a later run.
After (`reservation_outcome`): a candidate this run did not win was taken by another run
(the ledger has its key) or is no longer due (the reservation's re-check of the source
row refused it); in adopt mode the winners are recorded as handled and none is sent.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from dueflow.tasks.core.decide import Decision, most_urgent_first
from dueflow.tasks.core.defaults import RETRY_MAX_ATTEMPTS
from dueflow.tasks.core.frames import pd
from dueflow.tasks.core.keys import source_row_keys
from dueflow.tasks.core.report import concat_rows, key_rows
from dueflow.tasks.core.statuses import LedgerStatus, RowStatus
from dueflow.tasks.core.text import text_or_none
from dueflow.tasks.core.vocabulary import failed_earlier_detail

NO_LONGER_DUE = ("not reserved: the source row changed after extraction (paid, paused, or its dunning"
                 " step moved)")


def already_in_ledger(decision: Decision) -> pd.DataFrame:
    """The due rows whose key the ledger already holds (their status is read to report them)."""
    return decision.due[decision.due["handled"]]


def _handled_rows(job: str, handled: pd.DataFrame, open_keys: Mapping[str, str], failed: pd.DataFrame | None,
                  max_attempts: int) -> pd.DataFrame:
    """Due rows already in the ledger, by what the ledger says of them: a failed or pending
    key is not "handled" (the summary must not say so), and a failed one says why it is
    not retried tonight (`failed`: sql/failed_rows)."""
    ledger = handled["key"].map(open_keys)
    status = ledger.map({LedgerStatus.FAILED: RowStatus.FAILED_EARLIER,
                         LedgerStatus.PENDING: RowStatus.PENDING_EARLIER}).fillna(RowStatus.ALREADY_HANDLED)
    detail = ledger.map({LedgerStatus.FAILED: "failed in an earlier run; not retried tonight"
                                              " (see `dueflow ledger --status failed`)",
                         LedgerStatus.PENDING: "handed to SMTP by an earlier run, outcome unknown"
                                               " (see `dueflow ledger --status pending`)"}
                        ).fillna("already in the ledger")
    if failed is not None and not failed.empty:
        # A failed key still due and not retried tonight: few a night, each said with its why.
        why = {row.key: failed_earlier_detail(str(row.key), bool(row.permanent), int(row.attempts),  # type: ignore[arg-type]
                                              max_attempts, row.retry_after, text_or_none(row.error))
               for row in failed.itertuples(index=False)}
        detail = handled["key"].map(why).where(ledger == LedgerStatus.FAILED, detail).fillna(detail)
    return key_rows(job, handled, status, detail)


@dataclass(frozen=True)
class ReservationPlan:
    """What a job's reservation does, decided before it touches the ledger."""

    quarantined: pd.DataFrame  # the decision's bad rows (source_id, reason), to record
    candidates: pd.DataFrame  # the due rows to reserve (most urgent first when capped)
    rows: pd.DataFrame  # the summary rows known already: quarantined, handled, deferred


def plan_reservation(job: str, source: str, decision: Decision, open_keys: Mapping[str, str],
                     send_cap: int | None, failed: pd.DataFrame | None = None,
                     max_attempts: int = RETRY_MAX_ATTEMPTS) -> ReservationPlan:
    """The plan of one job's reservation. `open_keys`: the ledger's status of the keys of
    `already_in_ledger(decision)` that are still open (pending, failed); `source`: the
    source table, quarantined rows are reported as SOURCE/ID; `failed`: the ledger's failed
    rows (sql/failed_rows), to say why a due one is not retried tonight."""
    bad = decision.quarantined
    named = pd.DataFrame({"key": source_row_keys(source, bad["source_id"]), "recipient": pd.NA})
    rows = [key_rows(job, named, RowStatus.QUARANTINED, bad["reason"].tolist()),
            _handled_rows(job, already_in_ledger(decision), open_keys, failed, max_attempts)]
    if not decision.skipped.empty:  # not chased tonight by a setting (a minimum): said, not kept
        skipped = pd.DataFrame({"key": source_row_keys(source, decision.skipped["source_id"]),
                                "recipient": pd.NA})
        rows.append(key_rows(job, skipped, RowStatus.SKIPPED, decision.skipped["reason"].tolist()))
    candidates = decision.to_reserve
    if send_cap is not None and len(candidates) > send_cap:
        ordered = most_urgent_first(candidates)
        candidates, deferred = ordered.head(send_cap), ordered.iloc[send_cap:]
        rows.append(key_rows(job, deferred, RowStatus.DEFERRED,
                             f"send cap of {send_cap} reached: a later run picks it up"))
    return ReservationPlan(bad, candidates, concat_rows(rows))


@dataclass(frozen=True)
class Reserved:
    """What a job's reservation came to: the keys this run sends, and the summary rows of
    the candidates it does not send."""

    winners: pd.DataFrame
    rows: pd.DataFrame


def reservation_outcome(job: str, candidates: pd.DataFrame, won: Collection[str], taken: Collection[str],
                        adopt: bool) -> Reserved:
    """Each candidate by what the reservation did with it: `won`, the keys this run
    reserved; `taken`, the keys it did not win that the ledger holds (another run's)."""
    not_won = candidates[~candidates["key"].isin(won)]
    by_another = not_won["key"].isin(taken)
    rows = [key_rows(job, not_won[by_another], RowStatus.ALREADY_HANDLED, "reserved by another run"),
            key_rows(job, not_won[~by_another], RowStatus.NO_LONGER_DUE, NO_LONGER_DUE)]
    winners = candidates[candidates["key"].isin(won)]
    if adopt:
        rows.append(key_rows(job, winners, RowStatus.ADOPTED, "recorded as handled; not sent"))
        winners = winners.iloc[0:0]
    return Reserved(winners, concat_rows(rows))
