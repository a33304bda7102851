"""What the API and the dashboard read: breakdowns of a window, history, sparklines.

Statistics are right, not approximately right by accident:

* ``breakdown`` of a window whose raw samples are all still stored is exact: the samples go
  through app.analysis.summary.summarize, the same code that summarised each run. When some
  were pruned, the window's run digests are merged instead (``source = "digests"``;
  quantiles within 1 %, see app.analysis.sketch).
* ``history`` reads, per bucket, the quantiles stored with the rollup of that period (when
  the bucket is one: 5 min … 1 day), or merges the rollups of the largest period that
  divides the bucket, or, for buckets finer than 5 minutes, the runs' digests. A bucket's
  quantile is the quantile of all its samples (within 1 %), never a mean of run quantiles.

Only complete runs count (as in detection); aborted runs are partial by definition.
Times are aware UTC datetimes; buckets are aligned to the UTC epoch.
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from app.analysis.digest import QUANTILES, Digest, merge_digests, merged_provenance
from app.analysis.runs import phase_order
from app.analysis.sketch import Sketch, row_quantiles, stack
from app.analysis.summary import TIMED, Summary, summarize
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow, TargetRow
from app.store.rollups import FINE_PERIODS, PERIODS, POOLED, fine_rollups_from, period_start

COMPLETE = "complete"
STEPS = (60, 300, 900, 3600, 21600, 86400)  # 1 min, 5 min, 15 min, 1 h, 6 h, 1 day
TARGET_BUCKETS = 500
DAY = 86400


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    p50: float
    p90: float
    p95: float
    p99: float
    n: int
    share: float
    provenance: str  # how most of its samples were measured: measured | server | estimated

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            **{name: round(getattr(self, name), 3) for name in QUANTILES},
            "n": self.n,
            "share": round(self.share, 4),
            "provenance": self.provenance,
        }


@dataclass(frozen=True)
class Breakdown:
    target: str
    vantage: str | None
    start: datetime
    end: datetime
    runs: int
    n: int  # timed samples: ok and deadline-exceeded (censored at the deadline)
    errors: int
    deadline_exceeded: int
    total: dict[str, float]  # p50 p90 p95 p99 of end-to-end
    phases: list[PhaseRow]  # in the phase model's order
    dominant: str | None
    last_run_at: datetime | None
    source: str = "samples"  # samples: exact | digests: merged sketches, within 1 %

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "vantage": self.vantage,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "runs": self.runs,
            "n": self.n,
            "errors": self.errors,
            "deadline_exceeded": self.deadline_exceeded,
            "total": {name: round(value, 3) for name, value in self.total.items()},
            "phases": [row.to_json() for row in self.phases],
            "dominant": self.dominant,
            "last_run_at": None if self.last_run_at is None else self.last_run_at.isoformat(),
            "source": self.source,
        }


# Breakdowns -------------------------------------------------------------------------------


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
    target_key = session.scalar(select(TargetRow.id).where(TargetRow.name == target))
    if target_key is None:
        return None
    window = _Window(
        [_Head(*row) for row in session.execute(_heads(start, end, target_key, vantage))],
        [_Sample(*row) for row in session.execute(_samples(start, end, target_key, vantage))],
    )
    last = _last_run_at(session, target_key, vantage, end)
    return _breakdown(session, (target, vantage), (start, end), window, last)


def current_breakdowns(
    session: Session,
    now: datetime,
    window: timedelta = timedelta(hours=1),
    exact: bool = True,
) -> list[Breakdown]:
    """One breakdown of the last ``window`` per (target, vantage) ever seen, by name.

    A pair with no run in the window has runs = n = 0 and the time of its latest run.
    ``exact=False`` merges the window's run digests instead of reading raw samples (quantiles
    within 1 %, ``source = "digests"``): one small row per run, for pages of many targets. A
    run counts there once its digest is written (the service's rollup loop, every
    ``app.store.rollups.CATCH_UP_EVERY_S``); its ``last_run_at`` counts at once.
    """
    if not exact:
        return _current_from_digests(session, now - window, now)
    start = now - window
    names = _target_names(session)
    windows: dict[tuple[int, str], _Window] = defaultdict(_Window)
    for row in session.execute(_heads(start, now)):
        head = _Head(*row)
        windows[(head.target_id, head.vantage)].heads.append(head)
    for sample_row in session.execute(_samples(start, now)):
        sample = _Sample(*sample_row)
        windows[(sample.target_id, sample.vantage)].samples.append(sample)
    recent = {key: max(h.started_at for h in w.heads) for key, w in windows.items()}
    last = last_runs(session, now, recent)
    found = []
    for key in sorted(last, key=lambda k: (names[k[0]], k[1])):
        pair = (names[key[0]], key[1])
        found.append(_breakdown(session, pair, (start, now), windows[key], last[key]))
    return found


def last_runs(
    session: Session, now: datetime, known: dict[tuple[int, str], datetime] | None = None
) -> dict[tuple[int, str], datetime]:
    """(target id, vantage) -> its latest run before ``now``, for every pair ever seen.

    Any run counts, complete or not, digested or not: a run shows its age at once. The last
    day's runs are one grouped query; an older pair is one index seek. ``known`` are times
    the caller already has (the later of the two wins).
    """
    found = dict(known or {})
    recent = (
        select(RunRow.target_id, RunRow.vantage, func.max(RunRow.started_at))
        .where(RunRow.started_at >= now - timedelta(days=1), RunRow.started_at < now)
        .group_by(RunRow.target_id, RunRow.vantage)
    )
    for target, vantage, latest in session.execute(recent):
        found[(target, vantage)] = max(latest, found.get((target, vantage), latest))
    for target, vantage in _pairs_seen(session) - found.keys():
        at = _last_run_at(session, target, vantage, now)
        if at is not None:
            found[(target, vantage)] = at
    return found


def _target_names(session: Session) -> dict[int, str]:
    rows = session.execute(select(TargetRow.id, TargetRow.name))
    return {row.id: row.name for row in rows}


def _current_from_digests(session: Session, start: datetime, now: datetime) -> list[Breakdown]:
    names = _target_names(session)
    groups: dict[tuple[int, str], list[Digest]] = defaultdict(list)
    # Through ix_run_digests_started_at: digests are kept as long as their runs.
    query = select(RunDigestRow.target_id, RunDigestRow.vantage, RunDigestRow.digest).where(
        RunDigestRow.started_at >= start, RunDigestRow.started_at < now
    )
    for target, vantage, data in session.execute(query):
        groups[(target, vantage)].append(Digest.from_json(data))
    last = last_runs(session, now)
    pairs = sorted(last, key=lambda k: (names[k[0]], k[1]))
    columns = _columns([groups.get(pair, []) for pair in pairs])
    return [
        _from_columns(
            columns, i, (names[pair[0]], pair[1]), (start, now), last[pair], groups.get(pair, [])
        )
        for i, pair in enumerate(pairs)
    ]


def _from_columns(
    columns: dict[str, Any],
    i: int,
    pair: tuple[str, str],
    span: tuple[datetime, datetime],
    last: datetime,
    digests: list[Digest],
) -> Breakdown:
    """Row ``i`` of ``_columns`` (a pair's merged digests) as a Breakdown."""
    provenance = merged_provenance(digests)
    rows = [
        PhaseRow(
            phase=name,
            **{q: columns["phase_quantiles"][name][q][i] for q in QUANTILES},
            n=columns["samples"][i],
            share=columns["shares"][name][i],
            provenance=_main_label(provenance.get(name, {})),
        )
        for name in columns["phases"]
        if columns["phase_quantiles"][name]["p50"][i] is not None
    ]
    total = {q: columns["total"][q][i] for q in QUANTILES}
    return Breakdown(
        target=pair[0],
        vantage=pair[1],
        start=span[0],
        end=span[1],
        runs=columns["runs"][i],
        n=columns["samples"][i],
        errors=columns["errors"][i],
        deadline_exceeded=columns["deadline_misses"][i],
        total={q: v for q, v in total.items() if v is not None},
        phases=rows,
        dominant=columns["dominant"][i],
        last_run_at=last,
        source="digests",
    )


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
        provenance = _provenance(window.samples)
        source = "samples"
    else:
        digest = merge_digests(_run_digests(session, [head.id for head in window.heads]))
        summary, provenance = digest.summary(), digest.provenance
        source = "digests"
    return _from_summary(pair, span, len(window.heads), summary, provenance, last, source)


def _from_summary(
    pair: tuple[str, str | None],
    span: tuple[datetime, datetime],
    runs: int,
    summary: Summary,
    provenance: dict[str, dict[str, int]],
    last: datetime | None,
    source: str,
) -> Breakdown:
    rows = [
        PhaseRow(
            phase=name,
            **summary.phases[name].quantiles,
            n=summary.n,
            share=summary.phases[name].share,
            provenance=_main_label(provenance.get(name, {})),
        )
        for name in phase_order(summary.phases)
    ]
    return Breakdown(
        target=pair[0],
        vantage=pair[1],
        start=span[0],
        end=span[1],
        runs=runs,
        n=summary.n,
        errors=summary.errors,
        deadline_exceeded=summary.deadline_exceeded,
        total=summary.total,
        phases=rows,
        dominant=summary.dominant,
        last_run_at=last,
        source=source,
    )


def _main_label(counts: dict[str, int]) -> str:
    return max(sorted(counts), key=lambda label: counts[label]) if counts else ""


def _provenance(samples: Iterable[_Sample]) -> dict[str, dict[str, int]]:
    found: dict[str, Counter[str]] = defaultdict(Counter)
    for sample in samples:
        if sample.status in TIMED:
            for name, label in sample.provenance.items():
                if name in sample.phases:
                    found[name][label] += 1
    return {name: dict(counts) for name, counts in found.items()}


def _heads(
    start: datetime, end: datetime, target: int | None = None, vantage: str | None = None
) -> Select[uuid.UUID, int, str, datetime, int]:
    query = select(
        RunRow.id, RunRow.target_id, RunRow.vantage, RunRow.started_at, RunRow.n_samples
    ).where(RunRow.status == COMPLETE, RunRow.started_at >= start, RunRow.started_at < end)
    if target is not None:
        query = query.where(RunRow.target_id == target)
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return query


def _samples(
    start: datetime, end: datetime, target: int | None = None, vantage: str | None = None
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
        .where(RunRow.status == COMPLETE, RunRow.started_at >= start, RunRow.started_at < end)
    )
    if target is not None:
        query = query.where(RunRow.target_id == target)
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return query


def _last_run_at(
    session: Session, target: int, vantage: str | None, before: datetime
) -> datetime | None:
    query = select(func.max(RunRow.started_at)).where(
        RunRow.target_id == target, RunRow.started_at < before
    )
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    return session.scalar(query)


def _pairs_seen(session: Session) -> set[tuple[int, str]]:
    """Every (target, vantage) with a run counted in the daily rollups.

    Not the pooled rows: "*" is no vantage, and each one cost ``last_runs`` a seek for
    runs that cannot exist."""
    query = (
        select(RollupRow.target_id, RollupRow.vantage)
        .where(RollupRow.period_s == DAY, RollupRow.vantage != POOLED)
        .distinct()
    )
    return set(session.execute(query))


def _run_digests(session: Session, ids: Sequence[uuid.UUID]) -> list[Digest]:
    found: list[Digest] = []
    for first in range(0, len(ids), 500):
        chunk = ids[first : first + 500]
        query = select(RunDigestRow.digest).where(RunDigestRow.run_id.in_(chunk))
        found.extend(Digest.from_json(data) for data in session.scalars(query))
    return found


# History ----------------------------------------------------------------------------------


Series = list[float | None]


@dataclass(frozen=True)
class History:
    """A bucketed time series, columnar as uPlot draws it; an empty bucket holds None."""

    target: str
    vantage: str | None
    start: datetime
    end: datetime
    bucket_seconds: int
    source: str  # runs: merged run digests | rollups: merged rollups
    phases: list[str]
    time: list[int]  # bucket starts, epoch seconds UTC
    runs: list[int]
    samples: list[int]
    deadline_misses: list[int]
    errors: list[int]
    total: dict[str, Series]
    phase_quantiles: dict[str, dict[str, Series]]
    shares: dict[str, Series]
    dominant: list[str | None]

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "vantage": self.vantage,
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "bucket_seconds": self.bucket_seconds,
            "source": self.source,
            "phases": self.phases,
            "time": self.time,
            "runs": self.runs,
            "samples": self.samples,
            "deadline_misses": self.deadline_misses,
            "errors": self.errors,
            "total": {name: _rounded(values, 3) for name, values in self.total.items()},
            "phase_quantiles": {
                phase: {name: _rounded(values, 3) for name, values in quantiles.items()}
                for phase, quantiles in self.phase_quantiles.items()
            },
            "shares": {name: _rounded(values, 4) for name, values in self.shares.items()},
            "dominant": self.dominant,
        }


