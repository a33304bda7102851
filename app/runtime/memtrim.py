"""Freed heap given back to the system: glibc's ``malloc_trim(0)`` once a minute, and
two arenas for all of serve's threads (``limit_arenas``, at start).

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
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

TRIM_EVERY_S = 60.0
# glibc gives each thread that allocates an arena of its own, up to 8 per core. A chunk
# freed on one thread goes back to the arena it came from, so serve's threads (the writer,
# the evaluation, the rollups, the web server, the to_thread pool) each kept a heap of holes
# that the others' allocations could not fill; two arenas share them (bench/README.md, "Soak").
ARENA_MAX = 2
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h

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


def arenas_to_set(environ: Mapping[str, str]) -> int | None:
    """The arena limit to set, or None when the user set glibc's own MALLOC_ARENA_MAX."""
    return None if "MALLOC_ARENA_MAX" in environ else ARENA_MAX


def limit_arenas(count: int | None) -> bool:
    """glibc's ``mallopt(M_ARENA_MAX, count)``: call before any thread starts (the arenas
    threads already took stay). True if set; False without glibc or with ``count`` None."""
    if count is None:
        return False
    try:
        function = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    function.argtypes = [ctypes.c_int, ctypes.c_int]
    function.restype = ctypes.c_int
    return bool(function(_M_ARENA_MAX, count))


async def trim_loop(trim: Trim | None, every_s: float = TRIM_EVERY_S) -> None:
    """Trim every ``every_s``, on a thread (it walks every arena under its lock): for ever."""
    if trim is None:
        return
    while True:
        await asyncio.sleep(every_s)
        await asyncio.to_thread(trim)
