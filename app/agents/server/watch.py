"""The periodic ``vantage_silent`` check (the decision: app/alerts/silent.py).

Every vantage is judged: each agent of the targets file, and the server's own while this
process probes. Its latest run is the later of the latest stored (any replica's, any
restart's) and the latest the agent pushed here; the server's own is heard while its
scheduler keeps to its schedule (``Watch.on_schedule``). Only the replica that leads
checks, so replicas raise one alert, not one each; a database that is away skips a check.
``heard`` is also what /api/v1/vantages and the vantages page judge, with the same rule.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from app.agents.server.book import VantageBook
from app.alerts.engine import AlertEngine
from app.alerts.identity import Transition
from app.alerts.silent import Heard
from app.clock import utcnow
from app.config import Target, TargetsFile
from app.config.placement import assigned
from app.store.db import is_transient, read_sessions
from app.store.reads.vantagereads import ever_ran, last_runs

log = logging.getLogger(__name__)

CHECK_EVERY_S = (1.0, 30.0)  # the shortest interval watched, kept within these


@dataclass
class VantageWatch:
    alerts: AlertEngine
    book: VantageBook
    targets: Callable[[], TargetsFile]
    leading: Callable[[], bool]
    # The server's own vantage and the targets it probes there; None: it probes nothing.
    own: Callable[[], tuple[str, list[Target]] | None]
    clock: Callable[[], datetime] = utcnow
    # Whether the scheduler probing the server's own vantage keeps to its schedule at a time.
    on_schedule: Callable[[datetime], bool] = lambda _now: False

    async def loop(self) -> None:
        try:
            await asyncio.to_thread(self.check)
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("vantages not checked for silence, database unreachable: %s", exc)
        await asyncio.sleep(self.period())

    def check(self) -> list[Transition]:
        if not self.leading():
            return []
        after = self.targets().vantage_silent_after
        heard = self.heard(self.clock(), after)
        return self.alerts.judge_vantages(heard, self.book.since, after)

    def watched(self) -> dict[str, list[Target]]:
        """Each vantage and the targets it probes (those an agent refused left out)."""
        file = self.targets()
        found = {
            name: [
                t for t in assigned(file.targets, name) if t.name not in self.book.get(name).refused
            ]
            for name in file.vantages
        }
        own = self.own()
        if own is not None:
            found.setdefault(own[0], own[1])
        return found

    def heard(self, now: datetime, after: int) -> list[Heard]:
        watched = self.watched()
        intervals = {v: _shortest(targets) for v, targets in watched.items()}
        longest = max((i for i in intervals.values() if i is not None), default=0.0)
        since = now - timedelta(seconds=2 * after * longest)
        names = {v: [t.name for t in targets] for v, targets in watched.items()}
        # Reads alone (on PostgreSQL in autocommit, no BEGIN and ROLLBACK): a run stored
        # between them can only add a vantage to those that ever ran.
        with read_sessions(self.alerts.sessions)() as session:
            stored = last_runs(session, names, since)
            # Only for those quiet all that window: did they ever report at all?
            quiet = {v: names[v] for v in names if v not in stored}
            ever = set(stored) | ever_ran(session, quiet)
        own = self.own()
        kept = own is not None and self.on_schedule(now)
        heard = []
        for v in sorted(watched):
            latest = latest_of(stored.get(v), self.book.get(v).last_pushed)
            ever_heard = v in ever or latest is not None
            timely = kept and own is not None and v == own[0]
            heard.append(Heard(v, intervals[v], latest, ever=ever_heard, on_schedule=timely))
        return heard

    def period(self) -> float:
        shortest = _shortest(t for targets in self.watched().values() for t in targets)
        low, high = CHECK_EVERY_S
        return min(max(shortest or high, low), high)


def _shortest(targets: Iterable[Target]) -> float | None:
    return min((t.interval for t in targets), default=None)


def latest_of(*times: datetime | None) -> datetime | None:
    """The latest of the times known (a vantage's latest run stored, and pushed here)."""
    return max((t for t in times if t is not None), default=None)
