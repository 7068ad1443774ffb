"""How a night lives with the Prefect API (docs/prefect-api.md): the temporary server a
`dueflow` command starts without PREFECT_API_URL, in a session of its own; the API lost in
the middle of a night; and a run the lost API left 'Running', found stale by a later one.

Prefect starts its temporary server as a child in dueflow's process group: the terminal's
Ctrl-C (SIGINT to the foreground group) stopped the server too, and dueflow then spent
more than 15 s retrying the events socket of a server that was gone (issue 25, finding 7).
Here the same server is started in its own session: only dueflow hears Ctrl-C, records
what it did and stops the server itself.

The night's work needs no Prefect API: the ledger is its record. What does need it — the
artifacts, the run's final state — is skipped or said in one line when the API is gone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    import ssl

DRAIN_SECONDS = 4.0  # events and logs left for the API when a command ends
PROBE_SECONDS = 3.0
STALE_TAG_PREFIX = "dueflow-ledger:"

# Set once Prefect's own clients have met an API that does not answer.
_lost: list[str] = []
LOST_LINE = ("dueflow: warning: the Prefect API stopped answering: the night goes on (the ledger is"
             " its record); its events, logs and artifacts for the UI are dropped (docs/prefect-api.md)")
# Where Prefect's clients say their API does not answer: once per retry of every event.
CLIENT_LOGGERS = ("prefect.events.clients", "prefect._internal.concurrency")
# Where the engine says it could not record a state (the run's own warnings stay).
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


SERVER_TELEMETRY = "PREFECT_SERVER_ANALYTICS_ENABLED"


def no_server_telemetry() -> None:
    """A flow run in-process (a notebook, a script) without PREFECT_API_URL starts a
    temporary Prefect server, whose telemetry service sends a heartbeat to Prefect's
    servers and, offline or behind a firewall, prints 'ERROR | prefect.server.services.
    telemetry - Failed to send telemetry' under the notebook's cell. Off for the temporary
    server dueflow's flows start, unless the user chose (the variable, or their profile)."""
    if SERVER_TELEMETRY in os.environ:
        return
    try:
        from prefect.context import get_settings_context

        chosen = {getattr(s, "name", str(s)) for s in get_settings_context().profile.settings}
    except Exception:  # no profile could be read: nothing was chosen there
        chosen = set()
    if SERVER_TELEMETRY not in chosen:
        os.environ[SERVER_TELEMETRY] = "false"


# Prefect's engine logs each task run's end ("Finished in state Completed()") at INFO on
# this logger; a night runs a dozen tasks and more, and dueflow's own lines (on the flow
# run's logger) drowned among them. A level chosen for it by the user is kept.
TASK_RUN_LEVEL = "PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL"
OWN_FLOWS = ("nightly-alerts", "ingest-bounces")


class _OwnTaskRunsFromWarning(logging.Filter):
    """dueflow's task runs log from WARNING up (a failure, a retry still show); other
    flows' task runs in the same process (a notebook's) are left as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or getattr(record, "flow_name", None) not in OWN_FLOWS


def quiet_own_task_runs() -> None:
    """Install the filter once, unless the user set the task runs' log level."""
    logger = logging.getLogger("prefect.task_runs")
    if os.environ.get(TASK_RUN_LEVEL) or any(isinstance(f, _OwnTaskRunsFromWarning) for f in logger.filters):
        return
    logger.addFilter(_OwnTaskRunsFromWarning())


class _LostApiLines(logging.Filter):
    """Prefect's clients say a lost API at WARNING/ERROR for every event they fail to send,
    with the event in full, and the engine with a traceback: one line of dueflow's instead,
    then silence."""

    def __init__(self, without_exception: bool) -> None:
        super().__init__()
        self.without_exception = without_exception  # a client's warning names no exception

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        connection = lost(error) if error is not None else self.without_exception
        if record.levelno < logging.WARNING or not connection:
            return True
        if not _lost:
            _lost.append(record.name)
            print(LOST_LINE, file=sys.stderr, flush=True)
        return False


def quiet_when_lost() -> None:
    """For a command: Prefect's reports of a lost API become LOST_LINE, once; the log
    shipper's own tracebacks (written when logging.raiseExceptions) are off."""
    logging.raiseExceptions = False
    for names, without_exception in ((CLIENT_LOGGERS, True), (RUN_LOGGERS, False)):
        for name in names:
            logger = logging.getLogger(name)
            if not any(isinstance(f, _LostApiLines) for f in logger.filters):  # once a process
                logger.addFilter(_LostApiLines(without_exception))


def was_lost() -> bool:
    return bool(_lost)


