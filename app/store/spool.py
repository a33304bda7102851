"""A local, append-only spool: finished runs wait here while the database is unreachable.

One JSON line per run, fsynced before ``append`` returns, flushed to the database in the
order written. Storing is idempotent by run id, so a flush that dies half-way is simply
done again. Runs in flight are journalled too (``inflight/``): a run whose process died
is found there on the next start and recorded as aborted instead of vanishing.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.store.records import RunRecord

log = logging.getLogger(__name__)


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "runs.jsonl"
        self.inflight = directory / "inflight"
        self.inflight.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # the file, briefly
        self._flushing = threading.Lock()  # one flush at a time

    def append(self, record: RunRecord) -> None:
        line = json.dumps(record.to_json(), separators=(",", ":")) + "\n"
        with self._lock, self.path.open("a") as spool:
            spool.write(line)
            spool.flush()
            os.fsync(spool.fileno())

    def pending(self) -> int:
        with self._lock:
            return sum(1 for _ in self._lines())

    def has_pending(self) -> bool:
        return self.path.exists()

    def flush(
        self, store: Callable[[RunRecord], Any], transient: Callable[[Exception], bool]
    ) -> int:
        """Store every spooled run in order; returns how many left the spool.

        A transient failure (the database is still away) stops the flush and keeps the
        rest in order. Any other failure would block the spool for ever, so that run is
        set aside in ``rejected.jsonl`` (kept, logged) and the flush goes on. The file lock
        is not held while storing: appends go on meanwhile, behind the lines being flushed.
        """
        with self._flushing:
            with self._lock:
                lines = list(self._lines())
            done = 0
            try:
                for line in lines:
                    self._store_line(line, store, transient)
                    done += 1
            except Exception as exc:
                if not transient(exc):
                    raise
            finally:
                with self._lock:
                    self._rewrite(list(self._lines())[done:])
            return done

    def _store_line(
        self, line: str, store: Callable[[RunRecord], Any], transient: Callable[[Exception], bool]
    ) -> None:
        try:
            store(RunRecord.from_json(json.loads(line)))
        except Exception as exc:
            if transient(exc):
                raise
            log.exception("spooled run could not be stored; set aside in rejected.jsonl")
            with (self.directory / "rejected.jsonl").open("a") as rejected:
                rejected.write(line)

    def _lines(self) -> Iterator[str]:
        if not self.path.exists():
            return
        with self.path.open() as spool:
            yield from (line for line in spool if line.strip())

    def _rewrite(self, remaining: list[str]) -> None:
        if not remaining:
            self.path.unlink(missing_ok=True)
            return
        temporary = self.path.with_suffix(".tmp")
        with temporary.open("w") as spool:
            spool.writelines(remaining)
            spool.flush()
            os.fsync(spool.fileno())
        temporary.replace(self.path)

    # Runs in flight ---------------------------------------------------------------

    def begin(self, record: RunRecord) -> None:
        """Journal a run as it starts; ``end`` removes it once it is stored or spooled."""
        path = self.inflight / f"{record.id}.json"
        path.write_text(json.dumps(record.to_json()))

    def end(self, run_id: uuid.UUID) -> None:
        (self.inflight / f"{run_id}.json").unlink(missing_ok=True)

    def orphans(self) -> list[RunRecord]:
        """Runs journalled by a process that died before finishing them."""
        found = []
        for path in sorted(self.inflight.glob("*.json")):
            try:
                found.append(RunRecord.from_json(json.loads(path.read_text())))
            except (ValueError, KeyError, TypeError):
                log.warning("unreadable in-flight journal %s left aside", path)
                path.rename(path.with_suffix(".bad"))
        return found
