"""This replica's standing: its lease renewed (``app.replicas``) and the lead checked
(``app.store.leader``) by one loop, one hop to a thread a pass.

Each keeps its own period: the lease a third of ``lease_s`` (a second while the leases could
not be read: ``Replicas.next_renewal_s``), the lead ``leader_check_s``. One due within half
the shorter period goes with the other, early, never late: a lease renewed or a lead checked
early only tightens its bound. With the defaults (both 5 s) the two keep one rhythm, one
wake-up and one hop where there were two. Together, while this process leads, the renewal's
one statement goes on the lock's own connection and stands for its liveness check (the
``SELECT 1``): one round trip where there were two. Should it fail there, ``SELECT 1``
decides as before whether the connection lives (only a dead one loses the lock), and the
renewal is done on a pooled connection, as alone.

One check and one renewal at a time (the start-up asks for each too): one stuck on a frozen
database is waited on, not doubled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection

from app import clock
from app.replicas.membership import Replicas
from app.store.leader import Leadership


@dataclass
class Standing:
    leadership: Leadership
    replicas: Replicas
    lead_every_s: float  # ``leader_check_s``
    monotonic: Callable[[], float] = clock.monotonic
    _lead_at: float = 0.0  # when the lead is checked next (monotonic); both at once at first
    _share_at: float = 0.0  # when the lease is renewed next
    _lead_check: asyncio.Future[bool] | None = field(default=None, repr=False)
    _renewal: asyncio.Future[bool] | None = field(default=None, repr=False)

    def check_lead(self) -> asyncio.Future[bool]:
        """The lead checked now (the check running, if one is); whether this process leads."""
        if _idle(self._lead_check):
            self._lead_check = asyncio.ensure_future(asyncio.to_thread(self.keep, True, False))
        assert self._lead_check is not None
        return asyncio.shield(self._lead_check)

    async def renew(self) -> None:
        """The lease renewed now (the renewal running, if one is)."""
        if _idle(self._renewal):
            self._renewal = asyncio.ensure_future(asyncio.to_thread(self.keep, False, True))
        assert self._renewal is not None
        await asyncio.shield(self._renewal)

    async def step(self) -> bool:
        """What is due now, in one hop; whether the lease was renewed."""
        lead, share = self.due(self.monotonic())
        fresh = (lead and _idle(self._lead_check), share and _idle(self._renewal))
        if any(fresh):
            work = asyncio.ensure_future(asyncio.to_thread(self.keep, *fresh))
            self._lead_check = work if fresh[0] else self._lead_check
            self._renewal = work if fresh[1] else self._renewal
        asked = [f for f, due in ((self._lead_check, lead), (self._renewal, share)) if due]
        await asyncio.shield(asyncio.gather(*(f for f in asked if f is not None)))
        self.done(lead, share, self.monotonic())
        return share

    def due(self, now: float) -> tuple[bool, bool]:
        """Whether the lead check and the renewal are due at ``now``: one due, and the
        other with it if due within half the shorter period."""
        lead, share = now >= self._lead_at, now >= self._share_at
        if lead or share:
            early = min(self.lead_every_s, self.replicas.next_renewal_s) / 2
            lead = lead or self._lead_at - now <= early
            share = share or self._share_at - now <= early
        return lead, share

    def done(self, lead: bool, share: bool, now: float) -> None:
        if lead:
            self._lead_at = now + self.lead_every_s
        if share:
            self._share_at = now + self.replicas.next_renewal_s

    def wait_s(self) -> float:
        """Until the next is due."""
        return max(0.0, min(self._lead_at, self._share_at) - self.monotonic())

    def keep(self, lead: bool, share: bool) -> bool:
        """Blocking (a worker thread's): the lead checked and the lease renewed, as asked;
        whether this process leads."""
        if not (lead and share):
            if share:
                self.replicas.renew()
            return self.leadership.check() if lead else self.leadership.leading
        renewed: list[Any] = []

        def on_lock(connection: Connection) -> bool:
            if self.replicas.renew_on(connection):
                renewed.append(connection)
            return bool(renewed)

        leading = self.leadership.check(on_lock)  # leading, alive: on_lock ran
        if not renewed:  # not leading, a lock just taken, or the statement failed on it
            self.replicas.renew()
        return leading


def _idle(future: asyncio.Future[Any] | None) -> bool:
    return future is None or future.done()
