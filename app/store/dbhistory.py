"""Stored runs as the detectors see them: the evaluator's ``History`` over the database.

The contract is app.alerts.history's. Runs are rebuilt from their raw samples; a run whose
samples were pruned, wholly or in part, cannot be rebuilt and is left out of ``window``
and ``last``. ``counts`` reads the run rows alone, so pruned runs stay in it.

Rebuilding is the costly part, so built runs are kept: the last few of each (target,
vantage), which every evaluation asks for several times, and the last reference window
of each while it holds at most ``KEPT_WINDOW_RUNS`` runs (a week of 15-minute runs is 672;
a run kept costs ~1.5 KB). A longer one, a week of a target probed every 10 s (60,480
runs), is read again at its daily rebuild instead of held all day: kept, 100 such targets
held ~9 GB. Which runs are wanted is always asked of the database (a light query on the
runs index), so a run flushed late from the spool, older than runs already seen, is
found; only runs not built yet have their samples read.

In ``serve`` the store hands each run it stored to ``add`` (``DatabaseSink``'s ``stored``
hook), samples and all. From then on ``last`` of that (target, vantage) is answered from
the runs kept after one index seek an evaluation (is the database's newest run the newest
kept? a push taken by another replica is found by the next evaluation at the latest), for
``RESYNC_S`` after the database was last read for it; ``vantages`` of that target is asked
again as rarely. Only older runs stored by another process (a spool flushed late, an
import) are found up to ``RESYNC_S`` late.
Reading the runs at every evaluation was most of an evaluation's cost (bench/fleet.py).
"""

from __future__ import annotations

import bisect
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.runs import RunCount, RunData, run_from_samples
from app.store.db import read_sessions
from app.store.handoff import HandOff
from app.store.historyrows import (
    heads_of,
    newest_by_vantage,
    newest_of_each,
    run_counts,
    samples_of,
)
from app.store.models import RunRow
from app.store.records import RunRecord, RunStatus
from app.store.vantagetimes import KnownVantages, reach

VANTAGES_TTL = timedelta(minutes=1)
MAX_UNBUILDABLE = 100_000
KEPT_WINDOW_RUNS = 2_000
RESYNC_S = 600.0  # a (target, vantage) fed by ``add``: read from the database this often
FED_VANTAGES_TTL = timedelta(seconds=RESYNC_S)
UNASKED_KEPT = 16

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Head:
    id: uuid.UUID
    at: datetime
    samples: int


