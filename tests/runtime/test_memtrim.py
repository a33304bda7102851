"""Freed heap is given back: glibc keeps the holes between live chunks resident until
``malloc_trim``, which ``serve`` calls once a minute (app.runtime.memtrim)."""

from __future__ import annotations

import asyncio
import platform
from pathlib import Path

import pytest

from app.runtime.memtrim import malloc_trim, trim_loop

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)


def anon_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


def test_trim_gives_back_the_holes_a_freed_heap_keeps() -> None:
    trim = malloc_trim()
    assert trim is not None
    trim()
    # 2 KiB objects come from malloc (past pymalloc's 512 bytes): 120 MiB of them, every
    # 32nd kept, so that no freed stretch is at the top of the heap, where free() trims.
    chunks = [bytes(2048) for _ in range(60_000)]
    kept = chunks[::32]
    del chunks
    before = anon_mb()
    trim()
    after = anon_mb()
    assert len(kept) == 1875
    assert before - after > 60, (before, after)


def test_the_loop_trims_every_period_until_cancelled() -> None:
    calls: list[int] = []

    def trim() -> int:
        calls.append(1)
        return 1

    async def three_periods() -> None:
        task = asyncio.create_task(trim_loop(trim, every_s=0.01))
        while len(calls) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(three_periods(), 10))
    assert len(calls) >= 3


def test_without_a_trim_the_loop_ends_at_once() -> None:
    asyncio.run(asyncio.wait_for(trim_loop(None), 5))
