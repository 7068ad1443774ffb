"""A local SMTP sink in its own process: aiosmtpd, accepts every message, keeps none.

It only counts what it accepted (a counter shared with the parent), so a benchmark
can check that every email it sent arrived exactly once, and notes when the first and the
last of them arrived since `mark()` (wall-clock seconds, shared too): a night's timeline.
On request (`capture(path)` until `end_capture()`) it also appends each accepted message
to a file, one JSON line
{"from", "to", "data" (base64 of the DATA bytes)}: what bench/mail_path.py replays.

Standalone: `python -m bench.smtp_sink --port 8025` (Ctrl-C to stop).
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing as mp
import signal
import socket
import threading
import time
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event
from typing import IO, Any

from aiosmtpd.controller import Controller


class CountingHandler:
    """Accepts every message (250) and counts it; the content is discarded unless captured."""

    def __init__(self, counter: Synchronized[int] | None,
                 arrivals: tuple[Synchronized[float], Synchronized[float]] | None = None) -> None:
        self.counter = counter
        self.arrivals = arrivals  # (first, last) accepted since the parent's mark; 0: none yet
        self.local = 0
        self.capture: IO[str] | None = None
        # What is captured is kept in memory and written when the capture ends: encoding and
        # writing hundreds of MB while dueflow's night is timed slowed the sink (and the night).
        self.captured: list[tuple[str, list[str], bytes]] = []
        self.lock = threading.Lock()  # the capture file is switched from the control thread

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.local += 1
        with self.lock:
            if self.capture is not None:  # kept before it is counted: the parent's count is in it
                self.captured.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content))
        if self.arrivals is not None:
            first, last = self.arrivals
            with first.get_lock():
                now = time.time()
                if not first.value:
                    first.value = now
                last.value = now
        if self.counter is not None:
            with self.counter.get_lock():
                self.counter.value += 1
        return "250 OK queued"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(port: int, counter: Synchronized[int], arrivals: tuple[Synchronized[float], Synchronized[float]],
           ready: Event, stop: Event, control: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us through `stop`
    handler = CountingHandler(counter, arrivals)
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    ready.set()
    try:
        while not stop.is_set():
            if not control.poll(0.2):
                continue
            path = control.recv()  # a file to capture into, or None to close it
            with handler.lock:
                if handler.capture is not None:
                    write_captured(handler)
                handler.capture = open(path, "a", encoding="ascii") if path else None  # noqa: SIM115
            control.send("ok")
    finally:
        controller.stop()
        if handler.capture is not None:
            write_captured(handler)


def write_captured(handler: CountingHandler) -> None:
    """The captured messages as JSON lines (from, to, the DATA bytes in base64); the file closed."""
    assert handler.capture is not None
    for mail_from, rcpt_tos, data in handler.captured:
        handler.capture.write(json.dumps({"from": mail_from, "to": rcpt_tos,
                                          "data": base64.b64encode(data).decode("ascii")}) + "\n")
    handler.capture.close()
    handler.captured = []


class SinkProcess:
    """The sink running in a child process; `received` is the number of messages accepted."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        context = mp.get_context("spawn")
        self._counter: Synchronized[int] = context.Value("q", 0)  # type: ignore[assignment]
        self._arrivals: tuple[Synchronized[float], Synchronized[float]] = (
            context.Value("d", 0.0), context.Value("d", 0.0))
        self._ready = context.Event()
        self._stop = context.Event()
        self._control, child_end = context.Pipe()
        self._process = context.Process(
            target=_serve,
            args=(self.port, self._counter, self._arrivals, self._ready, self._stop, child_end),
            name="dueflow-bench-smtp-sink", daemon=True,
        )

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def received(self) -> int:
        with self._counter.get_lock():
            return int(self._counter.value)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self, timeout: float = 30.0) -> SinkProcess:
        self._process.start()
        if not self._ready.wait(timeout):
            self.stop()
            raise RuntimeError(f"the SMTP sink did not start on port {self.port}")
        return self

    def capture(self, path: str | None) -> None:
        """Append every message accepted from now on to `path` (None: stop, the file closed)."""
        self._control.send(path)
        if not self._control.poll(30) or self._control.recv() != "ok":
            raise RuntimeError("the SMTP sink did not switch its capture")

    def end_capture(self) -> None:
        self.capture(None)

    def mark(self) -> None:
        """Forget the arrivals so far: `arrivals` then says when the next ones came."""
        first, last = self._arrivals
        with first.get_lock():
            first.value = last.value = 0.0

    @property
    def arrivals(self) -> tuple[float, float] | None:
        """When the first and the last message since `mark()` were accepted (time.time()),
        None if none was."""
        first, last = self._arrivals
        with first.get_lock():
            return (first.value, last.value) if first.value else None

    def wait_for(self, count: int, timeout: float = 10.0) -> int:
        """Wait until at least `count` messages arrived (or timeout); return the count."""
        deadline = time.monotonic() + timeout
        while self.received < count and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.received

    def stop(self) -> None:
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(5)

    def __enter__(self) -> SinkProcess:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8025)
    args = parser.parse_args()
    with SinkProcess(args.port) as sink:
        print(f"SMTP sink on {sink.url}; Ctrl-C to stop")
        try:
            while True:
                time.sleep(5)
                print(f"{sink.received} message(s) accepted")
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
