"""Which of several phasewatch processes on one PostgreSQL database schedules the probes.

The leader holds a session-level advisory lock on a connection of its own. When the
leader dies, PostgreSQL ends its session and frees the lock, and the next process to ask
takes it. SQLite serves a single process (``sqlitelock`` refuses a second), which always
leads.

When the leader's connection breaks it tries to take the lock again: if the database is
unreachable it keeps leading (nobody else can take the lock either, and probing must go
on into the spool); if the lock has meanwhile gone to another process, it steps down.

A process that has never reached the database does not lead: another may hold the lock
(a leader probing into its spool through the outage), and replicas started together
during one would all probe every slot. It waits, probing nothing, until the database
answers and elects one of them (``elected``; ``/healthz`` says it is waiting). No slot is
probed twice; the price is that a lone replica started during an outage probes only
once the database is back.

A change of lead is logged by the check that makes it, whichever caller asked (the
service asks at start, once the schema is there, and every ``leader_check_s``): a log
line written by one caller after comparing before and after missed a lead another
caller's check had taken meanwhile. Checks and the release are serialized (they run on
different threads), and a released lead is not taken again: a check still running in a
stopping service would otherwise take the lock back, on a connection nobody releases.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from app.store.db import autocommit

log = logging.getLogger(__name__)

LOCK_KEY = 0x7068_6173_6577_6174 & 0x7FFF_FFFF_FFFF_FFFF  # "phasewat", as a bigint


class Leadership:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.connection: Connection | None = None
        # Whether a check has reached the database; until then nobody leads on PostgreSQL.
        self.elected = not self.contested
        self.leading = not self.contested
        self.released = False  # given up for good: the process is stopping
        self._lock = threading.Lock()

    @property
    def contested(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def check(self, alive: Callable[[Connection], bool] | None = None) -> bool:
        """Keep, take or lose the lead; returns whether this process leads now. ``alive``:
        work for the lock's own connection (the lease's renewal) that says whether a
        statement went through on it, in place of the liveness check's ``SELECT 1`` (run
        after all when it says no: only a dead connection loses the lock)."""
        if not self.contested:
            return True
        with self._lock:
            was = self.leading
            if not self.released:
                self._check(alive)
            if self.leading and not was:
                log.info("took the lead: retention and silent-vantage checks run here")
            elif was and not self.leading:
                log.warning("lost the lead: another replica keeps retention")
            return self.leading

    def _check(self, alive: Callable[[Connection], bool] | None) -> None:
        if self.connection is not None and self._alive(self.connection, alive):
            return
        self._drop()
        try:
            self.leading = self._take()
        except DBAPIError as exc:
            # Unreachable: a leader stays leader, a follower (or a process not yet elected)
            # stays as it is.
            log.warning("leadership not verifiable (%s); leading=%s", exc.orig, self.leading)
        else:
            self.elected = True

    def _take(self) -> bool:
        # Autocommit: the lock is the session's, no transaction stays open, and the check
        # that the connection lives (``_alive``, every ``leader_check_s``) is one round trip
        # (not BEGIN, SELECT, COMMIT).
        connection = autocommit(self.engine)
        try:
            query = text("SELECT pg_try_advisory_lock(:key)")
            got = bool(connection.scalar(query, {"key": LOCK_KEY}))
        except DBAPIError:
            connection.close()
            raise
        if got:
            self.connection = connection
        else:
            connection.close()
        return got

    @staticmethod
    def _alive(connection: Connection, alive: Callable[[Connection], bool] | None = None) -> bool:
        try:
            if alive is not None and not alive(connection):
                if connection.invalidated:
                    return False  # its statement found the connection gone
                connection.rollback()  # SQLAlchemy's own state (autocommit: nothing sent)
                alive = None
            if alive is None:
                connection.exec_driver_sql("SELECT 1")  # no statement to build each time
        except DBAPIError:
            return False
        return True

    def _drop(self) -> None:
        if self.connection is not None:
            try:
                self.connection.invalidate()
                self.connection.close()
            except DBAPIError:
                pass
            self.connection = None

    def release(self) -> None:
        """Give the lead up for good (stopping): another process may take it at once."""
        with self._lock:
            self.released = True
            if self.connection is not None and self._alive(self.connection):
                query = text("SELECT pg_advisory_unlock(:key)")
                self.connection.execute(query, {"key": LOCK_KEY})
            self._drop()
            self.leading = not self.contested