def leave(code: int) -> None:
    """End a command whose Prefect API was lost without Prefect's exit-time flush: it would
    retry every queued event against the gone server (7 s each). What the night did is in
    the ledger and was printed."""
    if not _lost:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def api_url() -> str | None:
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def unreachable(timeout: float = PROBE_SECONDS) -> str | None:
    """Why the Prefect API does not answer (one line), or None when it does. One request,
    no retries: the client's own retries take a minute per call to a server that is gone."""
    import httpx

    url = api_url()
    if not url:
        return None
    try:
        httpx.get(f"{url.rstrip('/')}/health", timeout=timeout, verify=_tls(url)).raise_for_status()
    except httpx.HTTPError as exc:
        if isinstance(exc, httpx.TransportError):
            _lost.append("probe")
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else 'no answer'}"
    return None


def _tls(url: str) -> ssl.SSLContext | bool:
    """How the probe checks the API's certificate: as Prefect's own client does (its CA file
    or certifi, or not at all when PREFECT_API_TLS_INSECURE_SKIP_VERIFY). Plain HTTP needs
    no context: loading the CA bundle for nothing cost 20 ms of every night."""
    if not url.lower().startswith("https:"):
        return False
    import ssl

    import certifi
    from prefect.settings import get_current_settings

    api = get_current_settings().api
    if api.tls_insecure_skip_verify:
        return False
    return ssl.create_default_context(cafile=api.ssl_cert_file or certifi.where())


def lost(exc: BaseException) -> bool:
    """Whether an exception out of Prefect says its API is unreachable (not a refusal)."""
    import httpx
    from websockets.exceptions import ConnectionClosed

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.TransportError | ConnectionClosed | ConnectionError | TimeoutError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def ledger_tag(database_url: str, ledger_schema: str | None) -> str:
    """A tag naming the ledger a run works on, without the URL (it may hold a password)."""
    digest = hashlib.sha256(f"{database_url}\0{ledger_schema or ''}".encode()).hexdigest()[:12]
    return f"{STALE_TAG_PREFIX}{digest}"


def crash_stale_runs(flow_run_id: str | None, tag: str) -> list[str]:
    """Mark Crashed every other flow run still 'Running' on this ledger: called while this run
    holds the ledger's run lock (G5), so no other run on it can be alive — such a run lost
    the Prefect API before it could record its end. Returns their ids."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterId,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    stale = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            tags=FlowRunFilterTags(all_=[tag]),
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.RUNNING])),
            id=FlowRunFilterId(not_any_=[UUID(flow_run_id)]) if flow_run_id else None))
        for run in runs:
            client.set_flow_run_state(run.id, Crashed(message=(
                f"stale: a later run ({flow_run_id}) holds this ledger's run lock, so this run's"
                " process had ended; it lost the Prefect API before it could record its end"
                " (its emails are in the ledger; docs/prefect-api.md)")), force=True)
            stale.append(str(run.id))
    return stale


def drain(timeout: float = DRAIN_SECONDS) -> None:
    """Hand the API the events and logs still queued, waiting at most `timeout` seconds:
    after that they are dropped (the ledger and the summary hold what the night did)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        worker.drain_all(timeout=timeout / 2)


def _own_session_server() -> Any:
    from prefect.server.api.server import SubprocessASGIServer

    class OwnSessionServer(SubprocessASGIServer):
        """Prefect's temporary server (prefect.server.api.server.SubprocessASGIServer, 3.9):
        the same command and environment, started in a new session."""

        def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
            import prefect
            from prefect.settings import get_current_settings

            env = {**os.environ, "PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1",
                   "PREFECT__SERVER_FINAL": "1",
                   **get_current_settings().to_environment_variables(exclude_unset=True)}
            return subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "--app-dir", str(prefect.__module_path__.parent),
                 "--factory", "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                 "--port", str(self.port), "--log-level", "error", "--lifespan", "on"],
                env=env, start_new_session=True)

    return OwnSessionServer()


class TemporaryServerDidNotStart(Exception):
    """Prefect's temporary server did not answer within its startup timeout."""


class TemporaryServerCannotStart(Exception):
    """Prefect's temporary server cannot start here (its home cannot be made); the message says why."""


@contextmanager
def temporary_server(startup_timeout: int) -> Iterator[bool]:
    """With PREFECT_API_URL set, nothing (yields False). Without it, Prefect's temporary
    server in a session of its own for the command's lifetime (yields True): what is queued
    for it is handed over before it stops."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if api_url():
        yield False
        return
    from prefect.settings import get_current_settings

    home = Path(get_current_settings().home)
    try:  # the server keeps its database there: a home it cannot make was 300 lines of traceback
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise TemporaryServerCannotStart(f"Prefect's home {home} cannot be created ({exc.strerror})"
                                         ) from None
    server = _own_session_server()
    try:
        server.start(timeout=startup_timeout)
    except RuntimeError as exc:  # Prefect's own, for a server that did not answer in time
        raise TemporaryServerDidNotStart(str(exc)) from exc
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield True
            finally:
                if not _lost:  # a server that stopped answering would be waited on for nothing
                    drain()
    finally:
        server.stop()
