"""The in-flight journal: each run is written down as it starts, so a crash cannot lose it.

Several processes may share one spool directory (replicas on one data volume). Each
journals under a name of its own (``inflight/<owner>.<run id>.json``) and holds
``inflight/<owner>.lock`` (an ``flock``) for as long as it lives. Another process adopts
journals only when their owner's lock is free, that is when their owner is dead: a live
process's runs in flight are never taken for crash leftovers. Adopting renames a journal
to the adopter's own name first, so a crash while recovering it loses nothing either.

An flock is shared by the processes of one kernel: containers of one host on a shared
volume, yes; hosts sharing a network filesystem only as far as it honours flock.

Journal names without an owner (``<run id>.json``) come from versions before owners; they
are adopted as leftovers, as those versions did.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Callable
from pathlib import Path

from app.runs.diskio import create_held, try_lock_existing, write_atomic
from app.store.records import RunRecord

log = logging.getLogger(__name__)

Failed = Callable[[OSError], None]


class Journal:
    def __init__(self, directory: Path, failed: Failed, wrote: Callable[[], None]) -> None:
        self.directory = directory
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._failed, self._wrote = failed, wrote
        self._lock_fd: int | None = None  # taken at the first journal (nothing on disk before)

    @property
    def lock_path(self) -> Path:
        return self.directory / f"{self.owner}.lock"

    def claim(self) -> bool:
        """Hold this process's lock (again: the directory may have been unwritable)."""
        if self._lock_fd is not None:
            return True
        says = f"phasewatch process {os.getpid()}: its runs in flight are {self.owner}.*.json\n"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock_fd = create_held(self.lock_path, says.encode())
        except OSError as exc:
            self._failed(exc)
            return False
        return True

    def begin(self, record: RunRecord) -> bool:
        """Journal ``record`` (again, to replace it); False when it could not be written.

        Never raises: a spool that cannot be written must not stop probing.
        """
        if not self.claim():
            return False  # unlocked, another process could take the journal for a leftover
        try:
            write_atomic(self._path(record.id), json.dumps(record.to_json()).encode())
        except OSError as exc:
            self._failed(exc)
            return False
        self._wrote()
        return True

    def end(self, run_id: uuid.UUID) -> None:
        try:
            self._path(run_id).unlink(missing_ok=True)
        except OSError as exc:
            self._failed(exc)

    def close(self) -> None:
        """Let go of the lock, as the process's end would; the lock file goes if nothing is left."""
        if self._lock_fd is None:
            return
        try:
            if not any(self.directory.glob(f"{self.owner}.*.json")):
                self.lock_path.unlink(missing_ok=True)
        except OSError:
            pass  # the lock file stays; the next process to adopt removes it
        os.close(self._lock_fd)
        self._lock_fd = None

    def adopt_orphans(self) -> list[RunRecord]:
        """The journals of dead processes, renamed to this one's; live owners' are left alone."""
        if not self.claim():
            return []
        found: list[RunRecord] = []
        for lock in sorted(self.directory.glob("*.lock")):
            if lock.stem != self.owner:
                found += self._adopt_from(lock)
        legacy = [p for p in self.directory.glob("*.json") if "." not in p.stem]
        return found + self._adopt(sorted(legacy))

    def _adopt_from(self, lock: Path) -> list[RunRecord]:
        fd = try_lock_existing(lock)
        if fd is None:
            return []  # alive (or adopted by another process just now)
        try:
            found = self._adopt(sorted(self.directory.glob(f"{lock.stem}.*.json")))
            for aside in self.directory.glob(f".{lock.stem}.*.tmp"):
                aside.unlink(missing_ok=True)
            lock.unlink(missing_ok=True)
            return found
        finally:
            os.close(fd)

    def _adopt(self, paths: list[Path]) -> list[RunRecord]:
        found = []
        for path in paths:
            try:
                found += self._adopt_one(path)
            except OSError as exc:
                self._failed(exc)
        return found

    def _adopt_one(self, path: Path) -> list[RunRecord]:
        try:
            record = RunRecord.from_json(json.loads(path.read_text()))
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable in-flight journal %s left aside", path)
            path.rename(path.with_suffix(".bad"))
            return []
        os.replace(path, self._path(record.id))
        return [record]

    def _path(self, run_id: uuid.UUID) -> Path:
        return self.directory / f"{self.owner}.{run_id}.json"
