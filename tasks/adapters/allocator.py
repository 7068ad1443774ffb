"""The C allocator's freed memory given back to the operating system.

glibc's malloc keeps what a process frees for its own reuse: a night that renders and
stores tens of thousands of messages, chunk by chunk, frees each chunk's megabytes of text
and arrays, yet stays resident at its high-water mark, freed pages scattered among live
ones. `malloc_trim(0)` returns every whole free page (the remedy Dask's workers use): 75 MB
at the end of one 30,000-email surge's compose; with each job's frames let go as well
(tasks/night.py `send_job`), its peak went from 416-433 to 380-390 MB (docs/performance.md)."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable
from functools import cache


@cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library has none (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return getattr(libc, "malloc_trim", None)


def give_back_freed_memory() -> bool:
    """Return the allocator's free pages to the operating system; whether any came back.
    A walk of the heap, milliseconds: once per chunk of a night, never per email."""
    trim = _malloc_trim()
    return bool(trim(0)) if trim is not None else False
