"""Loops woken when work is put in: the doorbell (any thread rings, one loop waits) and
PostgreSQL's notifications, announced in a transaction and heard by another process's
listener only once it commits."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from app.store import wakeups
from app.store.db import make_engine, make_sessions
from app.store.wakeups import Doorbell, Listener

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NEVER_S = 3600.0  # a wait that only a ring ends within the test's time


async def test_a_ring_before_the_wait_wakes_it_at_once_and_counts_once() -> None:
    bell = Doorbell()
    bell.ring()
    assert await bell.wait(NEVER_S) is True
    assert await bell.wait(0.0) is False  # taken: the next wait is not woken by it again


async def test_a_ring_from_another_thread_wakes_the_waiting_loop() -> None:
    bell = Doorbell()
    waiting = asyncio.create_task(bell.wait(NEVER_S))
    await asyncio.sleep(0)  # the wait has begun
    threading.Thread(target=bell.ring).start()
    assert await asyncio.wait_for(waiting, 30.0) is True


async def test_a_wait_nobody_rings_ends_after_its_timeout_unrung() -> None:
    assert await Doorbell().wait(0.01) is False


async def test_a_wait_cancelled_as_its_bell_rings_ends_cancelled() -> None:
    # A listener rings every bell as it connects: a service stopped just then cancels the
    # loops waiting on them in the same turn of the event loop, and each must end.
    bell = Doorbell()
    waiting = asyncio.create_task(bell.wait(NEVER_S))
    await asyncio.sleep(0)  # the wait has begun
    bell.ring()
    await asyncio.sleep(0)  # the ring has reached the wait, not yet the waiting task
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting


# --- PostgreSQL's notifications -----------------------------------------------------------


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    made = make_engine(postgres_url)
    yield made
    made.dispose()


async def heard_first(listener: Listener, bell: Doorbell) -> asyncio.Task[None]:
    """The listener running, and the ring of its (re)connection taken."""
    task = asyncio.create_task(listener.loop())
    assert await bell.wait(30.0) is True
    assert listener.listening
    return task


async def stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.mark.postgres
async def test_a_committed_announcement_rings_the_listeners_bell(engine: Engine) -> None:
    bell, other = Doorbell(), Doorbell()
    listener = Listener(engine.url, {wakeups.OUTBOX: bell, wakeups.EVALUATIONS: other})
    task = await heard_first(listener, bell)
    try:
        assert await other.wait(0.0) is True  # every bell rung at the connection
        with make_sessions(engine).begin() as session:
            wakeups.announce(session, wakeups.OUTBOX)
        assert await bell.wait(NEVER_S) is True
        assert await other.wait(0.0) is False  # another channel's bell is left alone
    finally:
        await stopped(task)


@pytest.mark.postgres
async def test_an_announcement_is_heard_when_its_transaction_commits(engine: Engine) -> None:
    bell = Doorbell()
    task = await heard_first(Listener(engine.url, {wakeups.OUTBOX: bell}), bell)
    try:
        with make_sessions(engine).begin() as session:
            wakeups.announce(session, wakeups.OUTBOX)
            assert await bell.wait(0.2) is False  # the work is not there for anybody yet
        assert await bell.wait(NEVER_S) is True
    finally:
        await stopped(task)


def test_announcing_on_sqlite_is_nothing() -> None:
    engine = make_engine("sqlite://")
    try:
        with make_sessions(engine).begin() as session:
            wakeups.announce(session, wakeups.OUTBOX)  # no such function there: not called
    finally:
        engine.dispose()