def _rounded(values: Series, digits: int) -> Series:
    return [None if v is None else round(v, digits) for v in values]


def pick_bucket(start: datetime, end: datetime, interval_s: float = 0.0) -> int:
    """The finest step of ``STEPS`` that cuts [start, end) into at most 500 buckets and is
    no finer than the target's ``interval_s``.

    A bucket finer than the interval puts each run between empty buckets: a chart of them
    is a row of isolated points, and a line through them is no line at all. Beyond 500
    days (or an interval over a day), whole days.
    """
    span = max((end - start).total_seconds(), 1.0)
    for step in STEPS:
        if step >= interval_s and math.ceil(span / step) <= TARGET_BUCKETS:
            return step
    return DAY * max(math.ceil(span / DAY / TARGET_BUCKETS), math.ceil(interval_s / DAY))


def bucket_count(start: datetime, end: datetime, bucket_seconds: int) -> int:
    first = period_start(start, bucket_seconds)
    return max(1, math.ceil((end - first).total_seconds() / bucket_seconds))


def history(
    session: Session,
    target: str,
    start: datetime,
    end: datetime,
    vantage: str | None = None,
    bucket_seconds: int | None = None,
    *,
    now: datetime,
) -> History:
    """Buckets covering [start, end), aligned to the epoch (the first may begin before start).

    Buckets that need the 5- or 15-minute rollups, in a window older than those are kept
    at ``now``, are merged from the run digests instead.
    """
    bucket = bucket_seconds or pick_bucket(start, end)
    first = period_start(start, bucket)
    count = bucket_count(start, end, bucket)
    period = source_period(bucket)
    if period in FINE_PERIODS and first < fine_rollups_from(now):
        period = None
    times = [int(first.timestamp()) + i * bucket for i in range(count)]
    source = "runs" if period is None else "rollups"
    target_key = session.scalar(select(TargetRow.id).where(TargetRow.name == target))
    if target_key is None:
        columns = _columns([[] for _ in range(count)])
        return History(target, vantage, start, end, bucket, source, time=times, **columns)
    span = (first, first + timedelta(seconds=bucket * count))
    if period == bucket:
        query = _stored_summaries(target_key, vantage or POOLED, period, span)
        summaries = [(_index(at, first, bucket), data) for at, data in session.execute(query)]
        if all(data is not None for _, data in summaries):
            columns = _summary_columns(count, summaries)
            return History(target, vantage, start, end, bucket, source, time=times, **columns)
    groups: list[list[Digest]] = [[] for _ in range(count)]
    for at, data in session.execute(_stored_digests(target_key, vantage, period, span)):
        groups[_index(at, first, bucket)].append(Digest.from_json(data))
    columns = _columns(groups)
    return History(target, vantage, start, end, bucket, source, time=times, **columns)


