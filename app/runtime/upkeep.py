"""The service's upkeep once the database is ready: rollups, retention, the outbox sender,
the check for silent vantages.

The rollups run on every replica, each for the targets it owns (``app.replicas.rollups``:
it catches up their runs and folds their closed periods); retention, fleet-wide, on the
leader alone (``leading``; the silent-vantage check asks the same); the outbox sender on
every replica (a delivery row is claimed with SKIP LOCKED: sent once, and a replica's death
never stalls the outbox). The sender sleeps until a delivery is committed (its doorbell,
rung here and, on PostgreSQL, by ``listener`` when another replica announces one:
``app.store.wakeups``) or the next retry falls due.

Each is one step of a loop the service runs for ever (``_forever``); a database that is
away makes a step log and give up until the next, never fail the service. One bad item
never stops a loop: it is set aside in ``quarantine`` (``app.store.quarantine``) and the
loop goes on with the rest (a run the rollups cannot add; a prune step the database
refuses, tried again at the next prune).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.sender import Sender
from app.alerts.silent import Heard
from app.clock import utcnow
from app.replicas.rollups import Owned, RollupShare
from app.runtime.foreground import Foreground
from app.store.db import describe, is_transient, read_sessions
from app.store.quarantine import LoopQuarantine, Quarantine
from app.store.retention import prune_raw, prune_summaries, summaries_cutoff
from app.store.rollups.catchup import LOOP, catch_up
from app.store.rollups.digests import CATCH_UP_EVERY_S, prune_fine_rollups
from app.store.rollups.folds import FOLD_LOOKBACK, fold_before_prune, fold_closed, fold_due
from app.store.rollups.inhand import InHand

log = logging.getLogger(__name__)

PRUNE_EVERY_S = 3600.0
ROLLUP_LOOKBACK = timedelta(days=2)
SEND_EVERY_S = 2.0  # at least between two looks at the outbox
SEND_SAFETY_S = 30.0  # at most, woken or not (a row written by a process that told nobody)


class VantageCheck(Protocol):
    """The agents' ``vantage_silent`` check (``app.agents.server.watch.VantageWatch``): a
    loop the service runs for ever beside its own, and what it hears of each vantage at a
    time (which /api/v1/vantages judges by the same rule)."""

    @property
    def clock(self) -> Callable[[], datetime]: ...

    async def loop(self) -> None: ...

    def heard(self, now: datetime, after: int) -> list[Heard]: ...


@dataclass
class Upkeep:
    sessions: sessionmaker[Session]
    engine: Engine
    raw_retention_days: int
    sender: Sender | None = None
    summary_retention_days: int | None = None  # None: summaries are kept forever
    vantages: VantageCheck | None = None  # vantage_silent
    # What waits for the catch-up to yield between its batches (agents' pushes).
    foreground: Foreground = field(default_factory=Foreground)
    quarantine: Quarantine = field(default_factory=Quarantine)
    # Whether this replica keeps retention (the leader, app.store.leader): once is enough,
    # and replicas pruning at once would contend on the same rows.
    leading: Callable[[], bool] = field(default=lambda: True)
    # The runs this process stored, whose samples the catch-up then need not read back.
    in_hand: InHand | None = None
    # Which targets this replica owns (``Replicas.share``): it keeps their rollups.
    owned: Owned = list
    # PostgreSQL's notifications heard (app.store.wakeups.Listener.loop); None: SQLite.
    listener: Callable[[], Awaitable[None]] | None = None
    # When the coarse rollups were last folded (app.store.rollups.folds); None: not yet.
    folded: datetime | None = field(default=None, init=False)
    rollups: RollupShare = field(init=False)

    def __post_init__(self) -> None:
        self.rollups = RollupShare(read_sessions(self.sessions), self.owned)

    def loops(self) -> list[Callable[[], Awaitable[None]]]:
        loops: list[Callable[[], Awaitable[None]]] = [self.rollup_loop, self.prune_loop]
        if self.sender is not None:
            loops.append(self.send_loop)
        if self.vantages is not None:
            loops.append(self.vantages.loop)
        if self.listener is not None:
            loops.append(self.listener)
        return loops

    # Rollups and retention ----------------------------------------------------------

    async def rollup_loop(self) -> None:
        while True:
            await self._catch_up(self.keep_rollups)
            await asyncio.sleep(CATCH_UP_EVERY_S)

    async def _catch_up(self, work: Callable[[datetime, LoopQuarantine], int]) -> None:
        """``work``'s runs added; a pass that fails for something no run of it can be
        blamed for (a query the database refuses) is held as the pass, until one passes."""
        aside = self.quarantine.loop(LOOP)
        try:
            added = await asyncio.to_thread(work, utcnow(), aside)
        except Exception as exc:
            if not is_transient(exc):
                aside.hold("pass", f"{type(exc).__name__}: {describe(exc)}")
                return
            log.warning("rollups not kept up, database unreachable: %s", exc)
            return
        aside.release("pass")
        if added:
            log.debug("%d run(s) added to the rollups", added)

    def keep_rollups(self, now: datetime, aside: LoopQuarantine) -> int:
        """The runs of this replica's targets caught up, then their coarse rollups folded
        if a period has closed. A target new here is caught up over all raw samples (runs
        stored while nobody kept its rollups: an upgrade, an import, a replica that died)
        and its closed periods folded back ``FOLD_LOOKBACK``, once."""
        share = self.rollups.now()
        added = self._caught_up(now - self._retention(), now, share.fresh, aside)
        added += self._caught_up(now - ROLLUP_LOOKBACK, now, share.kept, aside)
        if fold_due(self.folded, now):
            fold_closed(self.sessions, self.folded or now - FOLD_LOOKBACK, now, share.kept)
            self.folded = now
        fold_closed(self.sessions, now - FOLD_LOOKBACK, now, share.fresh)
        self.rollups.reached(share)
        return added

    def _caught_up(
        self, since: datetime, now: datetime, targets: frozenset[int], aside: LoopQuarantine
    ) -> int:
        return catch_up(
            self.sessions,
            since,
            now,
            targets=targets,
            between=self.foreground.quiet,
            aside=aside,
            in_hand=self.in_hand,
        )

    def _before_prune(self, cutoff: datetime) -> Callable[[datetime, LoopQuarantine], int]:
        """Every target's runs whose samples the prune at ``cutoff`` deletes (a day's
        worth: older ones were pruned before), whoever owns them: a run's digest must exist
        before its samples go, or history loses it. Their owners have counted them long
        ago unless nobody kept their rollups then; newer runs are left to their owners."""

        def work(now: datetime, aside: LoopQuarantine) -> int:
            since = cutoff - timedelta(days=1)
            return catch_up(self.sessions, since, now, aside=aside, before=cutoff)

        return work

    def _retention(self) -> timedelta:
        return timedelta(days=self.raw_retention_days)

    async def prune_loop(self) -> None:
        if self.leading():
            await self.prune(utcnow())
            await asyncio.sleep(PRUNE_EVERY_S)
        else:
            await asyncio.sleep(CATCH_UP_EVERY_S)  # a replica that takes the lead prunes soon

    async def prune(self, now: datetime) -> None:
        """Raw samples past the retention (on PostgreSQL whole days, made ahead too), the
        fine rollups past theirs, and summaries past theirs when they have one."""
        cutoff = now - self._retention()
        await self._catch_up(self._before_prune(cutoff))
        if deleted := await self._pruned("prune_raw", lambda e: prune_raw(e, now, cutoff)):
            log.info("pruned %d raw samples older than %s", deleted, cutoff.date())
        # The coarse rows of what it deletes first: a fold missed must not lose its numbers.
        await self._pruned("fold_before_prune", lambda _: fold_before_prune(self.sessions, now))
        if deleted := await self._pruned(
            "prune_fine_rollups", lambda e: prune_fine_rollups(e, now)
        ):
            log.info("pruned %d 5- and 15-minute rollups past their keeping", deleted)
        ended = summaries_cutoff(now, self.raw_retention_days, self.summary_retention_days)
        if ended is not None:
            if deleted := await self._pruned(
                "prune_summaries", lambda e: prune_summaries(e, ended)
            ):
                log.info("pruned %d runs, digests and rollups older than %s", deleted, ended.date())

    async def _pruned(self, name: str, prune: Callable[[Engine], int]) -> int:
        """``prune``'s rows deleted; a step the database refuses is set aside (the other
        steps go on) and tried again at the next prune."""
        aside, item = self.quarantine.loop("prune"), f"step {name}"
        try:
            deleted = await asyncio.to_thread(prune, self.engine)
        except Exception as exc:
            if not is_transient(exc):
                aside.hold(item, describe(exc))
            return 0
        aside.release(item)
        return deleted

    # Notifications ----------------------------------------------------------------

    async def send_loop(self) -> None:
        """What is due sent, then a wait: until a delivery is committed (the sender's bell),
        the next retry falls due, or ``SEND_SAFETY_S`` at most; never less than
        ``SEND_EVERY_S`` (a due row another sender holds, the database away)."""
        assert self.sender is not None
        try:
            handled, due = await self.sender.send_round()
            if handled >= self.sender.batch:
                return  # a full batch: more may be due at once
            wait_s = send_wait_s(due, self.sender.clock())
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("outbox not sent, database unreachable: %s", exc)
            wait_s = SEND_EVERY_S
        await self.sender.bell.wait(wait_s)


def send_wait_s(due: datetime | None, now: datetime) -> float:
    """How long the sender sleeps, unless rung, when the next row falls due at ``due``
    (None: no row is pending)."""
    if due is None:
        return SEND_SAFETY_S
    return min(SEND_SAFETY_S, max(SEND_EVERY_S, (due - now).total_seconds()))
