"""The `dueflow` command: init-db, run, demo, ledger."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from dueflow.blocks.errors import ConfigError
from dueflow.blocks.settings import Settings, redact_url
from dueflow.flows import collector

if TYPE_CHECKING:
    from prefect import State
    from sqlalchemy import Engine

    from dueflow.flows.run_end import NightEnd
    from dueflow.tasks.core.frames import pd
    from dueflow.tasks.core.report import RunSummary
    from dueflow.tasks.ledger_export import Format


class UserError(Exception):
    """An error the operator can fix; printed as one line, no traceback."""


EPHEMERAL_STARTUP = 180  # seconds dueflow waits for a temporary Prefect server
# The commands that run a night: their process starts by loading Prefect, pandas, SQLAlchemy
# and the steps (about 400,000 objects that live as long as it does), then runs one night.
NIGHT_COMMANDS = frozenset({"run", "adopt", "demo"})


def _quiet_prefect() -> None:
    # Keep the terminal for our own summary: Prefect's log lines (and the temporary server's
    # banner when no PREFECT_API_URL is set) stay off the console — the command says every
    # outcome, warning and error itself, once — while the run's logs still reach the API
    # (the run's Logs tab). Only a CRITICAL line would show.
    os.environ.setdefault("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", "CRITICAL")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # Prefect gives its temporary server 20 s; its first start (creating the database in
    # a new PREFECT_HOME) took longer than that on a busy 2-core machine.
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", str(EPHEMERAL_STARTUP))
    # The temporary server is stopped as soon as the run ends, while its task-run recorder
    # may still be writing: it then prints tracebacks of cancelled writes. Only a server
    # started from this process reads this; flow runs and artifacts are still recorded.
    os.environ.setdefault("PREFECT_SERVER_SERVICES_TASK_RUN_RECORDER_ENABLED", "false")


def _as_of(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid date {value!r}: expected YYYY-MM-DD") from None


def _count(value: str) -> int:
    if not value.isdigit():
        raise argparse.ArgumentTypeError(f"invalid count {value!r}: expected a whole number")
    return int(value)


def _nights(value: str) -> int:
    if not value.isdigit() or not 1 <= int(value) <= 366:
        raise argparse.ArgumentTypeError(f"invalid number of nights {value!r}: expected 1 to 366")
    return int(value)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dueflow")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _engine(settings: Settings) -> Engine:
    from dueflow.tasks.operations import engine_of

    return engine_of(settings)


def _say_waiting(settings: Settings) -> Callable[[], None]:
    def say() -> None:
        from dueflow.tasks.operations import sqlite_file

        print(f"dueflow: waiting for the database file {sqlite_file(settings)}: another process holds its"
              f" write lock (up to {settings.db_lock_timeout:g} s)…", file=sys.stderr, flush=True)

    return say


def _reachable(settings: Settings) -> Engine:
    from dueflow.tasks.operations import reachable

    return reachable(settings, _say_waiting(settings))


def _check_ready(settings: Settings, sources: bool = True, writes: bool = False) -> None:
    from dueflow.tasks.operations import check_ready

    check_ready(settings, sources, writes, _say_waiting(settings))


def cmd_init_db(args: argparse.Namespace, settings: Settings) -> int:
    """Create or upgrade dueflow's own tables; with --with-sample-tables, the sample source
    tables that are missing. Exit 0 once its own tables are right; then, apart, whether the
    sources can be read, and the next command (a new install: which dunning start holds)."""
    from dueflow.tasks.core.dunning_start import start_in_force
    from dueflow.tasks.operations import init_ledger, sources_readiness

    where = redact_url(settings.database_url)
    done = init_ledger(settings, sample_tables=args.with_sample_tables, on_wait=_say_waiting(settings))
    version = done.after
    if done.before is None:
        print(f"Ledger created in {where} (version {version.head}).")
        chosen = bool((os.environ.get("DUEFLOW_DUNNING_START") or "").strip())
        print(f"Dunning start: {start_in_force(settings.dunning_start, chosen, settings.profiles())}.")
    elif done.upgraded:
        print(f"Ledger upgraded in {where}: version {done.before.current or 'before versioning'} →"
              f" {version.head}, every row kept.")
    else:
        print(f"Ledger up to date in {where} (version {version.head}).")
    sources = sources_readiness(settings)
    if sources.ready:
        print(f"Ready: the ledger and the sources can be read. Next: {sources.next_step}.")
        return 0
    print("Not ready for a run yet: dueflow's tables are right, the sources cannot be read (they are yours:"
          " dueflow creates only its own tables, docs/your-data.md):")
    for line in sources.problems:
        print(f"  {line}")
    print(f"Next: {sources.next_step}.")
    return 0


@contextmanager
def _stop_on_interrupt() -> Iterator[Callable[[], bool]]:
    """While the run lasts, the first Ctrl-C (SIGINT, or SIGTERM) stops handing new emails
    to SMTP — the run then records what happened and ends — and a second one stops at
    once. Yields whether one came; the previous handlers are back afterwards."""
    import signal

    from dueflow.tasks.deliver import STOP

    STOP.clear()

    def handle(signum: int, _frame: object) -> None:
        if STOP.is_set():
            raise KeyboardInterrupt
        STOP.set()
        print("\ndueflow: stopping: no new email is handed to SMTP; recording what was sent"
              " (press Ctrl-C again to quit at once)…", file=sys.stderr, flush=True)

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield STOP.is_set
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_flow(settings: Settings, as_of: date | None, dry_run: bool, **params: Any) -> int:
    _check_ready(settings, writes=not dry_run)
    _quiet_prefect()  # before Prefect is imported: it reads these settings once
    from dueflow.flows import prefect_api
    from dueflow.flows.nightly_alerts import check_night, nightly_alerts
    from dueflow.tasks.core.report import summary_of

    check_night(settings, as_of, dry_run, params)
    collector.loaded()  # the night's modules are in: frozen, the collector back on

    prefect_api.quiet_when_lost()
    if problem := prefect_api.unreachable():
        raise UserError(f"the Prefect API at {redact_url(prefect_api.api_url() or '')} does not answer"
                        f" ({problem}): start it, or unset PREFECT_API_URL to run with a temporary"
                        " server; nothing was done")
    try:
        from dueflow.flows.run_end import RunEndUnrecorded, night_end
        from dueflow.tasks import progress

        with (prefect_api.temporary_server(EPHEMERAL_STARTUP) as temporary,
              _stop_on_interrupt() as interrupted, progress.shown_on(sys.stderr), night_end() as end):
            unrecorded_end = False
            try:
                # The flow ends in a State (its run form's annotation), Failed "Needs attention"
                # when emails wait for a person: its result is the summary all the same.
                state = cast("State", nightly_alerts(as_of=as_of, dry_run=dry_run, return_state=True,
                                                     **params))
                summary = summary_of(state)
            except RunEndUnrecorded as unrecorded:  # the API was lost: the state, never recorded
                summary, unrecorded_end = summary_of(unrecorded.state), True
            except Exception as exc:
                summary = _after_lost_api(exc, end)
    except prefect_api.TemporaryServerCannotStart as exc:
        raise UserError(f"the temporary Prefect server cannot start: {exc}; set PREFECT_HOME (or HOME) to a"
                        " writable folder, or point PREFECT_API_URL at a running `prefect server start`;"
                        " nothing was done") from None
    except prefect_api.TemporaryServerDidNotStart:
        raise UserError("the temporary Prefect server did not start in time (set"
                        " PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS higher, or point"
                        " PREFECT_API_URL at a running `prefect server start`)") from None
    # No link to the run in the UI when the API is gone (nor for the temporary server).
    return _print_summary(summary, temporary or unrecorded_end, interrupted)


def _print_summary(summary: RunSummary, temporary: bool, interrupted: Callable[[], bool]) -> int:
    """The night's summary on the terminal; the command's exit code."""
    from dueflow.tasks.core.report import left_out, paragraph_lines, text_table
    from dueflow.tasks.core.statuses import RowStatus

    if not temporary and (url := run_url(summary.flow_run_id)):  # the temporary server is gone
        print(f"Flow run in the Prefect UI: {url}")
    if summary.skipped:
        print(summary.headline())
        return 0
    listed = summary.rows[summary.rows["status"] != RowStatus.ALREADY_HANDLED]
    if not listed.empty:
        print(text_table(listed))
        print()
    print(summary.headline())
    if summary.approval:
        print(f"The night looked wrong and went on: {summary.approval}.")
    for line in left_out(summary):
        print(line)
    for line in paragraph_lines(summary):
        print(line)
    for line in attention_lines(summary):
        print(line)
    for warning in summary.warnings:
        print(f"Warning: {warning}")
    if interrupted():
        print("dueflow: interrupted: emails not handed to SMTP are sent by the next run",
              file=sys.stderr)
        return 130
    return 0


def _after_lost_api(exc: Exception, end: NightEnd) -> RunSummary:
    """The night's summary when its work was done and only recording its end in Prefect
    failed, the API lost after the flow's end; otherwise the exception, as it was."""
    from dueflow.flows import prefect_api
    from dueflow.flows.run_end import LOST_END
    from dueflow.tasks.core.report import summary_of

    if end.state is None or not prefect_api.lost(exc):
        raise exc
    summary = summary_of(end.state)
    summary.warnings.append(LOST_END)
    return summary


