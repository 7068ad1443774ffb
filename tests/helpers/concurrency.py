"""Timing helpers: start work at the same instant (race), poll until something holds (wait_for)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

import httpx
from sqlalchemy import text

T = TypeVar("T")


def race(engine, work: Sequence[Callable[[], T]]) -> list[T]:
    """Run each callable in its own thread, all released at the same instant, each
    with a database connection already open (so connecting does not stagger them)."""
    barrier = threading.Barrier(len(work))
    results: list[T | None] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
            barrier.wait()
            results[i] = work[i]()
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    if errors:
        raise errors[0]
    return results  # type: ignore[return-value]


def wait_for(check: Callable[[], T | None], what: str = "condition", timeout: float = 180.0,
             details: Callable[[], str] = lambda: "", interval: float = 0.25) -> T:
    """Poll every `interval` seconds until `check` returns something truthy (an HTTP
    error counts as not yet); the timeout is only a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = check()
        except httpx.HTTPError:
            result = None
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{details()}"
        time.sleep(interval)
