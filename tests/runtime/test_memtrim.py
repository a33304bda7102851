"""Freed heap is given back: glibc keeps the holes between live chunks resident until
``malloc_trim``, which ``serve`` calls once a minute; and serve's threads share two arenas
(app.runtime.memtrim)."""

from __future__ import annotations

import asyncio
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from app.runtime.memtrim import ARENA_MAX, arenas_to_set, limit_arenas, malloc_trim, trim_loop

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


ARENAS_IN_A_CHILD = """
import ctypes, sys, threading
from app.runtime.memtrim import limit_arenas
limit_arenas(int(sys.argv[1]) if sys.argv[1] != "none" else None)
barrier = threading.Barrier(6)
kept = []
def allocate():
    barrier.wait()  # all six allocate at once: each would take an arena of its own
    kept.append([bytes(4096) for _ in range(200)])
threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


def arenas_of_a_child(limit: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", ARENAS_IN_A_CHILD, limit],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"},
    )
    return sum(1 for line in done.stderr.splitlines() if line.startswith("Arena "))


def test_six_threads_allocating_at_once_share_the_two_arenas_set_at_start() -> None:
    assert arenas_of_a_child("none") > 2  # glibc's own limit is 8 per core
    assert arenas_of_a_child(str(ARENA_MAX)) <= ARENA_MAX


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ARENA_MAX),
        ({"PATH": "/usr/bin"}, ARENA_MAX),
        ({"MALLOC_ARENA_MAX": "4"}, None),  # the user's own, which glibc already applied
        ({"MALLOC_ARENA_MAX": ""}, None),
    ],
)
def test_the_arena_limit_is_set_unless_the_user_set_glibcs_own(
    environ: dict[str, str], expected: int | None
) -> None:
    assert arenas_to_set(environ) == expected


def test_no_limit_asked_sets_nothing() -> None:
    assert limit_arenas(None) is False