def run_url(flow_run_id: str | None) -> str | None:
    """The flow run's page in the Prefect UI, when the run went to a Prefect server (not
    the temporary one a run starts without PREFECT_API_URL)."""
    from prefect.settings import get_current_settings

    current = get_current_settings()
    if not flow_run_id or not current.api.url or not current.ui_url:
        return None
    return f"{current.ui_url.rstrip('/')}/runs/flow-run/{flow_run_id}"


def cmd_forecast(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.tasks.adapters import db
    from dueflow.tasks.forecast import forecast

    _check_ready(settings)
    rows = forecast(args.start, args.days, settings=settings)
    if args.format == "csv":
        rows.to_csv(sys.stdout, index=False)
        return 0
    if args.format == "json":
        for record in rows.astype(object).where(rows.notna(), None).to_dict("records"):
            print(json.dumps(record, default=str, ensure_ascii=False))
        return 0
    first = args.start or settings.today()
    if rows.empty:
        print(f"No email would go out in the {args.days} night(s) from {first}.")
    else:
        for line in forecast_table(rows, _table_width()):
            print(line)
        jobs = rows["job"].value_counts()
        print(f"\n{len(rows)} email(s) in the {args.days} night(s) from {first}"
              f" (renewal: {jobs.get('renewal', 0)}, dunning: {jobs.get('dunning', 0)}).")
    held = rows.attrs.get("held") or []
    if held:
        print(f"\nHeld on {first} (not chased until the hold ends; the next step is due its delay after):")
        for row in held:
            print(f"  invoice {row['invoice_id']} (client {row['client_id']}): until {row['held_until']},"
                  f" {row['by']}")
    for wait in rows.attrs.get("waits") or []:  # issue 40: a night that looks wrong
        print(f"\nThe night of {wait['night']} would wait for a person (docs/operations.md): "
              + "; ".join(wait["bounds"]))
    print("Assumes the nightly run every night and no payment, renewal or change; nothing was"
          " written or sent.")
    left = db.unsettled_counts(_engine(settings))
    if left["unsent"] or left["failed"] or left["permanent"] or left["pending"]:
        print(f"Not in the forecast, left by earlier runs: {left['unsent']} not sent"
              f" (the next run sends them), {left['failed']} failed (retried later),"
              f" {left['permanent']} failed permanently, {left['pending']} pending"
              " (see `dueflow ledger --status failed|pending`).")
    return 0


SUBJECT_MIN = 12  # the narrowest a subject is wrapped to, on a narrow terminal
FILE_WIDTH = 160  # a table written to a file, a pipe or a notebook's cell: no terminal to fit


def _table_width() -> int:
    """The terminal's width; a sane one when stdout is not a terminal (a pipe, a file, a
    notebook), whatever COLUMNS or the controlling terminal say: the subjects were wrapped
    into 12 characters there."""
    if not sys.stdout.isatty() and not os.environ.get("COLUMNS"):  # COLUMNS: the user's choice
        return FILE_WIDTH
    return shutil.get_terminal_size((FILE_WIDTH, 24)).columns


def forecast_table(rows: pd.DataFrame, width: int) -> list[str]:
    """The forecast as a terminal table `width` columns wide: money as the emails write it,
    and the address, name and subject wrapped at whole words to fit."""
    from dueflow.tasks.core.frames import pd
    from dueflow.tasks.core.money import money_texts
    from dueflow.tasks.core.text import wrapped_table

    shown = rows.astype(object).where(rows.notna(), "")
    money = money_texts(rows["amount"].astype("string"), rows["currency"].astype("string"))
    why = shown["why"].astype(str) if "why" in shown else pd.Series("", index=shown.index)
    columns = ["night", "job", "step", "recipient", "name", "subject"]
    cells = [[*map(str, row[:5]), str(m), str(row[5]), str(w)] for row, m, w in zip(
        shown.loc[:, columns].itertuples(index=False, name=None), money, why, strict=True)]
    header = ["night", "job", "step", "recipient", "name", "amount", "subject", "why"]
    widest = [max([len(header[i])] + [len(r[i]) for r in cells]) for i in range(len(header) - 2)]
    caps: list[int | None] = [None, None, None, min(widest[3], 28), min(widest[4], 20), None]
    taken = sum(w if cap is None else cap for w, cap in zip(widest, caps, strict=True)) + 2 * 7
    # The subject and the reason for a moved night share what is left, whole words each.
    left = width - taken
    why_width = min(max([3] + [len(r[7]) for r in cells]), max(10, left // 3))
    return wrapped_table(header, cells, [*caps, max(SUBJECT_MIN, left - why_width), why_width])


def cmd_check(args: argparse.Namespace) -> int:
    from dueflow.tasks.check import run_checks

    results = run_checks(on_result=lambda check: print(check.line(), flush=True), sources=args.sources,
                         on_lines=lambda line: print(line, flush=True), phrasebook=args.phrasebook)
    problems = sum(not check.ok for check in results)
    warnings = sum(check.ok and check.warning for check in results)
    noted = f", {warnings} warning(s)" if warnings else ""
    print(f"{len(results) - problems} ok, {problems} problem(s){noted}" if problems else
          f"all {len(results)} checks ok{noted}")
    return 1 if problems else 0


def attention_lines(summary: object) -> list[str]:
    """What in the whole ledger needs a person, in the outcomes' own words
    (tasks/core/vocabulary.py), each with the command that lists it."""
    from dueflow.tasks.core.statuses import RowStatus
    from dueflow.tasks.core.vocabulary import OUTCOMES, todo

    failed = getattr(summary, "ledger_failed", 0)
    permanent = getattr(summary, "ledger_failed_permanently", 0)
    counts = ((RowStatus.PENDING, getattr(summary, "ledger_pending", 0), "pending"),
              (RowStatus.FAILED_PERMANENTLY, permanent, "failed"),
              (RowStatus.FAILED, failed - permanent, "failed"),
              (RowStatus.NOT_SENT, getattr(summary, "ledger_unsent", 0), "pending"),
              (RowStatus.BOUNCED, getattr(summary, "ledger_bounced", 0), "bounced"))
    lines = []
    for status, n, listed in counts:
        if n:
            said = OUTCOMES[status]
            lines.append(f"Ledger: {n} {said.status} — {said.meaning}: {todo(status, 'KEY')}"
                         f" (list: `dueflow ledger --status {listed}`).")
    return lines


def cmd_run(args: argparse.Namespace, settings: Settings) -> int:
    approve = {"approve": args.approve} if args.approve else {}
    return _run_flow(settings, args.as_of, args.dry_run, send_cap=args.send_cap,
                     allow_any_as_of=args.allow_any_as_of, dunning_start=args.dunning_start or "", **approve)


def cmd_adopt(args: argparse.Namespace, settings: Settings) -> int:
    return _run_flow(settings, args.as_of, args.dry_run, adopt=True, allow_any_as_of=args.allow_any_as_of)


def cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.blocks.endpoints import parse_mail_url
    from dueflow.tasks.operations import load_sample_data

    settings = demo_company(settings)
    added = load_sample_data(settings)
    print(f"dueflow demo — database {redact_url(settings.database_url)}, "
          f"mail to {parse_mail_url(settings.mail_url).describe()}")
    sender = settings.sender()
    print(f"Emails from {sender.display_name or settings.company_name} <{sender.address}>, replies to"
          f" {sender.reply_to.address if sender.reply_to else sender.address}, escalations to"
          f" {settings.escalation_address()}.")
    print(f"{added} sample row(s) added (contracts, clients, invoices); running the nightly flow"
          f" for {settings.today()}…\n")
    code = _run_flow(settings, None, False)
    print(f"\nEmails went to {parse_mail_url(settings.mail_url).describe()}. See `dueflow ledger`"
          " and `dueflow invoices`; run `dueflow demo` again and the ledger sends nothing new.")
    return code


def demo_company(settings: Settings) -> Settings:
    """The demo's settings: the sample company's name, sender, Reply-To, payment
    instructions and escalation address (sample_data.SAMPLE_COMPANY) for each the
    environment leaves unset, so that the demo's emails read as a company's would. Set in
    the environment too: the flow reads its settings there."""
    from dueflow.blocks.table import ROW
    from dueflow.tasks.adapters.sample_data import SAMPLE_COMPANY

    if settings.email_block:  # a DueflowEmail block says how this company's emails look
        return settings
    for name, value in SAMPLE_COMPANY.items():
        variable = ROW[name].variable or ""
        if not os.environ.get(variable):
            os.environ[variable] = value
    return Settings.from_env()


def cmd_ledger(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.tasks.ledger_export import LedgerFilter, RowCounter, export

    _check_ready(settings)
    fmt = cast("Format", "json" if args.json else args.format)  # one of argparse's choices
    if fmt == "parquet" and not args.output:
        raise UserError("--format parquet writes a file: add --output FILE")
    where = LedgerFilter(args.job, args.status, args.since, args.until, args.limit)
    counter = RowCounter(sys.stderr) if args.output and sys.stderr.isatty() else None
    output = Path(args.output) if args.output else None
    try:
        rows = export(_engine(settings), where, fmt, output, sys.stdout,
                      on_chunk=counter or (lambda rows: None))
    except BrokenPipeError:  # `dueflow ledger … | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        if output is None:
            raise
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    finally:
        if counter:
            counter.done()
    if output is not None:
        print(f"{rows} ledger row(s) written to {output} ({fmt})", file=sys.stderr)
    elif rows == 0 and fmt == "table":
        print("No ledger rows" + (f" with {where.describe()}." if where.describe() else "."))
    return 0


def _keys_to_resolve(args: argparse.Namespace, engine: Engine) -> list[str]:
    """The keys named on the command line, in a file (one a line; '-' is stdin), or every
    pending row of one run that was never handed to SMTP."""
    from dueflow.tasks.adapters import db

    keys = list(args.keys)
    if args.from_file:
        handle = sys.stdin if args.from_file == "-" else open(args.from_file, encoding="utf-8")  # noqa: SIM115
        with handle:
            keys += [line.strip() for line in handle if line.strip() and not line.startswith("#")]
    if args.never_handed_by:
        keys += db.unsent_of_run(engine, args.never_handed_by)
    if not keys:
        raise UserError("name the keys to settle: KEY…, --from-file FILE, or --never-handed-by RUN_ID")
    return list(dict.fromkeys(keys))


def cmd_resolve(args: argparse.Namespace, settings: Settings) -> int:
    import getpass

    from dueflow.tasks.operations import RETRY, Settled, resolve

    _check_ready(settings)
    engine = _engine(settings)
    keys = _keys_to_resolve(args, engine)
    by = args.by or getpass.getuser()
    note = f"resolved by {by} as {args.outcome}" + (f": {args.note}" if args.note else "")
    after = {"sent": "it will not be sent again.",
             "failed": "a later run sends it again, once, rendered for the address as it is now.",
             RETRY: "the next run sends it again, once, to the address the data says."}[args.outcome]
    resolutions = resolve(engine, keys, args.outcome, note, by)
    for done in resolutions:
        key = done.key
        if done.done:
            was = {"claimed": "pending", "unclaimed": "pending"}.get(str(done.was), str(done.was))
            print(f"{key}: {was} → {args.outcome} (by {by}); {after}")
        elif done.settled is Settled.NOT_SETTLEABLE:
            print(f"{key}: {_not_settleable(done.was, args.outcome)}: left as it is", file=sys.stderr)
        elif done.settled is Settled.NEVER_HANDED:
            print(f"{key}: never handed to SMTP, so it cannot have been sent: left pending"
                  " (the next run sends it)", file=sys.stderr)
        else:
            print(f"{key}: changed meanwhile: left as it is", file=sys.stderr)
    if refused := sum(not done.done for done in resolutions):
        raise UserError(f"{refused} of {len(keys)} key(s) not settled (see above; `dueflow ledger"
                        " --status pending|failed|bounced` lists what can be)")
    return 0


def _not_settleable(was: str | None, outcome: str) -> str:
    """Why `resolve --as OUTCOME` leaves a row as it is, and what would settle it."""
    if was is None:
        return "not in the ledger"
    if was in ("claimed", "unclaimed"):
        return "pending (it may have left): check the mail server's log, then --as sent or --as failed"
    if was == "failed":
        return "failed: a later run retries it, or --as retry sends it once more to the same address"
    return f"{was}: only a pending, failed or bounced row can be settled"


def cmd_quarantine(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.tasks.adapters import db

    _check_ready(settings)
    frame = db.quarantine_rows(_engine(settings), args.job)
    if args.json:
        for record in frame.astype(object).where(frame.notna(), None).to_dict("records"):
            print(json.dumps(record, default=str, ensure_ascii=False))
        return 0
    if frame.empty:
        print("No quarantined rows.")
        return 0
    print(frame.drop(columns=["flow_run_id"]).to_string(index=False))
    return 0


def _step_line(row: object) -> str:
    """One dunning step of `dueflow invoices --id`: when, what, how it ended, to whom (or
    that retention pruned its addresses), and the invoice PDF it carried."""
    def cell(name: str) -> str:
        value = getattr(row, name)
        return "" if value is None else str(value)

    to = f"to {cell('recipient')}" + (f", cc {cell('cc_recipient')}" if cell("cc_recipient") else "")
    if cell("pruned_at"):  # retention: the addresses and bodies are gone, the step stays
        to = f"(addresses and bodies pruned {cell('pruned_at')[:10]})"
    line = (f"{cell('as_of')}  {cell('step'):<10}  {cell('status'):<7}  attempts={cell('attempts')}  {to}"
            + (f"  ({cell('error')})" if cell("error") else ""))
    if cell("attachment_sha256"):
        name = f"{cell('attachment_name')} " if cell("attachment_name") else ""
        size = int(float(cell("attachment_size") or 0))
        line += f"\n            invoice PDF {name}({size:,} bytes, sha256 {cell('attachment_sha256')})"
    elif cell("attachment_note"):
        line += f"\n            invoice PDF {cell('attachment_note')}"
    return line


def cmd_invoices(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.tasks.adapters import db
    from dueflow.tasks.operations import invoice_states

    _check_ready(settings)
    engine = _engine(settings)
    if args.id:
        history = db.invoice_steps(engine, args.id)
        if history.empty:
            print(f"No dunning steps recorded for invoice {args.id}.")
        for row in history.astype(object).where(history.notna(), None).itertuples(index=False):
            print(_step_line(row))
            for report in db.bounce_reports(engine, str(row.key)).itertuples(index=False):
                print(f"            {report.kind} bounce {str(report.seen_at)[:19]}:"
                      f" {report.status_code or ''} {report.diagnostic or ''}".rstrip()  # type: ignore[str-bytes-safe]
                      + ("  (settled)" if report.settled_at else ""))
        return 0
    state = invoice_states(settings)
    if args.json:
        for record in state.astype(object).where(state.notna(), None).to_dict("records"):
            print(json.dumps(record, default=str))
        return 0
    print(state.fillna("").to_string(index=False) if not state.empty else "No invoices.")
    return 0


def cmd_prune(args: argparse.Namespace, settings: Settings) -> int:
    from dueflow.tasks.operations import prune_bodies

    done = prune_bodies(settings, args.bodies_before)
    print(f"Pruned {done.rows} settled row(s) whose step got out before {done.before}: their bodies,"
          " subjects, addresses and drafted paragraphs are gone; their keys, statuses and dates are kept"
          " (`dueflow ledger` shows pruned_at). Pending, failed and bounced rows are never pruned.")
    return 0


def cmd_rekey(args: argparse.Namespace, settings: Settings) -> int:
    """The ids the source now spells otherwise than the ledger (issue 36: a view's ids
    recreated with another type or format), and the operator's word on them."""
    import getpass

    from dueflow.tasks.core.keys import printable_id
    from dueflow.tasks.operations import respelled_ids, settle_id_changes

    _check_ready(settings)
    pairs = respelled_ids(settings)
    if args.ids:
        pairs = pairs[pairs["old_id"].isin(args.ids)]
    if pairs.empty:
        print("No id of the ledger is spelled otherwise in the sources" + (" among those named." if args.ids
                                                                            else ": nothing to do."))
        return 0
    for row in pairs.itertuples(index=False):  # a person reads each pair
        print(f"{row.source}: {printable_id(row.old_id)} → {printable_id(row.new_id)}")
    if not (args.apply or args.keep_apart):
        print(f"{len(pairs)} id(s) of the ledger are spelled otherwise in the sources. `dueflow rekey"
              " --apply` moves their history to the new spelling (their emails are then not sent"
              " again); `--keep-apart` records them as different records. Add --id OLD to settle some"
              " only.")
        return 0
    moved = settle_id_changes(settings, pairs, args.apply, getpass.getuser())
    if args.apply:
        print(f"Moved {sum(moved.values())} ledger row(s) of {len(pairs)} id(s) to their new spelling;"
              " recorded in dueflow_id_changes. The next night goes on from their history.")
    else:
        print(f"Recorded {len(pairs)} pair(s) as different records in dueflow_id_changes: nights no longer"
              " stop for them.")
    return 0


def cmd_sources(args: argparse.Namespace, settings: Settings) -> int:
    """`dueflow sources init`: a first mapping file from the schema's tables, to stdout or
    a new file (an existing one is never overwritten)."""
    from dueflow.tasks.operations import draft_mapping

    draft = draft_mapping(settings, args.schema)
    if not args.output:
        sys.stdout.write(draft.text)
        sys.stdout.flush()
        print(f"dueflow: {draft.summary()}", file=sys.stderr)
        return 0
    try:
        with open(args.output, "x", encoding="utf-8") as out:
            out.write(draft.text)
    except FileExistsError:
        raise UserError(f"{args.output} exists: nothing written (name another file)") from None
    except OSError as exc:
        raise UserError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"{args.output}: {draft.summary()}.")
    print(f"Next: read it, then DUEFLOW_SOURCES_FILE={args.output} and `dueflow check --sources`.")
    return 0


def cmd_bounces(args: argparse.Namespace, settings: Settings) -> int:
    _check_ready(settings, sources=False)
    _quiet_prefect()
    from dueflow.flows.bounces import command

    return command(args, settings, UserError)


COMMANDS: dict[str, Callable[[argparse.Namespace, Settings], int]] = {
    "init-db": cmd_init_db,
    "run": cmd_run,
    "demo": cmd_demo,
    "ledger": cmd_ledger,
    "invoices": cmd_invoices,
    "resolve": cmd_resolve,
    "adopt": cmd_adopt,
    "quarantine": cmd_quarantine,
    "forecast": cmd_forecast,
    "prune": cmd_prune,
    "rekey": cmd_rekey,
    "sources": cmd_sources,
    "bounces": lambda args, settings: cmd_bounces(args, settings),
}


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="dueflow", description="Renewal alerts and invoice reminders, sent exactly once."
    )
    top.add_argument("--version", action="version", version=f"dueflow {_version()}")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    forecast = sub.add_parser("forecast", help="the emails the coming nights would send (writes and"
                              " sends nothing)")
    forecast.add_argument("--from", dest="start", type=_as_of, metavar="DATE",
                          help="first night YYYY-MM-DD (default: today)")
    forecast.add_argument("--days", type=_nights, default=7, metavar="N", help="nights (default 7)")
    forecast.add_argument("--format", choices=["table", "csv", "json"], default="table")
    check = sub.add_parser("check", help="check the set-up: settings, database, sources, mail server, LLM,"
                           " Prefect, templates (sends nothing)")
    check.add_argument("--sources", action="store_true",
                       help="also show how each source is read (relation, columns, types), read a sample"
                            " through the real extract, and the indexes that would help")
    check.add_argument("--phrasebook", action="store_true",
                       help="also list every sentence a reminder's paragraph may say, for review")
    init = sub.add_parser("init-db", help="create or upgrade dueflow's own tables (the ledger), in place")
    init.add_argument("--with-sample-tables", action="store_true",
                      help="also create sample contracts, clients and invoices tables where missing")
    run = sub.add_parser("run", help="run the nightly flow once",  # one usage line: an error is 2 lines
                         usage="%(prog)s [-h] [--as-of DATE] [--dry-run] [--send-cap N]"
                               " [--approve all|none|N] [--allow-any-as-of] [--dunning-start {sent,due}]")
    run.add_argument("--as-of", type=_as_of, help="business date YYYY-MM-DD (default: today)")
    run.add_argument("--dry-run", action="store_true", help="decide and render, write nothing")
    run.add_argument("--allow-any-as-of", action="store_true", help="take an --as-of more than 31 days"
                     " ahead or before the ledger's first night (a backfill; docs/parameters.md)")
    run.add_argument("--send-cap", type=_count, metavar="N",
                     help="at most N new emails per job in this run (most urgent first)")
    run.add_argument("--approve", metavar="all|none|N",
                     help="a night that looks wrong goes on: all of it, none, or at most N emails per job"
                          " (docs/operations.md)")
    run.add_argument("--dunning-start", choices=["sent", "due"],
                     help="what the first reminder counts from in this run: the day the invoice was sent"
                          " or its due date (default: DUEFLOW_DUNNING_START, else sent; a client's profile"
                          " wins)")
    adopt = sub.add_parser("adopt", help="take over existing data: record everything due now"
                           " as handled, without sending")
    adopt.add_argument("--as-of", type=_as_of, help="business date YYYY-MM-DD (default: today)")
    adopt.add_argument("--dry-run", action="store_true", help="show what would be adopted")
    adopt.add_argument("--allow-any-as-of", action="store_true",
                       help="take any --as-of (docs/parameters.md)")
    sub.add_parser("demo", help="load sample data and run the flow on it")
    ledger = sub.add_parser("ledger", help="list ledger rows")
    ledger.add_argument("--status", choices=["pending", "sent", "failed", "adopted", "bounced"])
    ledger.add_argument("--job", choices=["renewal", "dunning"])
    ledger.add_argument("--since", type=_as_of, metavar="DATE", help="rows reserved on or after this date")
    ledger.add_argument("--until", type=_as_of, metavar="DATE", help="rows reserved on or before this date")
    ledger.add_argument("--limit", type=_count, metavar="N", help="at most N rows (oldest first)")
    ledger.add_argument("--format", choices=["table", "csv", "json", "parquet"], default="table",
                        help="json: one JSON object a line; parquet needs --output")
    ledger.add_argument("--output", metavar="FILE", help="write to FILE (complete or not at all)")
    ledger.add_argument("--json", action="store_true", help="same as --format json")
    resolve = sub.add_parser("resolve", help="settle a pending row after checking the mail server's log, or"
                             " send a failed or bounced one again (--as retry)")
    resolve.add_argument("keys", nargs="*", metavar="KEY",
                         help="ledger keys, e.g. renewal/c-42/2027-03-01/30d")
    resolve.add_argument("--from-file", metavar="FILE", help="more keys, one a line ('-': stdin)")
    resolve.add_argument("--never-handed-by", metavar="RUN_ID",
                         help="every pending row of this flow run that was never handed to SMTP")
    resolve.add_argument("--as", dest="outcome", choices=["sent", "failed", "retry"], required=True,
                         help="sent: it was delivered; failed: it was not (a later run sends it); retry: a"
                              " failed (also permanently) or bounced email goes once more, to the address"
                              " the data says, on the next run")
    resolve.add_argument("--note", help="why, for the ledger")
    resolve.add_argument("--by", help="who settles it, for the ledger (default: the OS user)")
    quarantine = sub.add_parser("quarantine", help="list the source rows that were quarantined")
    quarantine.add_argument("--job", choices=["renewal", "dunning"])
    quarantine.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    invoices = sub.add_parser("invoices", help="each invoice's dunning state, or one's history")
    invoices.add_argument("--id", help="show the dunning history of this invoice")
    invoices.add_argument("--json", action="store_true", help="JSON lines instead of a table")
    prune = sub.add_parser("prune", help="retention: remove the bodies and addresses of settled rows"
                           " older than a date, keeping their keys, statuses and dates")
    prune.add_argument("--bodies-before", type=_as_of, metavar="DATE",
                       help="rows whose step got out before this date YYYY-MM-DD (default: today minus"
                            " DUEFLOW_RETAIN_BODIES_DAYS)")
    rekey = sub.add_parser("rekey", help="the ledger's ids the sources now spell otherwise (a new id type"
                           " or format), and what to do with them")
    what = rekey.add_mutually_exclusive_group()
    what.add_argument("--apply", action="store_true",
                      help="they are the same records: move their history to the new spelling")
    what.add_argument("--keep-apart", action="store_true",
                      help="they are different records: record it, and stop asking")
    rekey.add_argument("--id", dest="ids", action="append", metavar="OLD",
                       help="only this old id (repeatable)")
    sources = sub.add_parser("sources", help="your own tables: draft a first mapping file from them")
    sources_of = sources.add_subparsers(dest="action", required=True, metavar="ACTION")
    draft = sources_of.add_parser("init", help="read a schema's tables and columns and propose a commented"
                                  " mapping file (DUEFLOW_SOURCES_FILE) with its guesses and TODOs")
    draft.add_argument("--schema", help="the schema of your tables (default: DUEFLOW_SOURCE_SCHEMA, else"
                       " the search path; SQLite has none)")
    draft.add_argument("--output", metavar="FILE", help="write it to FILE, a new file (default: stdout)")
    bounces = sub.add_parser("bounces", help="read the bounce mailbox and mark the rows that bounced"
                             " (docs/bounces.md)")
    bounces.add_argument("--list", action="store_true", help="list the bounce reports recorded; read nothing")
    bounces.add_argument("--kept", action="store_true", help="list the messages kept aside; read nothing")
    return top


def _without_secrets(text: str) -> str:
    """An error line with the URL settings' passwords masked, whatever raised it."""
    from dueflow.blocks.urls import scrub, secrets_of

    return scrub(text, secrets_of(os.environ))


def utf8_streams() -> None:
    """The command reads and writes UTF-8 whatever the locale says, as Python's UTF-8 mode
    does (issue 45): under a Latin-1 locale (de_DE, es_ES without .UTF-8) the first € or —
    raised UnicodeEncodeError, and the bytes written changed with the locale. A character no
    encoding can write (a lone surrogate from a row) is written escaped, never a traceback."""
    import codecs
    import io

    for stream, errors in ((sys.stdout, "backslashreplace"), (sys.stderr, "backslashreplace"),
                           (sys.stdin, "surrogateescape")):
        if not isinstance(stream, io.TextIOWrapper):
            continue
        if codecs.lookup(stream.encoding).name != "utf-8" or stream.errors != errors:
            stream.reconfigure(encoding="utf-8", errors=errors)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command itself: the collector waits while the night's modules load
        collector.loading()
        utf8_streams()
    try:
        code = _main(argv)
    except BrokenPipeError:  # `dueflow check --phrasebook | head`: the reader has what it wanted
        if argv is None:  # and Python's own flush of stdout at exit must not complain either
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141  # as a shell reports a command that SIGPIPE ended
    if argv is None:  # the command itself, not a call from Python
        from dueflow.flows.prefect_api import leave

        leave(code)
    return code


def _main(argv: list[str] | None) -> int:
    args = parser().parse_args(argv)
    if args.command not in NIGHT_COMMANDS:
        collector.not_a_night()
    if args.command == "check":  # it reports bad settings itself, one line each
        return cmd_check(args)
    try:
        settings = Settings.from_env()
        return COMMANDS[args.command](args, settings)
    except (UserError, ConfigError) as exc:
        print(f"dueflow: error: {_without_secrets(str(exc))}", file=sys.stderr)
        return 2
    except Exception as exc:
        from sqlalchemy.exc import SQLAlchemyError

        if not isinstance(exc, SQLAlchemyError):
            raise
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        print(f"dueflow: error: database error: {_without_secrets(reason)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("dueflow: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
