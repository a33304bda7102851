"""A local, append-only spool: finished runs wait here while the database is unreachable.

One JSON line per run, fsynced before ``append`` returns, flushed to the database in the
order written. Storing is idempotent by run id, so a flush that dies half-way is simply
done again. Runs in flight are journalled too (``inflight/``, see ``app.runs.journal``):
a run whose process died is found there and recorded instead of vanishing.

Processes sharing the directory take ``runs.lock`` around every change to ``runs.jsonl``
and ``flush.lock`` to flush, so no append lands in a file being replaced and no two flushes
race. A write that fails (disk full, read-only) leaves nothing behind and is reported by
``problem``, once, not per run. A full disk never keeps a flush from ending: the runs stored
leave the spool even then (rewritten in place, which needs no new block), a run refused for
good that cannot be set aside is counted lost (``losses``) instead of stopping the flush,
and a torn last line (a write cut short by a crash) is never read as a run and is cut off
before the next append.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from app.runs.diskio import (
    FULL_ERRNOS,
    append_durable,
    hold_lock,
    problem_of,
    rewrite_in_place,
    shared_lock,
)
from app.runs.journal import Journal
from app.runs.losses import Losses
from app.runs.sink import SinkAway
from app.runs.spoolbatch import StoreBatch, answered, batches, lines_at
from app.store.records import RunRecord

log = logging.getLogger(__name__)

RUNS_LOCK = b"phasewatch: held around every change to runs.jsonl\n"
FLUSH_LOCK = b"phasewatch: held by the process flushing runs.jsonl\n"
READ_BLOCK = 1 << 20  # bytes of spooled lines read at once by a flush


class Spool:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "runs.jsonl"
        self.inflight = directory / "inflight"
        self._lock = threading.Lock()  # the file, briefly
        self._flushing = threading.Lock()  # one flush at a time
        self._problem: str | None = None
        self._counted = (0, 0, 0)  # inode, bytes counted, lines in them
        self.losses = Losses()  # runs this process could keep nowhere (the writer's too)
        self._appends_fail = False  # the last append failed
        self.journal = Journal(self.inflight, self._failed, self._wrote_small)

    @property
    def problem(self) -> str | None:
        """Why the last write failed (``full: ...``, ``unwritable: ...``); None once one works."""
        return self._problem

    def append(self, record: RunRecord) -> None:
        """Raises OSError when the run could not be written; the file is as it was then."""
        line = json.dumps(record.to_json(), separators=(",", ":")) + "\n"
        self._append(self.path, line.encode())

    def reject(self, record: RunRecord, line: str | None = None) -> None:
        """Set a run aside in ``rejected.jsonl``: refused by the database, kept all the same."""
        line = line or json.dumps(record.to_json(), separators=(",", ":")) + "\n"
        self._append(self.directory / "rejected.jsonl", line.encode())

    def pending(self) -> int:
        """How many runs wait. Counted on from the last count while the file only grows:
        a spool hours deep is not read whole for every /healthz."""
        with self._lock:
            try:
                spool = self.path.open("rb")
            except (FileNotFoundError, NotADirectoryError):
                return 0
            with spool:
                stat = os.fstat(spool.fileno())
                inode, offset, count = self._counted
                if inode != stat.st_ino or offset > stat.st_size:  # replaced, or cut back
                    inode, offset, count = stat.st_ino, 0, 0
                spool.seek(offset)
                for chunk in iter(lambda: spool.read(1 << 20), b""):
                    count += chunk.count(b"\n")
                self._counted = (inode, spool.tell(), count)
                return count

    def has_pending(self) -> bool:
        return self.path.exists()

    def check(self) -> str | None:
        """Write, fsync and remove a small file: is the spool writable right now?"""
        self.journal.claim()
        probe = self.directory / f".probe-{self.journal.owner}"
        try:
            with self._shared():  # which makes the lock file while there is room for it
                append_durable(probe, b"phasewatch spool check\n")
            probe.unlink()
        except OSError as exc:
            self._failed(exc)
            return self._problem
        if not self.has_pending():  # no append waits on it: the check says it all
            self._appends_fail = False
        self._wrote_small()
        return self._problem

    def flush(self, store: StoreBatch, runs: int, size: int) -> int:
        """Store every spooled run in order, handed to ``store`` (a sink's ``store_batch``)
        in batches of at most ``runs`` lines and ``size`` bytes (a longer line alone);
        returns how many left the spool.

        Only the lines answered for leave it: ``SinkAway`` stops the flush and keeps the
        rest in order. A run refused for good (or a line that is not a run) would block the
        spool for ever, so it is set aside in ``rejected.jsonl`` (kept, logged) and the
        flush goes on. The file lock is not held while storing: appends go on meanwhile,
        behind the lines being flushed. Another process flushing the same spool: this one
        leaves it to that one (0).
        """
        return self._exclusive(
            lambda: self._drain(lambda lines: self._consume(lines, store, runs, size))
        )

    def _exclusive(self, flush: Callable[[], int]) -> int:
        """``flush()`` as the one flush of this spool (0 when another process has it)."""
        if not self.has_pending():
            return 0
        with self._flushing:
            try:
                flushing = hold_lock(self.directory / "flush.lock", FLUSH_LOCK)
            except OSError:
                flushing = None
            if flushing is None:
                return 0
            try:
                return flush()
            finally:
                os.close(flushing)

    def _consume(
        self, lines: Iterator[str], store: StoreBatch, runs: int, size: int
    ) -> Iterator[int]:
        """Yields how many more lines are done, batch by batch, until one is not taken whole."""
        for batch in batches(lines, runs, size):
            answers = answered(batch, store)
            refused = [
                line
                for line, answer in zip(batch, answers, strict=False)
                if isinstance(answer, str)
            ]
            if refused:  # one line a batch, not one a run
                log.error(
                    "%d spooled run(s) refused, set aside in rejected.jsonl; the first: %s",
                    len(refused),
                    next(answer for answer in answers if isinstance(answer, str)),
                )
                self._set_aside(refused)
            yield len(answers)
            if len(answers) < len(batch):
                return

    def _set_aside(self, lines: list[str]) -> None:
        """Into ``rejected.jsonl``; those it cannot take are counted lost, and the flush
        goes on: they would never be stored anyway, and keeping them would block the rest."""
        unwritten = 0
        for line in lines:
            try:
                self._append(self.directory / "rejected.jsonl", line.encode())
            except OSError:
                unwritten += 1
        if unwritten:
            why = f"refused for good and not set aside in rejected.jsonl ({self._problem})"
            self.losses.told(unwritten, why)

    def _drain(self, consume: Callable[[Iterator[str]], Iterator[int]]) -> int:
        """Hands the spooled lines to ``consume``, which yields how many more are done; the
        lines not done stay, in order, also when the sink going away stops it."""
        done = 0
        try:
            for count in consume(self._blocks()):
                done += count
        except SinkAway:
            pass
        finally:
            if done:  # else the file stays as it is: nothing to rewrite on a full disk
                with self._shared():
                    self._rewrite(self._lines()[done:])
        return done

    def _blocks(self) -> Iterator[str]:
        """The spooled lines in order, read ``READ_BLOCK`` bytes at a time under the lock
        (never held while the caller stores them). A flush tried while the sink is away
        stops at its first batch: it reads one block, not a spool hours deep, at every try."""
        offset = 0
        while True:
            with self._shared():
                block, offset = lines_at(self.path, offset, READ_BLOCK)
            if not block:
                return
            yield from block

    def _lines(self) -> list[str]:
        return lines_at(self.path, 0, sys.maxsize)[0]

    def _rewrite(self, remaining: list[str]) -> None:
        """Keep ``remaining``; should that fail, the stored lines stay and are stored again
        (a no-op) at the next flush."""
        temporary = self.path.with_suffix(".tmp")
        try:
            if not remaining:
                self.path.unlink(missing_ok=True)
                return
            with temporary.open("w") as spool:
                spool.writelines(remaining)
                spool.flush()
                os.fsync(spool.fileno())
            temporary.replace(self.path)
        except OSError as exc:
            temporary.unlink(missing_ok=True)
            if exc.errno not in FULL_ERRNOS or not self._rewritten_in_place(remaining):
                self._failed(exc)

    def _rewritten_in_place(self, remaining: list[str]) -> bool:
        """On a full disk the stored lines must still go, or they are stored again at every
        flush for as long as the disk stays full: written over the file instead."""
        try:
            rewrite_in_place(self.path, "".join(remaining).encode())
        except (OSError, ValueError) as exc:
            log.error("spool %s: stored runs not removed: %s", self.directory, exc)
            return False
        return True

    def _append(self, path: Path, data: bytes) -> None:
        try:
            # Made on first use, as the journal makes its own: a spool nobody wrote to yet
            # (or whose folder was removed) is still a place to put a run.
            self.directory.mkdir(parents=True, exist_ok=True)
            with self._shared():
                torn = append_durable(path, data)
        except OSError as exc:
            self._appends_fail = True
            self._failed(exc)
            raise
        self._appends_fail = False
        if torn:
            log.warning("%s: a torn last line (%d bytes, a write cut short) cut off", path, torn)
        self._wrote()

    def _shared(self) -> Any:
        return shared_lock(self.directory / "runs.lock", RUNS_LOCK, self._lock)

    def _failed(self, exc: OSError) -> None:
        problem = problem_of(exc)
        if problem != self._problem:
            log.error("spool %s %s; probing goes on", self.directory, problem)
        self._problem = problem

    def _wrote_small(self) -> None:
        """A small write (a journal, the check) worked. While appends fail that says
        little (on a full disk a page freed takes a small file, not the runs behind it):
        the spool is writable again once an append works, not at every flap between."""
        if not self._appends_fail:
            self._wrote()

    def _wrote(self) -> None:
        if self._problem is not None:
            log.info("spool %s writable again", self.directory)
        self._problem = None

    # Runs in flight ---------------------------------------------------------------

    def begin(self, record: RunRecord) -> bool:
        """Journal a run as it starts (or as it waits to be stored); ``end`` removes it."""
        return self.journal.begin(record)

    def end(self, run_id: uuid.UUID) -> None:
        self.journal.end(run_id)

    def adopt_orphans(self) -> list[RunRecord]:
        """Runs journalled by processes that died before finishing them."""
        return self.journal.adopt_orphans()

    def close(self) -> None:
        self.journal.close()
