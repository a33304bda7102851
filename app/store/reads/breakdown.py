"""Breakdowns of a window as the API and the dashboard read them, and each pair's last run.

``breakdown`` of a window whose raw samples are all still stored is exact: the samples go
through app.analysis.summary.summarize, the same code that summarised each run. When some
were pruned, the window's run digests are merged instead (``source = "digests"``;
quantiles within 1 %, see app.analysis.sketch).

Only complete runs count (as in detection); aborted runs are partial by definition.
Times are aware UTC datetimes.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from app.analysis.breakdown import Breakdown, from_summary, provenance_counts
from app.analysis.digest import Digest, merge_digests
from app.analysis.summary import summarize
from app.store.inlists import padded
from app.store.models import RunDigestRow, RunRow, SampleRow, TargetRow
from app.store.partitions import days_of_window
from app.store.reads.browse import where_run_of
from app.store.reads.digestbreakdowns import digest_breakdowns, latest_span
from app.store.reads.latestruns import last_runs
from app.store.records import RunStatus
from app.store.targets import target_key

__all__ = ["Breakdown", "breakdown", "current_breakdowns", "last_runs"]


class _Head(NamedTuple):
    id: uuid.UUID
    target_id: int
    vantage: str
    started_at: datetime
    n_samples: int


class _Sample(NamedTuple):
    target_id: int
    vantage: str
    status: str
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, str]


@dataclass
class _Window:
    """What one (target, vantage or all) holds in a window: runs and their samples."""

    heads: list[_Head] = field(default_factory=list)
    samples: list[_Sample] = field(default_factory=list)


def breakdown(
    session: Session, target: str, start: datetime, end: datetime, vantage: str | None = None
) -> Breakdown | None:
    """The window [start, end) of one target (one vantage, or all pooled); None if unknown."""
    key = target_key(session, target)
    if key is None:
        return None
    window = _Window(
        [_Head(*row) for row in session.execute(_heads(start, end, key, vantage))],
        [
            _Sample(*row)
            for row in session.execute(_samples(_dialect(session), start, end, key, vantage))
        ],
    )
    last = _last_run_at(session, key, vantage, end)
    return _breakdown(session, (target, vantage), (start, end), window, last)


def current_breakdowns(
    session: Session,
    now: datetime,
    window: timedelta = timedelta(hours=1),
    exact: bool = True,
) -> list[Breakdown]:
    """One breakdown of the last ``window`` per (target, vantage) ever seen, by name.

    A pair with no run in the window shows the same span up to its own latest run instead
    (its ``window_from``/``window_to`` say which; its age says how old): the latest state of
    every pair, however old, never an empty row. ``exact=False`` merges the window's run
    digests instead of reading raw samples (quantiles within 1 %, ``source = "digests"``):
    one small row per run, for pages of many targets. A run counts there once its digest is
    written (the service's rollup loop, every ``app.store.rollups.digests.CATCH_UP_EVERY_S``);
    its ``last_run_at`` counts at once.
    """
    if not exact:
        merged = digest_breakdowns(session, (now - window, now), last_runs(session, now))
        return sorted(merged.values(), key=lambda b: (b.target, b.vantage or ""))
    start = now - window
    names = _target_names(session)
    windows: dict[tuple[int, str], _Window] = defaultdict(_Window)
    for row in session.execute(_heads(start, now)):
        head = _Head(*row)
        windows[(head.target_id, head.vantage)].heads.append(head)
    for sample_row in session.execute(_samples(_dialect(session), start, now)):
        sample = _Sample(*sample_row)
        windows[(sample.target_id, sample.vantage)].samples.append(sample)
    recent = {key: max(h.started_at for h in w.heads) for key, w in windows.items()}
    last = last_runs(session, now, recent)
    found = []
    for key in sorted(last, key=lambda k: (names[k[0]], k[1])):
        pair = (names[key[0]], key[1])
        span, held = (start, now), windows[key]
        if not held.heads and last[key] < start:
            span = latest_span(last[key], now - start)
            held = _window_of(session, key, span)
        found.append(_breakdown(session, pair, span, held, last[key]))
    return found


def _window_of(session: Session, key: tuple[int, str], span: tuple[datetime, datetime]) -> _Window:
    window = _Window()
    window.heads = [_Head(*row) for row in session.execute(_heads(*span, *key))]
    window.samples = [
        _Sample(*row) for row in session.execute(_samples(_dialect(session), *span, *key))
    ]
    return window


def _target_names(session: Session) -> dict[int, str]:
    rows = session.execute(select(TargetRow.id, TargetRow.name))
    return {row.id: row.name for row in rows}


def _breakdown(
    session: Session,
    pair: tuple[str, str | None],
    span: tuple[datetime, datetime],
    window: _Window,
    last: datetime | None,
) -> Breakdown:
    expected = sum(head.n_samples for head in window.heads)
    if len(window.samples) == expected:
        summary = summarize(window.samples, one_run=False)
        provenance = provenance_counts(window.samples)
        source = "samples"
    else:
        digest = merge_digests(_run_digests(session, [head.id for head in window.heads]))
        summary, provenance = digest.summary(), digest.provenance
        source = "digests"
    return from_summary(pair, span, len(window.heads), summary, provenance, last, source)


def _heads(
    start: datetime, end: datetime, target: int | None = None, vantage: str | None = None
) -> Select[uuid.UUID, int, str, datetime, int]:
    query = select(
        RunRow.id, RunRow.target_id, RunRow.vantage, RunRow.started_at, RunRow.n_samples
    ).where(*_complete_in(start, end))
    return where_run_of(query, target, vantage)


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def _samples(
    dialect: str,
    start: datetime,
    end: datetime,
    target: int | None = None,
    vantage: str | None = None,
) -> Select[int, str, str, float, dict[str, Any], dict[str, Any]]:
    query = (
        select(
            RunRow.target_id,
            RunRow.vantage,
            SampleRow.status,
            SampleRow.total_ms,
            SampleRow.phases,
            SampleRow.provenance,
        )
        .join(RunRow, RunRow.id == SampleRow.run_id)
        .where(*_complete_in(start, end), *days_of_window(dialect, start, end))
    )
    return where_run_of(query, target, vantage)


def _complete_in(start: datetime, end: datetime) -> list[ColumnElement[bool]]:
    return [
        RunRow.status == RunStatus.COMPLETE,
        RunRow.started_at >= start,
        RunRow.started_at < end,
    ]


def _last_run_at(
    session: Session, target: int, vantage: str | None, before: datetime
) -> datetime | None:
    query = select(func.max(RunRow.started_at)).where(
        RunRow.target_id == target, RunRow.started_at < before
    )
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return session.scalar(query)


def _run_digests(session: Session, ids: Sequence[uuid.UUID]) -> list[Digest]:
    found: list[Digest] = []
    for first in range(0, len(ids), 512):
        chunk = padded(ids[first : first + 512])
        query = select(RunDigestRow.digest).where(RunDigestRow.run_id.in_(chunk))
        found.extend(Digest.from_json(data) for data in session.scalars(query))
    return found
