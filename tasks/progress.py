"""Progress of a long delivery on a terminal: one line with the count, the rate and the
time left, rewritten in place.

Delivery reports into this module (`expect` when it is handed emails, `advance` after each
one is handed to the mail server); nothing is shown unless the CLI turned the line on with
`shown_on(stream)` — which it does only when that stream is a terminal — and the run has
more than THRESHOLD emails to send. Piped or logged output never gets it, and a delivery
batch on another machine (Dask) reports nowhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

THRESHOLD = 300  # emails in a run before the line is worth showing
INTERVAL = 0.25  # seconds between two redraws


def _duration(seconds: float) -> str:
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class DeliveryProgress:
    """Counts what a run's deliveries were given and what they handed to SMTP."""

    def __init__(self, stream: IO[str], threshold: int = THRESHOLD, interval: float = INTERVAL) -> None:
        self.stream = stream
        self.threshold = threshold
        self.interval = interval
        self.total = 0
        self.done = 0
        self.started: float | None = None
        self.drawn_at = 0.0
        self.shown = False
        self.lock = threading.Lock()

    def expect(self, emails: int) -> None:
        with self.lock:
            self.total += emails
            if self.started is None and emails:
                self.started = time.monotonic()

    def advance(self, emails: int = 1) -> None:
        with self.lock:
            self.done = min(self.total, self.done + emails)
            now = time.monotonic()
            due = now - self.drawn_at >= self.interval or self.done == self.total
            if self.total > self.threshold and due:
                self.drawn_at = now
                self._draw(now)

    def line(self, now: float) -> str:
        elapsed = max(now - (self.started or now), 1e-6)
        rate = self.done / elapsed
        left = f"{_duration((self.total - self.done) / rate)} left" if rate > 0 else "time left unknown"
        return f"dueflow: sent {self.done:,} of {self.total:,} emails ({rate:,.0f}/s, {left})"

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.line(now) + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def finish(self) -> None:
        with self.lock:
            if self.shown:
                self.stream.write("\n")
                self.stream.flush()


_current: DeliveryProgress | None = None


def expect(emails: int) -> None:
    """A delivery was handed `emails` emails to send."""
    if (progress := _current) is not None:
        progress.expect(emails)


def advance(emails: int = 1) -> None:
    """`emails` more were handed to the mail server (whatever it answered)."""
    if (progress := _current) is not None:
        progress.advance(emails)


@contextmanager
def shown_on(stream: IO[str]) -> Iterator[DeliveryProgress | None]:
    """Show the progress line on `stream` while the block runs — only if it is a terminal."""
    global _current
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        yield None
        return
    _current = progress = DeliveryProgress(stream)
    try:
        yield progress
    finally:
        _current = None
        progress.finish()
