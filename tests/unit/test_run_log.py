"""What the run's log says (issue 38, point 5): failures and pending at WARNING, lines that
cannot be read as contradicting each other, a dry run that says "would", the delays in
force, and dueflow's task runs quieter than its own lines."""

from __future__ import annotations

import logging
from datetime import date, timedelta

from dueflow.flows.prefect_api import _OwnTaskRunsFromWarning, quiet_own_task_runs
from dueflow.tasks.adapters.memory import memory_store
from dueflow.tasks.core.statuses import SendResult, SendStatus
from tests.helpers.factories import client, contract, invoice
from tests.helpers.fakes import FakeTransport
from tests.helpers.nights import QUIET, run

AS_OF = date(2027, 3, 10)
ALERT = f"renewal/c1/{AS_OF + timedelta(days=30)}/30d"


def company():
    return memory_store(contracts=[contract("c1", AS_OF + timedelta(days=30)),
                                   contract("c2", AS_OF + timedelta(days=30))],
                        clients=[client("cl1")], invoices=[invoice("i1", "cl1", "2027-02-20")])


def lines(caplog) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == QUIET.name]


def test_failures_are_warnings_and_the_lines_agree(caplog):
    store = company()
    with caplog.at_level(logging.INFO, logger=QUIET.name):
        run(store, AS_OF, FakeTransport(answers={ALERT: SendResult(SendStatus.FAILED, error="550 no",
                                                                   permanent=True)}))
    said = lines(caplog)
    assert (logging.WARNING, "renewal: 1 sent, 1 failed permanently") in said \
        or (logging.WARNING, "renewal: 1 failed permanently, 1 sent") in said
    assert (logging.INFO, "dunning: 1 sent") in said  # nothing for a person: INFO
    assert any(m.startswith("dunning: delays in force: clients without a profile 7, 5, 7 days from sent")
               for _, m in said)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=QUIET.name):
        run(store, AS_OF + timedelta(days=1), FakeTransport())
    said = [m for _, m in lines(caplog)]
    # What is already in the ledger is said when read (the twin reads their earlier steps; the
    # SQL extract marks the contracts whose email is there: extract_line), so "already in the
    # ledger" below it is not a contradiction.
    assert said[1] == "renewal: read 2 contracts, 2 ledger row(s) of their earlier steps"
    assert said[2].startswith("renewal: 2 due (0 new, 2 already in the ledger)")


def test_a_dry_run_says_would(caplog):
    with caplog.at_level(logging.INFO, logger=QUIET.name):
        run(company(), AS_OF, dry_run=True)
    said = [m for _, m in lines(caplog)]
    assert "renewal: would reserve 2 new email(s) (dry run: nothing is written)" in said
    assert not any(m.startswith("renewal: reserved") for m in said)


def test_dueflows_task_runs_log_from_warning_and_others_are_left_alone(monkeypatch):
    monkeypatch.delenv("PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL", raising=False)
    logger = logging.getLogger("prefect.task_runs")
    before = list(logger.filters)
    # Another test of this worker may have imported the flow, which installs it: start without.
    others = [f for f in before if not isinstance(f, _OwnTaskRunsFromWarning)]
    logger.filters[:] = others
    try:
        quiet_own_task_runs()
        quiet_own_task_runs()  # once
        [added] = [f for f in logger.filters if f not in others]

        def record(level: int, flow_name: str) -> logging.LogRecord:
            made = logging.LogRecord("prefect.task_runs", level, "", 0, "Finished in state Completed()", (),
                                     None)
            made.flow_name = flow_name
            return made

        assert not added.filter(record(logging.INFO, "nightly-alerts"))
        assert added.filter(record(logging.WARNING, "nightly-alerts"))
        assert added.filter(record(logging.INFO, "someone-elses-flow"))
    finally:
        logger.filters[:] = before
    monkeypatch.setenv("PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL", "INFO")  # the user's choice
    quiet_own_task_runs()
    assert logger.filters == before


def test_the_extract_line_counts_what_the_ledger_already_has():
    from dueflow.tasks.core.frames import pd
    from dueflow.tasks.core.report import extract_line

    contracts = pd.DataFrame({"id": list("abcdefgh"), "settled_lead": [None] + [30] * 7})
    assert extract_line("renewal", {"contracts": contracts, "history": pd.DataFrame()}) == (
        "renewal: read 8 contracts (7 with tonight's email already in the ledger), 0 ledger row(s) of their"
        " earlier steps")


def test_the_forecast_is_not_squeezed_when_stdout_is_not_a_terminal(monkeypatch):
    import io
    import sys

    from dueflow.flows import cli

    monkeypatch.setattr(sys, "stdout", io.StringIO())  # a pipe, a file, a notebook's cell
    monkeypatch.delenv("COLUMNS", raising=False)
    assert cli._table_width() == cli.FILE_WIDTH == 160
    monkeypatch.setenv("COLUMNS", "100")  # the user's own width is kept
    assert cli._table_width() == 100
