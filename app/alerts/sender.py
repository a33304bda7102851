"""The outbox sender: claims due deliveries, sends each through its notifier, records how.

One row, one transaction::

    claim   SELECT the oldest due pending row (FOR UPDATE SKIP LOCKED on PostgreSQL)
    send    notifier.notify(...)                       (the transaction stays open)
    record  UPDATE it: sent | failed | pending again with a later next_attempt_at; COMMIT

So a row is marked sent in the transaction that claimed it, and on PostgreSQL any number
of processes can run senders: a row locked by one is skipped by the others. SQLite
serves one process (the sender there reads, sends, then writes in a short transaction).

At least once, not exactly once: a crash (or a lost database) after a receiver accepted
a notification and before the COMMIT leaves the row pending, and it is sent again. The
window is one row's UPDATE and COMMIT wide; a sent row is never sent again.

Rows of one alert for one notifier go out in order: a row waits while an older row of
the same alert and notifier is pending (a firing retried in backoff must not arrive
after its resolution). Failures back off exponentially with jitter (5 s · 2^(n-1),
at most 10 min), 4xx fail at once, and a row still failing a day after it was written
is failed for good; ``last_error`` says why.

A row the sender cannot handle (its payload is not an object, or reading or writing it
raises anything but "the database is away") is set aside (``aside``, the service's
quarantine: logged once, on /healthz and /metrics) and passed over until the next start;
the rows after it go on, save those of its alert and notifier, which wait behind it.

A refresh (an alert still firing, re-announced) goes only to notifiers that want one
(``Notifier.refreshes``: Alertmanager); for the others the row is marked ``silenced``
with the reason in ``last_error``, so a chat channel hears changes, not every run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from app.clock import utcnow
from app.notifiers.base import Delivery, Notifier, TransportError, scrub
from app.store import outbox
from app.store.db import Session, Sessions, describe, is_transient, read_sessions
from app.store.quarantine import SetAside
from app.store.wakeups import Doorbell

log = logging.getLogger(__name__)

PENDING, SENT, FAILED, SILENCED = outbox.PENDING, "sent", "failed", "silenced"
_ERROR_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class Backoff:
    base_s: float = 5.0
    cap_s: float = 600.0
    give_up_s: float = 86_400.0
    jitter: float = 0.2  # ± this fraction

    def delay_s(self, failures: int, rng: random.Random) -> float:
        raw = self.base_s * 2.0 ** min(failures - 1, 30)
        spread = 1.0 + self.jitter * (2.0 * rng.random() - 1.0)
        return min(self.cap_s, raw * spread)


@dataclass(frozen=True, slots=True)
class Claimed:
    delivery: Delivery
    attempts: int
    created_at: datetime


@dataclass(frozen=True, slots=True)
class SendResult:
    error: str | None = None
    permanent: bool = False
    retry_after: float | None = None
    skipped: str | None = None  # why nothing was sent, on purpose


@dataclass
class Sender:
    """Sends the outbox. ``notifiers`` may be replaced whole (a reload of the targets file)."""

    sessions: Sessions
    notifiers: dict[str, Notifier[Any]]
    backoff: Backoff = field(default_factory=Backoff)
    batch: int = 20
    clock: Callable[[], datetime] = utcnow
    rng: random.Random = field(default_factory=random.Random)
    aside: SetAside | None = None  # where a row that cannot be handled goes
    # Rung when a delivery is committed (here, or announced by another replica).
    bell: Doorbell = field(default_factory=Doorbell)
    _passed_over: set[int] = field(default_factory=set, repr=False)
    _claimed: int | None = field(default=None, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _inflight: concurrent.futures.Future[SendResult] | None = field(default=None, repr=False)

    async def run_once(self) -> int:
        """Send what is due, at most ``batch`` rows; returns how many rows were handled."""
        return await asyncio.to_thread(self._drain, asyncio.get_running_loop())

    async def send_round(self) -> tuple[int, datetime | None]:
        """``run_once``, then when the next pending row falls due, in one hop to a thread:
        how many rows were handled, and that time (None: none is pending, or a full batch
        was handled and more may be due)."""
        return await asyncio.to_thread(self._round, asyncio.get_running_loop())

    def _round(self, loop: asyncio.AbstractEventLoop) -> tuple[int, datetime | None]:
        # Looked at first: a row ``claim`` could take is pending and due, so a next due time
        # that is none, or later than now, says no claim would find one. Most rounds end
        # here, one statement (no BEGIN, claim and ROLLBACK for nothing).
        due = self._next_due()
        if due is None or due > self.clock():
            return 0, due
        handled = self._drain(loop)
        if handled >= self.batch:
            return handled, None
        return handled, self._next_due()

    def _next_due(self) -> datetime | None:
        # One statement: on PostgreSQL in autocommit, spared a BEGIN and a ROLLBACK.
        with read_sessions(self.sessions)() as session:
            return outbox.next_due(session, self._passed_over)

    def stop(self) -> None:
        """No new row is claimed; a send in flight is abandoned and its row left pending."""
        with self._lock:
            self._stopping.set()
            if self._inflight is not None:
                self._inflight.cancel()

    # In the worker thread ----------------------------------------------------------

    def _drain(self, loop: asyncio.AbstractEventLoop) -> int:
        for handled in range(self.batch):
            if self._stopping.is_set() or not self._step(loop):
                return handled
        return self.batch

    def _step(self, loop: asyncio.AbstractEventLoop) -> bool:
        """One row handled; a row that cannot be is set aside, and the next one is due."""
        self._claimed = None
        try:
            return self._attempt(loop)
        except outbox.UnreadableDelivery as exc:
            self._set_aside(exc.delivery_id, exc.reason)
        except Exception as exc:
            # Away (the database, the network): not the row's fault, it is tried again.
            if is_transient(exc) or isinstance(exc, OSError) or self._claimed is None:
                raise
            self._set_aside(self._claimed, describe(exc))
        return True

    def _set_aside(self, delivery_id: int, reason: str) -> None:
        self._passed_over.add(delivery_id)
        if self.aside is not None:
            self.aside.hold(f"delivery {delivery_id}", reason)
        else:
            log.error("delivery %d set aside: %s", delivery_id, reason)

    def _attempt(self, loop: asyncio.AbstractEventLoop) -> bool:
        with self.sessions.begin() as session:
            claimed = claim(session, self.clock(), self._passed_over)
            if claimed is None:
                return False
            self._claimed = claimed.delivery.id
            outcome = self._send(claimed, loop)
            if outcome is None:
                session.rollback()  # stopping: the row stays pending for the next start
                return False
            status = record(session, claimed, outcome, self.clock(), self.backoff, self.rng)
        _log(claimed.delivery, status, outcome)
        return True

    def _send(self, claimed: Claimed, loop: asyncio.AbstractEventLoop) -> SendResult | None:
        """Runs the send on the event loop (where it can be cancelled) and waits for it."""
        notifier = self.notifiers.get(claimed.delivery.notifier)
        if notifier is None:
            name = claimed.delivery.notifier
            return SendResult(f"no notifier named {name!r} in the targets file")
        if claimed.delivery.refresh and not notifier.refreshes:
            kind = type(notifier).__name__.lower()
            return SendResult(skipped=f"not sent: {kind} notifiers hear changes, not refreshes")
        with self._lock:
            if self._stopping.is_set():
                return None
            future = asyncio.run_coroutine_threadsafe(attempt(notifier, claimed.delivery), loop)
            self._inflight = future
        try:
            # The notifier bounds its own exchange; this bound only guards the thread.
            return future.result(timeout=_limit(notifier) + 5.0)
        except (concurrent.futures.CancelledError, TimeoutError):
            future.cancel()
            return None
        finally:
            with self._lock:
                self._inflight = None


async def attempt(notifier: Notifier[Any], delivery: Delivery) -> SendResult:
    try:
        await notifier.notify(delivery)
    except TransportError as exc:
        return SendResult(exc.message, exc.permanent, exc.retry_after)
    except Exception as exc:
        # A payload this notifier cannot render will not render better later.
        log.exception("notifier %s could not handle delivery %d", notifier.name, delivery.id)
        error = scrub(repr(exc), notifier.secrets())
        return SendResult(f"phasewatch could not build the notification: {error}", permanent=True)
    return SendResult()


def claim(session: Session, now: datetime, passed_over: Collection[int] = ()) -> Claimed | None:
    """The oldest due pending row whose alert has no older pending row for its notifier."""
    due = outbox.claim_due(session, now, passed_over)
    if due is None:
        return None
    delivery = Delivery(due.id, due.notifier, due.payload, due.fired_at, due.transition_id)
    return Claimed(delivery, due.attempts, due.created_at)


def record(
    session: Session,
    claimed: Claimed,
    outcome: SendResult,
    now: datetime,
    backoff: Backoff,
    rng: random.Random,
) -> str:
    """Writes what the attempt came to; returns the row's new status."""
    attempts = claimed.attempts + 1
    values: dict[str, Any] = {"attempts": attempts}
    if outcome.skipped is not None:
        values = {"status": SILENCED, "last_error": outcome.skipped}
    elif outcome.error is None:
        values |= {"status": SENT, "sent_at": now}
    elif outcome.permanent:
        values |= {"status": FAILED, "last_error": _cut(outcome.error)}
    else:
        delay = max(backoff.delay_s(attempts, rng), outcome.retry_after or 0.0)
        retry_at = now + timedelta(seconds=delay)
        if retry_at - claimed.created_at > timedelta(seconds=backoff.give_up_s):
            error = f"gave up after {attempts} attempts: {outcome.error}"
            values |= {"status": FAILED, "last_error": _cut(error)}
        else:
            values |= {"next_attempt_at": retry_at, "last_error": _cut(outcome.error)}
    if not outbox.finish_attempt(session, claimed.delivery.id, values):
        # Only possible where rows are not locked (SQLite with two senders).
        log.warning("delivery %d was handled by someone else meanwhile", claimed.delivery.id)
    return str(values.get("status", PENDING))


def _limit(notifier: Notifier[Any]) -> float:
    timeout = getattr(notifier.config, "timeout", 10.0)
    return float(timeout)


def _cut(text: str) -> str:
    return text if len(text) <= _ERROR_LIMIT else text[: _ERROR_LIMIT - 1] + "…"


def _log(delivery: Delivery, status: str, outcome: SendResult) -> None:
    if status == SENT:
        log.info("delivery %d sent to %s", delivery.id, delivery.notifier)
        return
    if status == SILENCED:
        log.debug("delivery %d to %s %s", delivery.id, delivery.notifier, outcome.skipped)
        return
    how = "failed" if status == FAILED else "will be retried"
    log.warning("delivery %d to %s %s: %s", delivery.id, delivery.notifier, how, outcome.error)
