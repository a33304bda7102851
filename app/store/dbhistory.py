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
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.runs import RunCount, RunData, run_from_samples
from app.store.inlists import padded
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunStatus

# The contract's 7 days (app.alerts.history, not imported: alerts already import store).
PRESENT_FOR = timedelta(days=7)
VANTAGES_TTL = timedelta(minutes=1)
IDS_PER_QUERY = 512  # a power of two: see app.store.inlists
MAX_UNBUILDABLE = 100_000
KEPT_WINDOW_RUNS = 2_000

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Sample:
    status: str
    total_ms: float
    phases: dict[str, float]


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
        self.kept_window_runs = kept_window_runs
        self._lock = threading.Lock()
        self._recent: dict[Key, list[RunData]] = {}
        self._capacity: dict[Key, int] = {}
        self._windows: dict[Key, tuple[tuple[datetime, datetime], list[RunData]]] = {}
        # Per target: when asked, and each vantage's newest run in the 7 days before.
        self._newest: dict[str, tuple[datetime, dict[str, datetime]]] = {}
        self._unbuildable: set[uuid.UUID] = set()

    def window(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunData]:
        """Runs that started in [start, end)."""
        key = (target, vantage)
        with self._lock:
            cached = self._windows.get(key)
            if cached is not None and cached[0] == (start, end):
                return list(cached[1])
            with self.sessions() as session:
                heads = session.execute(
                    _heads(target, vantage)
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
        with self._lock:
            with self.sessions() as session:
                heads = session.execute(
                    _heads(target, vantage)
                    .order_by(RunRow.started_at.desc(), RunRow.id.desc())
                    .limit(count)
                ).all()
                runs = self._built(
                    session, key, [_Head(run_id, at, n) for run_id, at, n in reversed(heads)]
                )
            self._keep_recent(key, runs, count)
            self._seen(target, vantage, runs)
            return runs

    def vantages(self, target: str, now: datetime) -> list[str]:
        """Vantages with a complete run started in [now − 7 days, now], by name.

        Each vantage's newest run is asked of the database at most once a minute; a
        vantage whose runs ``last`` or ``window`` read in between is known at once, so
        only a vantage not read yet can be found up to a minute late.
        """
        with self._lock:
            cached = self._newest.get(target)
            fresh = cached is not None and cached[0] <= now < cached[0] + VANTAGES_TTL
            if cached is None or not fresh or max(cached[1].values(), default=now) > now:
                cached = self._newest[target] = (now, self._newest_runs(target, now))
            newest = cached[1]
        return sorted(v for v, at in newest.items() if now - PRESENT_FOR <= at <= now)

    def counts(self, target: str, vantage: str, start: datetime, end: datetime) -> list[RunCount]:
        """From the run rows alone: every column read is in ``ix_runs_chart``, so this is
        an index-only range scan; no sample is read."""
        with self.sessions() as session:
            rows = session.execute(
                select(RunRow.started_at, RunRow.n_ok, RunRow.n_deadline_exceeded)
                .join(TargetRow, RunRow.target_id == TargetRow.id)
                .where(
                    TargetRow.name == target,
                    RunRow.vantage == vantage,
                    RunRow.status == RunStatus.COMPLETE,
                    RunRow.started_at >= start,
                    RunRow.started_at < end,
                )
            ).all()
        return sorted(RunCount(at, ok + missed, missed) for at, ok, missed in rows)

    def _newest_runs(self, target: str, now: datetime) -> dict[str, datetime]:
        with self.sessions() as session:
            found = session.execute(
                select(RunRow.vantage, func.max(RunRow.started_at))
                .join(TargetRow, RunRow.target_id == TargetRow.id)
                .where(
                    TargetRow.name == target,
                    RunRow.status == RunStatus.COMPLETE,
                    RunRow.started_at >= now - PRESENT_FOR,
                    RunRow.started_at <= now,
                )
                .group_by(RunRow.vantage)
            ).all()
        return dict(found)

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
        samples = _samples(session, [head.id for head in heads])
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
        capacity = self._capacity[key] = max(self._capacity.get(key, 0), count)
        if len(runs) >= capacity:
            self._recent[key] = runs[-capacity:]
            return
        newest = {run.run_id: run for run in [*self._recent.get(key, []), *runs]}
        ordered = sorted(newest.values(), key=lambda run: (run.at, run.run_id))
        self._recent[key] = ordered[-capacity:]

    def _seen(self, target: str, vantage: str, runs: list[RunData]) -> None:
        """A vantage that just reported is present without waiting for the cache to age."""
        cached = self._newest.get(target)
        if cached is None or not runs:
            return
        newest = cached[1]
        newest[vantage] = max(newest.get(vantage, runs[-1].at), runs[-1].at)


def _heads(target: str, vantage: str) -> Select[uuid.UUID, datetime, int]:
    return (
        select(RunRow.id, RunRow.started_at, RunRow.n_samples)
        .join(TargetRow, RunRow.target_id == TargetRow.id)
        .where(
            TargetRow.name == target, RunRow.vantage == vantage, RunRow.status == RunStatus.COMPLETE
        )
    )


def _samples(session: Session, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[_Sample]]:
    found: dict[uuid.UUID, list[_Sample]] = {}
    for first in range(0, len(ids), IDS_PER_QUERY):
        rows = session.execute(
            select(SampleRow.run_id, SampleRow.status, SampleRow.total_ms, SampleRow.phases)
            .where(SampleRow.run_id.in_(padded(ids[first : first + IDS_PER_QUERY])))
            .order_by(SampleRow.run_id, SampleRow.idx)
        )
        for run_id, status, total_ms, phases in rows:
            found.setdefault(run_id, []).append(_Sample(status, total_ms, phases))
    return found