class DatabaseHistory:
    """The ``History`` the evaluator reads in ``serve``; safe to share between threads."""

    def __init__(
        self, sessions: sessionmaker[Session], kept_window_runs: int = KEPT_WINDOW_RUNS
    ) -> None:
        self.sessions = sessions
        # The seek an evaluation makes, one statement: on PostgreSQL in autocommit, spared
        # a BEGIN and a ROLLBACK round trip each (app.store.db.read_sessions).
        self._seeks: Engine = read_sessions(sessions).kw["bind"]
        self.kept_window_runs = kept_window_runs
        self._hand = HandOff(self._keep_added)  # the lock reads hold; ``add`` never waits
        self._recent: dict[Key, list[RunData]] = {}
        self._capacity: dict[Key, int] = {}
        self._windows: dict[Key, tuple[tuple[datetime, datetime], list[RunData]]] = {}
        # Per target: its vantages' runs' start times as known.
        self._newest: dict[str, KnownVantages] = {}
        self._unbuildable: set[uuid.UUID] = set()
        self._series: dict[str, set[str]] = {}  # each target's vantages whose runs are kept
        # Fed by ``add``: per key, when (monotonic) the newest ``n`` runs were read, so
        # that the last ``n`` kept are the database's own.
        self._fed: set[Key] = set()
        self._fed_targets: set[str] = set()
        self._synced: dict[Key, tuple[float, int]] = {}
        # Within ``evaluation`` (this thread's): each series' newest run id as last asked.
        self._looked = threading.local()

    def add(self, record: RunRecord) -> None:
        """``record`` was stored (by this process): keep it built, and answer its (target,
        vantage)'s ``last`` from what is kept while the database's newest run is the newest
        kept, until ``RESYNC_S`` after the last read (older runs stored by another process
        meanwhile, a spool flushed late, are found then). Never waits for a read (``HandOff``):
        every read after this call finds the run."""
        if record.status != RunStatus.COMPLETE:
            return
        at = record.started_at.astimezone(UTC)  # as the database gives it back
        run = run_from_samples(str(record.id), record.target, record.vantage, at, record.samples)
        self._hand.hand(run)

    def _keep_added(self, run: RunData) -> None:
        key = (run.target, run.vantage)
        self._fed.add(key)
        self._fed_targets.add(run.target)
        self._series.setdefault(run.target, set()).add(run.vantage)
        recent = self._recent.setdefault(key, [])
        if any(kept.run_id == run.run_id for kept in recent):
            return
        bisect.insort(recent, run, key=lambda kept: (kept.at, kept.run_id))
        # A key nobody asked of yet keeps a few: its first ``last`` reads the database.
        capacity = self._capacity.get(key, UNASKED_KEPT)
        if len(recent) > capacity:
            del recent[: len(recent) - capacity]
        self._seen(run.target, run.vantage, [run])

    @contextmanager
    def evaluation(self) -> Iterator[None]:
        """One evaluation's reads: a series' newest run is asked of the database once in it,
        not at each of its three or more ``last`` (a seek each was most of an evaluation's
        cost, bench/fleet.py). A run stored meanwhile is found by the next evaluation."""
        outer = self._looks()
        self._looked.ids = {} if outer is None else outer
        try:
            yield
        finally:
            self._looked.ids = outer

    def window(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunData]:
        """Runs that started in [start, end)."""
        key = (target, vantage)
        with self._hand.held():
            cached = self._windows.get(key)
            if cached is not None and cached[0] == (start, end):
                return list(cached[1])
            with self.sessions() as session:
                heads = session.execute(
                    heads_of(target, vantage)
                    .where(RunRow.started_at >= start, RunRow.started_at < end)
                    .order_by(RunRow.started_at, RunRow.id)
                ).all()
                runs = self._built(session, key, [_Head(run_id, at, n) for run_id, at, n in heads])
            if len(runs) <= self.kept_window_runs:
                self._windows[key] = ((start, end), runs)
            else:
                self._windows.pop(key, None)
            self._seen(target, vantage, runs)
            return list(runs)

    def last(self, target: str, vantage: str, count: int) -> list[RunData]:
        """The newest ``count`` runs (fewer if fewer can be rebuilt)."""
        key = (target, vantage)
        with self._hand.held():
            kept = self._kept(key, count)
            if kept is not None and self._still_newest(key):
                return kept
            with self.sessions() as session:
                heads = session.execute(
                    heads_of(target, vantage)
                    .order_by(RunRow.started_at.desc(), RunRow.id.desc())
                    .limit(count)
                ).all()
                runs = self._built(
                    session, key, [_Head(run_id, at, n) for run_id, at, n in reversed(heads)]
                )
            self._keep_recent(key, runs, count)
            if (looked := self._looks()) is not None:  # the newest is known now
                looked[key] = str(heads[0][0]) if heads else None
            if key in self._fed:
                # The newest ``count`` are the database's now; a longer tail kept exact
                # by ``add`` since an earlier read stays so.
                now, (then, known) = time.monotonic(), self._synced.get(key, (0.0, 0))
                known = known if now - then <= RESYNC_S else 0
                self._synced[key] = (now, max(count, known))
            self._seen(target, vantage, runs)
            return runs

    def _kept(self, key: Key, count: int) -> list[RunData] | None:
        """The newest ``count`` runs from memory, if ``add`` keeps them exact; else None."""
        synced = self._synced.get(key)
        if synced is None or count > synced[1] or time.monotonic() - synced[0] > RESYNC_S:
            return None
        return self._recent[key][-count:] if count > 0 else []

    def _still_newest(self, key: Key) -> bool:
        """The database's newest complete run of ``key`` is the newest kept: no other
        process (another replica taking an agent's pushes, an import) stored a newer one
        since. One index seek, once an ``evaluation`` (``_ask_newest``); the runs kept are never
        read again."""
        looked = self._looks()
        if looked is not None and key in looked:
            newest = looked[key]
        else:
            found = self._ask_newest(key, looked)
            newest = found[key]
            if looked is not None:
                looked.update(found)
        recent = self._recent.get(key, [])
        if newest is None or not recent:
            return newest is None and not recent
        return newest == recent[-1].run_id

    def _ask_newest(self, key: Key, looked: dict[Key, str | None] | None) -> dict[Key, str | None]:
        """``key``'s newest run id; in an evaluation, also every other series of its target
        kept here not asked yet, in the same statement: an evaluation judges a target's
        vantages together and asks for each (one round trip, not one a vantage, nor the
        run's own series first and the others in a second)."""
        wanted = {key[1]}
        if looked is not None:
            wanted |= {v for v in self._series.get(key[0], ()) if (key[0], v) not in looked}
        with self._seeks.connect() as connection:  # Core: no Session to set up
            found = newest_of_each(connection, key[0], sorted(wanted))
        return {(key[0], vantage): run for vantage, run in found.items()}

    def _looks(self) -> dict[Key, str | None] | None:
        """This thread's ``evaluation``'s newest run id by series; None outside one."""
        return getattr(self._looked, "ids", None)

    def vantages(self, target: str, now: datetime) -> list[str]:
        """Vantages with a complete run started in [now − 7 days, now], by name.

        Answered from the runs' start times known (``KnownVantages``); read again when they
        cannot decide, or a minute (ten for a target fed by ``add``) after the latest time
        the target was read at. A vantage whose runs ``last`` or ``window`` read in between
        is known at once, so only a vantage not read yet can be found up to that late.
        """
        with self._hand.held():
            known = self._newest.get(target)
            ttl = FED_VANTAGES_TTL if target in self._fed_targets else VANTAGES_TTL
            present = known.present(now) if known is not None and known.fresh(now, ttl) else None
            if present is None:
                with self.sessions() as session:
                    found = newest_by_vantage(session, target, reach(now), now)
                known = self._newest[target] = KnownVantages(now, found, known)
                present = known.present(now)
        assert present is not None  # a read at ``now`` decides every vantage at ``now``
        return present

    def counts(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunCount]:
        """From the run rows alone: every column read is in ``ix_runs_chart``, so this is
        an index-only range scan; no sample is read."""
        with self.sessions() as session:
            rows = run_counts(session, target, vantage, start, end)
        return sorted(RunCount(at, ok + missed, missed, n) for at, ok, missed, n in rows)

    # Building runs ------------------------------------------------------------------------

    def _built(self, session: Session, key: Key, heads: Sequence[_Head]) -> list[RunData]:
        """``heads`` as runs, reusing those built before; unbuildable ones left out."""
        known = {run.run_id: run for run in self._cached(key)}
        missing = [
            head for head in heads if str(head.id) not in known and head.id not in self._unbuildable
        ]
        known |= {run.run_id: run for run in self._rebuild(session, key, missing)}
        return [known[str(head.id)] for head in heads if str(head.id) in known]

    def _cached(self, key: Key) -> Iterable[RunData]:
        yield from self._recent.get(key, [])
        window = self._windows.get(key)
        if window is not None:
            yield from window[1]

    def _rebuild(self, session: Session, key: Key, heads: Sequence[_Head]) -> list[RunData]:
        samples = samples_of(session, [head.id for head in heads])
        runs = []
        for head in heads:
            found = samples.get(head.id, [])
            if len(found) != head.samples:
                self._unbuildable.add(head.id)  # pruned: the summary is all that is left
                continue
            runs.append(run_from_samples(str(head.id), key[0], key[1], head.at, found))
        if len(self._unbuildable) > MAX_UNBUILDABLE:
            self._unbuildable.clear()
        return runs

    def _keep_recent(self, key: Key, runs: list[RunData], count: int) -> None:
        self._series.setdefault(key[0], set()).add(key[1])
        capacity = self._capacity[key] = max(self._capacity.get(key, 0), count)
        if len(runs) >= capacity:
            self._recent[key] = runs[-capacity:]
            return
        newest = {run.run_id: run for run in [*self._recent.get(key, []), *runs]}
        ordered = sorted(newest.values(), key=lambda run: (run.at, run.run_id))
        self._recent[key] = ordered[-capacity:]

    def _seen(self, target: str, vantage: str, runs: list[RunData]) -> None:
        """A vantage that just reported is present without waiting for the cache to age."""
        known = self._newest.get(target)
        if known is not None and runs:
            known.seen(vantage, runs[-1].at)
