"""Loops woken when work is put in, not polling for it: the outbox sender and the claim of
evaluations one replica asks of another.

A ``Doorbell`` is rung by whoever puts work in, from any thread, after the work is
committed; the loop waiting on it wakes at once, or after its safety poll. In one process
that is all (SQLite, and a replica's own alerts). Between replicas on PostgreSQL, the
transaction that puts work in also ``announce``\\ s it (``NOTIFY``, sent by the database at
commit, never for a rollback), and each replica's ``listen`` rings its bells when it hears.

Nothing depends on a notification arriving: one sent while a listener's connection is
down is lost, so a listener rings every bell each time it (re)connects, and every loop
still looks at least once a safety poll (a row written by a process that announces
nothing: an older version during an upgrade, a hand-made fix).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Mapping

import psycopg
from psycopg import sql
from sqlalchemy import URL, text
from sqlalchemy.orm import Session

from app.store.db import POSTGRES_CONNECT_ARGS

log = logging.getLogger(__name__)

OUTBOX = "phasewatch_outbox"  # a delivery is due now
EVALUATIONS = "phasewatch_evaluations"  # a replica asks the owner of a target to evaluate it
RETRY_S = 5.0  # between a listener's tries to (re)connect

_NOTIFY = text("SELECT pg_notify(:channel, '')")


async def waited(event: asyncio.Event, timeout_s: float) -> bool:
    """Until ``event`` is set, or ``timeout_s`` passed; whether it is set.

    Not ``asyncio.wait_for``: on Python 3.11 a cancellation landing as the inner wait ends
    is dropped (the inner result returned), which kept a loop waiting on a doorbell from
    stopping (the listener rings every bell as it connects, just when a quick
    start-then-stop cancels the loops). Here a cancellation always ends the wait."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, timeout_s)):
            await event.wait()
    return event.is_set()


class Doorbell:
    """Rung from any thread; waited on by one loop. A ring is never lost (one rung while
    nobody waits wakes the next wait at once); a wake may be spurious."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rung = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._event: asyncio.Event | None = None

    def ring(self) -> None:
        with self._lock:
            self._rung = True
            loop, event = self._loop, self._event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(event.set)

    async def wait(self, timeout_s: float) -> bool:
        """Until rung, or ``timeout_s`` passed; whether it was rung (since the last wait)."""
        event = self._bound()
        if not self._take():
            await waited(event, timeout_s)
            event.clear()
            return self._take()
        event.clear()
        return True

    def _take(self) -> bool:
        with self._lock:
            rung, self._rung = self._rung, False
        return rung

    def _bound(self) -> asyncio.Event:
        with self._lock:
            if self._event is None:
                self._loop, self._event = asyncio.get_running_loop(), asyncio.Event()
            return self._event


def announce(session: Session, channel: str) -> None:
    """``channel``'s listeners told when ``session``'s transaction commits (PostgreSQL;
    notifications of one transaction on one channel arrive once)."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(_NOTIFY, {"channel": channel})


class Listener:
    """For ever (``loop``): each notification on one of ``bells``' channels rings its bell,
    on a connection of its own. Every bell is rung at each (re)connection: what was
    announced meanwhile was heard by nobody here."""

    def __init__(self, url: URL, bells: Mapping[str, Doorbell]) -> None:
        self.conninfo = url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.bells = dict(bells)
        self.listening = False
        self._told = False  # the connection's loss logged once an outage, not at every try

    async def loop(self) -> None:
        while True:
            try:
                await self._listen()
            except (psycopg.Error, OSError) as exc:
                if not self._told:
                    log.warning("not listening for work put in (polling meanwhile): %s", exc)
                self._told = True
            self.listening = False
            await asyncio.sleep(RETRY_S)

    async def _listen(self) -> None:
        connect = psycopg.AsyncConnection.connect
        async with await connect(self.conninfo, autocommit=True, **POSTGRES_CONNECT_ARGS) as conn:
            for channel in self.bells:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            self.listening, self._told = True, False
            for bell in self.bells.values():
                bell.ring()
            while True:
                await _readable(conn.fileno())
                async for notice in conn.notifies(timeout=0):  # what arrived, then back
                    if (heard := self.bells.get(notice.channel)) is not None:
                        heard.ring()


async def _readable(fd: int) -> None:
    """Until ``fd`` has something to read (a notification, or the connection's end), on
    the event loop's selector alone: psycopg's own ``notifies()`` wakes every 0.1 s to
    look (its wait interval), 600 times a minute for nothing."""
    loop = asyncio.get_running_loop()
    readable: asyncio.Future[None] = loop.create_future()

    def heard() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(fd, heard)
    try:
        await readable
    finally:
        loop.remove_reader(fd)
