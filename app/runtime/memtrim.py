"""Freed heap given back to the system: glibc's ``malloc_trim(0)`` once a minute.

``serve`` frees nearly all it allocates (each run's samples, query rows, JSON), but glibc
keeps freed chunks inside its arenas and gives back only the top of the main one. Chunks
freed between ones still in use stay resident, and with several threads allocating (the
writer, the evaluation, the rollups, the web server) the heap's holes grew faster than
they were filled: in a soak of 100 targets every 10 s, 80 MB of a 200 MB RSS was free
heap after 4 minutes, and RSS went on rising (issue 36). ``malloc_trim`` hands the whole
free pages of every arena back (``madvise``), so RSS follows what is in use. Elsewhere
(musl, macOS) there is no such call and this does nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)

TRIM_EVERY_S = 60.0

Trim = Callable[[], int]


def malloc_trim() -> Trim | None:
    """glibc's ``malloc_trim(0)`` (1 if memory was given back), or None without glibc."""
    try:
        function = ctypes.CDLL(None).malloc_trim  # the C library this process runs on
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_size_t]
    function.restype = ctypes.c_int
    return lambda: int(function(0))


async def trim_loop(trim: Trim | None, every_s: float = TRIM_EVERY_S) -> None:
    """Trim every ``every_s``, on a thread (it walks every arena under its lock): for ever."""
    if trim is None:
        return
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(trim)
