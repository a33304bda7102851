"""One ``serve`` per SQLite file: a second would lead and probe the same targets beside the
first (SQLite has no leader lease across processes that both think they are alone), so it
is refused at start with one line that names the first.

The hold is an advisory ``flock`` on a file beside the database (``<file>.serve-lock``, the
holder's pid inside), released by the kernel when the process ends, however it ends: a
crashed ``serve`` never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

from app.store.db import sqlite_file


class DatabaseInUse(Exception):
    pass


class SqliteHold:
    """Holds the lock while it lives (``release`` or the process's end lets it go)."""

    def __init__(self, handle: IO[str]) -> None:
        self._handle: IO[str] | None = handle

    def release(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def hold_sqlite_file(url: str) -> SqliteHold | None:
    """The hold on ``url``'s SQLite file; None for another database (PostgreSQL leads by
    a lease of its own) or an in-memory one. ``DatabaseInUse`` names the process holding it."""
    database = sqlite_file(url)
    if database is None:
        return None
    path = Path(f"{Path(database).resolve()}.serve-lock")
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise DatabaseInUse(
            f"another phasewatch serve (pid {holder}) is using the SQLite file {database}:"
            " one serve per SQLite file; stop that one, give this one another file"
            " (PHASEWATCH_DATABASE_URL), or use PostgreSQL for several replicas"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return SqliteHold(handle)
