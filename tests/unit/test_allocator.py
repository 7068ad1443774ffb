"""tasks/adapters/allocator.py: the pages a night frees go back to the operating system."""

from __future__ import annotations

import os

import pytest

from dueflow.tasks.adapters.allocator import _malloc_trim, give_back_freed_memory


def resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(_malloc_trim() is None, reason="the C library has no malloc_trim (not glibc)")
def test_memory_freed_among_live_blocks_is_given_back():
    # Blocks under glibc's mmap threshold, every other one kept alive: freeing the others
    # leaves holes between live blocks, which the heap cannot give back on its own.
    blocks = [b"x" * 100_000 + bytes([n % 256]) for n in range(600)]
    kept = blocks[::2]
    del blocks
    before = resident_bytes()
    assert give_back_freed_memory()
    assert resident_bytes() < before - 15_000_000, (before, resident_bytes())
    assert len(kept) == 300