def _index(at: datetime, first: datetime, bucket: int) -> int:
    return int((at - first).total_seconds() // bucket)


def source_period(bucket_seconds: int) -> int | None:
    """The largest rollup period that divides the bucket; None: merge run digests."""
    fitting = [p for p in PERIODS if bucket_seconds % p == 0]
    return max(fitting) if fitting else None


def _stored_digests(
    target: int, vantage: str | None, period: int | None, span: tuple[datetime, datetime]
) -> Select[datetime, dict[str, Any]]:
    if period is None:
        runs = select(RunDigestRow.started_at, RunDigestRow.digest).where(
            RunDigestRow.target_id == target,
            RunDigestRow.started_at >= span[0],
            RunDigestRow.started_at < span[1],
        )
        return runs if vantage is None else runs.where(RunDigestRow.vantage == vantage)
    return select(RollupRow.period_start, RollupRow.digest).where(
        *_rollups_of(target, vantage or POOLED, period, span)
    )


def _stored_summaries(
    target: int, vantage: str, period: int, span: tuple[datetime, datetime]
) -> Select[datetime, Any]:
    """Only each rollup's quantiles, taken out of its JSON by the database."""
    summary = RollupRow.digest["summary"]
    return select(RollupRow.period_start, summary).where(
        *_rollups_of(target, vantage, period, span)
    )


def _rollups_of(
    target: int, vantage: str, period: int, span: tuple[datetime, datetime]
) -> list[ColumnElement[bool]]:
    return [
        RollupRow.target_id == target,
        RollupRow.vantage == vantage,
        RollupRow.period_s == period,
        RollupRow.period_start >= span[0],
        RollupRow.period_start < span[1],
    ]


def _summary_columns(count: int, summaries: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    """The history from each bucket's stored quantiles (a bucket is one rollup period)."""
    phases = list(phase_order(name for _, data in summaries for name in data["phases"]))
    counts = {name: [0] * count for name in ("runs", "n", "deadline_exceeded", "errors")}
    total = np.full((len(QUANTILES), count), np.nan)
    per_phase = np.full((len(phases), len(QUANTILES), count), np.nan)
    for i, data in summaries:
        for name, column in counts.items():
            column[i] = data[name]
        total[:, i] = [np.nan if v is None else v for v in data["total"]]
        if data["n"]:
            # As summarize: a timed sample without a phase counts 0 ms in it.
            per_phase[:, :, i] = [data["phases"].get(name, [0.0] * 4) for name in phases]
    shares, dominant = _shares(per_phase[:, 0, :], phases, count)
    return {
        "phases": phases,
        "runs": counts["runs"],
        "samples": counts["n"],
        "deadline_misses": counts["deadline_exceeded"],
        "errors": counts["errors"],
        "total": {q: _listed(total[j]) for j, q in enumerate(QUANTILES)},
        "phase_quantiles": {
            name: {q: _listed(per_phase[k, j]) for j, q in enumerate(QUANTILES)}
            for k, name in enumerate(phases)
        },
        "shares": {name: _listed(shares[k]) for k, name in enumerate(phases)},
        "dominant": dominant,
    }


def _columns(groups: list[list[Digest]]) -> dict[str, Any]:
    """Every series of the history, each computed for all buckets at once."""
    phases = list(phase_order(name for group in groups for d in group for name in d.phases))
    per_phase = {
        name: _quantile_series([[_phase(d, name) for d in g] for g in groups]) for name in phases
    }
    # Shaped explicitly: with no phase at all (only failed runs), -1 cannot be inferred.
    medians = np.array([per_phase[n]["p50"] for n in phases]).reshape(len(phases), len(groups))
    shares, dominant = _shares(medians, phases, len(groups))
    return {
        "phases": phases,
        "runs": [sum(d.runs for d in group) for group in groups],
        "samples": [sum(d.n for d in group) for group in groups],
        "deadline_misses": [sum(d.deadline_exceeded for d in group) for group in groups],
        "errors": [sum(d.errors for d in group) for group in groups],
        "total": _as_series(_quantile_series([[d.total for d in g] for g in groups])),
        "phase_quantiles": {name: _as_series(q) for name, q in per_phase.items()},
        "shares": {name: _listed(shares[i]) for i, name in enumerate(phases)},
        "dominant": dominant,
    }


def _phase(digest: Digest, name: str) -> Sketch:
    found = digest.phases.get(name)
    return found if found is not None else Sketch.zeros(digest.n)


def _quantile_series(groups: list[list[Sketch]]) -> dict[str, NDArray[np.float64]]:
    low, matrix = stack(groups)
    return row_quantiles(low, matrix, QUANTILES)


def _shares(
    medians: NDArray[np.float64], phases: list[str], buckets: int
) -> tuple[NDArray[np.float64], list[str | None]]:
    """As summary.shares and summary.dominant_phase, for every bucket at once."""
    if not phases:
        return np.zeros((0, buckets)), [None] * buckets
    whole = medians.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = np.where(whole > 0, medians / np.where(whole > 0, whole, 1.0), 0.0)
    shares = np.where(np.isnan(whole), np.nan, shares)
    best = np.argmax(np.nan_to_num(shares, nan=-1.0), axis=0)
    dominant = [
        phases[int(best[i])] if not np.isnan(whole[i]) and shares[best[i], i] > 0 else None
        for i in range(buckets)
    ]
    return shares, dominant


def _as_series(quantiles: dict[str, NDArray[np.float64]]) -> dict[str, Series]:
    return {name: _listed(values) for name, values in quantiles.items()}


def _listed(values: NDArray[np.float64]) -> Series:
    return [None if math.isnan(v) else float(v) for v in values.tolist()]


# Sparklines -------------------------------------------------------------------------------


def sparklines(
    session: Session, now: datetime, hours: int = 24
) -> dict[tuple[str, str], list[float | None]]:
    """Hourly end-to-end p50 per (target, vantage), oldest first, the current hour last."""
    first = period_start(now, 3600) - timedelta(hours=hours - 1)
    rows = session.execute(
        select(TargetRow.name, RollupRow.vantage, RollupRow.period_start, RollupRow.total_p50)
        .join(TargetRow, TargetRow.id == RollupRow.target_id)
        .where(RollupRow.period_s == 3600, RollupRow.period_start >= first)
        .where(RollupRow.vantage != POOLED)
    )
    lines: dict[tuple[str, str], list[float | None]] = {}
    for name, vantage, at, p50 in rows:
        index = int((at - first).total_seconds() // 3600)
        if 0 <= index < hours:
            lines.setdefault((name, vantage), [None] * hours)[index] = p50
    return lines
