"""The data layer the API and the dashboard read, on SQLite and PostgreSQL, against numpy."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.series import pick_bucket
from app.analysis.sketch import RELATIVE_ACCURACY
from app.config import Settings, TargetsFile
from app.main import build_service
from app.store.ingest import store_run
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow
from app.store.prune import prune_samples
from app.store.reads.breakdown import breakdown, current_breakdowns, last_runs
from app.store.reads.digestbreakdowns import digest_breakdowns
from app.store.reads.sparklines import sparklines
from app.store.reads.timeseries import bucket_count, source_period, time_series
from app.store.records import RunRecord
from app.store.rollups.catchup import _digests, _undigested, catch_up
from app.store.rollups.digests import (
    FINE_PERIODS,
    FINE_ROLLUPS_KEPT,
    add_run,
    prune_fine_rollups,
)
from app.store.rollups.planned import Plan, plan_of, written
from tests.runfactory import LLM, T0, make_run, record_of

BOUND = RELATIVE_ACCURACY * (1 + 1e-9)
QS = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}
TABLES = (SampleRow, RunRow, RunDigestRow)
NOW = T0 + timedelta(days=2)


def store(
    sessions: sessionmaker[Session], records: Iterable[RunRecord], counted: bool = True
) -> None:
    """``records`` stored in one transaction; ``counted``, also in the rollups as the store
    hook counts them (not: left for ``catch_up``)."""
    with sessions.begin() as session:
        for record in records:
            store_run(session, record, NOW)
            if counted:
                add_run(session, record, NOW)


def runs(
    count: int,
    *,
    start: datetime = T0,
    every: timedelta = timedelta(minutes=10),
    target: str = "chat",
    vantage: str = "eu",
    seed: int = 1,
    **kwargs: object,
) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    return [
        record_of(make_run(rng, start + i * every, target=target, vantage=vantage, **kwargs))
        for i in range(count)
    ]


def timed(records: Sequence[RunRecord]) -> list[tuple[float, dict[str, float]]]:
    return [
        (s.total_ms, s.phases)
        for r in records
        for s in r.samples
        if s.status in ("ok", "deadline_exceeded")
    ]


def exact(values: Sequence[float]) -> dict[str, float]:
    return {name: float(np.percentile(values, q)) for name, q in QS.items()}


def test_breakdown_of_stored_samples_is_exact(sessions: sessionmaker[Session]) -> None:
    records = runs(12, n=30, censored=2, failed=1)
    store(sessions, records)
    with sessions() as session:
        found = breakdown(session, "chat", T0, T0 + timedelta(hours=3))
    assert found is not None and found.source == "samples"
    samples = timed(records)
    assert (found.runs, found.n, found.errors, found.deadline_exceeded) == (12, 360, 12, 24)
    assert found.total == pytest.approx(exact([t for t, _ in samples]), rel=1e-12)
    assert [row.phase for row in found.phases] == list(LLM)
    for row in found.phases:
        expected = exact([phases[row.phase] for _, phases in samples])
        assert {k: getattr(row, k) for k in QS} == pytest.approx(expected, rel=1e-12)
    medians = {row.phase: row.p50 for row in found.phases}
    for row in found.phases:
        assert row.share == pytest.approx(medians[row.phase] / sum(medians.values()))
    assert found.dominant == "queue"
    assert found.last_run_at == records[-1].started_at


def test_breakdown_after_pruning_merges_digests_within_the_bound(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    records = runs(12, n=30)
    store(sessions, records)
    prune_samples(engine, T0 + timedelta(minutes=55))
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SampleRow)) == 6 * 30
        found = breakdown(session, "chat", T0, T0 + timedelta(hours=3))
    assert found is not None and found.source == "digests"
    assert found.runs == 12 and found.n == 360
    for name, value in exact([t for t, _ in timed(records)]).items():
        assert abs(found.total[name] - value) <= BOUND * value


def test_breakdown_of_an_unknown_target_is_none(sessions: sessionmaker[Session]) -> None:
    with sessions() as session:
        assert breakdown(session, "nope", T0, NOW) is None


def test_breakdown_per_vantage_and_pooled(sessions: sessionmaker[Session]) -> None:
    eu, us = runs(6, vantage="eu", seed=1), runs(6, vantage="us", seed=2)
    store(sessions, eu + us)
    with sessions() as session:
        pooled = breakdown(session, "chat", T0, NOW)
        only_us = breakdown(session, "chat", T0, NOW, vantage="us")
    assert pooled is not None and only_us is not None
    assert (pooled.runs, only_us.runs, only_us.vantage) == (12, 6, "us")
    assert pooled.total["p99"] == pytest.approx(exact([t for t, _ in timed(eu + us)])["p99"])
    assert only_us.total["p99"] == pytest.approx(exact([t for t, _ in timed(us)])["p99"])


def test_history_bucket_quantiles_are_of_all_samples_not_means_of_runs(
    sessions: sessionmaker[Session],
) -> None:
    # Within each hour, runs alternate between fast and slow: the mean of the runs' p99s is
    # far from the hour's p99, so only a real merge passes.
    fast = runs(24, every=timedelta(minutes=10), seed=3, n=40)
    slow_medians = {name: value * 10 for name, value in LLM.items()}
    slow = runs(
        24, start=T0 + timedelta(minutes=5), every=timedelta(minutes=10), seed=4, n=40,
        medians=slow_medians,
    )  # fmt: skip
    store(sessions, fast + slow)
    with sessions() as session:
        found = time_series(
            session, "chat", T0, T0 + timedelta(hours=4), bucket_seconds=3600, now=NOW
        )
    assert found.source == "rollups" and found.bucket_seconds == 3600
    assert found.time == [int((T0 + timedelta(hours=h)).timestamp()) for h in range(4)]
    for hour in range(4):
        start, end = T0 + timedelta(hours=hour), T0 + timedelta(hours=hour + 1)
        inside = [r for r in fast + slow if start <= r.started_at < end]
        assert found.runs[hour] == len(inside)
        if not inside:
            assert found.total["p99"][hour] is None and found.dominant[hour] is None
            continue
        expected = exact([t for t, _ in timed(inside)])
        for name, value in expected.items():
            got = found.total[name][hour]
            assert got is not None and abs(got - value) <= BOUND * value
        queue = exact([p["queue"] for _, p in timed(inside)])["p50"]
        got_queue = found.phase_quantiles["queue"]["p50"][hour]
        assert got_queue is not None and abs(got_queue - queue) <= BOUND * queue
        assert found.dominant[hour] == "queue"
        shares = [found.shares[name][hour] for name in found.phases]
        assert sum(s for s in shares if s is not None) == pytest.approx(1.0)


@pytest.mark.parametrize("bucket", [60, 300, 900, 1800, 21600, 86400])
def test_history_from_run_digests_and_each_rollup_period_agree(
    sessions: sessionmaker[Session], bucket: int
) -> None:
    records = runs(30, every=timedelta(minutes=7), n=10)
    store(sessions, records)
    start, end = T0, T0 + timedelta(hours=4)
    with sessions() as session:
        found = time_series(session, "chat", start, end, bucket_seconds=bucket, now=NOW)
    assert found.source == ("runs" if bucket == 60 else "rollups")
    assert len(found.time) == bucket_count(start, end, bucket)
    first = found.time[0]
    for i, at in enumerate(found.time):
        lo = datetime.fromtimestamp(at, UTC)
        inside = [r for r in records if lo <= r.started_at < lo + timedelta(seconds=bucket)]
        assert found.runs[i] == len(inside)
        assert found.samples[i] == 10 * len(inside)
        if inside:
            value = exact([t for t, _ in timed(inside)])["p90"]
            got = found.total["p90"][i]
            assert got is not None and abs(got - value) <= BOUND * value
    assert first <= int(start.timestamp())


def test_history_survives_pruning_of_raw_samples(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    records = runs(20, n=10)
    store(sessions, records)
    with sessions() as session:
        before = time_series(
            session, "chat", T0, T0 + timedelta(hours=4), bucket_seconds=3600, now=NOW
        )
    prune_samples(engine, NOW)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(SampleRow)) == 0
        after = time_series(
            session, "chat", T0, T0 + timedelta(hours=4), bucket_seconds=3600, now=NOW
        )
    assert after == before and sum(after.runs) == 20


def fine_rollups(sessions: sessionmaker[Session]) -> dict[int, int]:
    with sessions() as session:
        query = select(RollupRow.period_s, func.count()).group_by(RollupRow.period_s)
        return dict(session.execute(query).all())


@pytest.mark.parametrize("bucket", [300, 900, 1800])
def test_old_fine_buckets_merge_the_run_digests_and_the_fine_rollups_go(
    sessions: sessionmaker[Session], engine: Engine, bucket: int
) -> None:
    store(sessions, runs(30, every=timedelta(minutes=7), n=10))
    start, end = T0, T0 + timedelta(hours=4)
    later = NOW + FINE_ROLLUPS_KEPT  # T0's 5- and 15-minute rollups are past their keeping
    with sessions() as session:
        recent = time_series(session, "chat", start, end, bucket_seconds=bucket, now=NOW)
        old = time_series(session, "chat", start, end, bucket_seconds=bucket, now=later)
    assert (recent.source, old.source) == ("rollups", "runs")
    assert old.runs == recent.runs and old.samples == recent.samples
    for name, values in recent.total.items():
        pairs = list(zip(old.total[name], values, strict=True))
        assert all((a is None) == (b is None) for a, b in pairs), name
        assert [a for a, b in pairs if b is not None] == pytest.approx(
            [b for b in values if b is not None], rel=1e-9
        ), name

    kept = fine_rollups(sessions)
    assert prune_fine_rollups(engine, NOW) == 0  # nothing is old enough yet
    assert prune_fine_rollups(engine, later + timedelta(days=1)) == kept[300] + kept[900]
    assert fine_rollups(sessions) == {p: n for p, n in kept.items() if p not in FINE_PERIODS}
    with sessions() as session:
        pruned = time_series(session, "chat", start, end, bucket_seconds=bucket, now=later)
        assert session.scalar(select(func.count()).select_from(RunDigestRow)) == 30
    assert pruned == old


def test_the_service_prunes_raw_samples_and_fine_rollups_and_keeps_the_rest(
    sessions: sessionmaker[Session], db_url: str, tmp_path: Path
) -> None:
    store(sessions, runs(30, every=timedelta(minutes=7), n=10))
    kept = fine_rollups(sessions)
    settings = Settings(database_url=db_url, spool_dir=tmp_path / "spool", vantage="v")
    service = build_service(settings, TargetsFile(raw_retention_days=30))
    try:
        asyncio.run(service.prune(T0 + timedelta(days=29)))  # neither is old enough yet
        assert fine_rollups(sessions) == kept
        with sessions() as session:
            assert session.scalar(select(func.count()).select_from(SampleRow)) == 300
        asyncio.run(service.prune(NOW + FINE_ROLLUPS_KEPT + timedelta(days=1)))
    finally:
        service.engine.dispose()
    assert fine_rollups(sessions) == {p: n for p, n in kept.items() if p not in FINE_PERIODS}
    with sessions() as session:
        counts = [session.scalar(select(func.count()).select_from(t)) for t in TABLES]
    assert counts == [0, 30, 30]  # samples gone; runs and their digests stay


def test_a_run_is_counted_once_however_often_it_is_added(
    sessions: sessionmaker[Session],
) -> None:
    records = runs(5, n=10)
    store(sessions, records)
    with sessions.begin() as session:
        assert not any(add_run(session, record, NOW) for record in records)
    assert catch_up(sessions, T0 - timedelta(days=1), NOW) == 0
    with sessions() as session:
        daily = session.scalars(
            select(RollupRow).where(RollupRow.period_s == 86400).order_by(RollupRow.vantage)
        ).all()
    # One row for the vantage, one for every vantage pooled ("*").
    assert [(row.vantage, row.runs, row.n) for row in daily] == [("*", 5, 50), ("eu", 5, 50)]


def test_catch_up_adds_runs_stored_without_the_hook(sessions: sessionmaker[Session]) -> None:
    records = runs(7, n=10)
    aborted = runs(1, start=T0 + timedelta(hours=5), seed=9)[0]
    store(sessions, [*records, replace(aborted, status="aborted")], counted=False)
    assert catch_up(sessions, T0 - timedelta(days=1), NOW, batch=3) == 7
    assert catch_up(sessions, T0 - timedelta(days=1), NOW, batch=3) == 0
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RunDigestRow)) == 7
        found = time_series(
            session, "chat", T0, T0 + timedelta(hours=2), bucket_seconds=3600, now=NOW
        )
    assert sum(found.runs) == 7


def test_catch_up_of_some_targets_goes_through_them_in_batches(
    sessions: sessionmaker[Session],
) -> None:
    store(sessions, runs(7, n=10), counted=False)
    with sessions() as session:
        (target,) = session.scalars(select(RunRow.target_id).distinct()).all()
    since = T0 - timedelta(days=1)
    assert catch_up(sessions, since, NOW, batch=3, targets={target + 1}) == 0
    assert catch_up(sessions, since, NOW, batch=3, targets={target + 1, target}) == 7
    assert catch_up(sessions, since, NOW, batch=3, targets={target}) == 0
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RunDigestRow)) == 7


def _planned(sessions: sessionmaker[Session]) -> Plan:
    """What catch_up would write on SQLite, computed now (outside any write transaction)."""
    with sessions() as session:
        heads = session.execute(_undigested(T0 - timedelta(days=1), None, None)).all()
        return plan_of(session, _digests(session, heads), NOW)


def _daily(sessions: sessionmaker[Session]) -> list[tuple[str, int, int]]:
    with sessions() as session:
        rows = session.scalars(
            select(RollupRow).where(RollupRow.period_s == 86400).order_by(RollupRow.vantage)
        ).all()
        return [(row.vantage, row.runs, row.n) for row in rows]


def test_catch_up_counts_once_a_run_another_writer_counted_after_the_plan(
    sessions: sessionmaker[Session],
) -> None:
    records = runs(3, n=10)
    store(sessions, records, counted=False)
    plan = _planned(sessions)
    with sessions.begin() as session:  # the store hook (or a second catch_up), meanwhile
        assert add_run(session, records[0], NOW)
    assert written(sessions, plan) == 2  # the plan went stale: added the ordinary way
    assert _daily(sessions) == [("*", 3, 30), ("eu", 3, 30)]


def test_catch_up_merges_into_a_rollup_another_writer_changed_after_the_plan(
    sessions: sessionmaker[Session],
) -> None:
    minute = timedelta(minutes=1)  # one 5-minute period: its rollup is merged into
    first, later = runs(2, every=minute, n=10), runs(1, start=T0 + 3 * minute, n=10, seed=4)
    store(sessions, first[:1])  # its rollups exist: the plan merges into them
    with sessions.begin() as session:
        store_run(session, first[1], NOW)
    plan = _planned(sessions)
    assert [row["run_id"] for row in plan.fresh] == [first[1].id] and plan.merged
    store(sessions, later)  # merged into the same day's rollups, meanwhile
    assert written(sessions, plan) == 1
    assert _daily(sessions) == [("*", 3, 30), ("eu", 3, 30)]
    assert catch_up(sessions, T0 - timedelta(days=1), NOW) == 0


def test_catch_up_writes_its_plan_when_nobody_wrote_meanwhile(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    records = runs(4, every=timedelta(minutes=1), n=10)  # one 5-minute period
    store(sessions, records[:1])
    store(sessions, records[1:], counted=False)
    plan = _planned(sessions)
    assert len(plan.fresh) == 3 and plan.merged

    def not_stale(*_args: object) -> int:
        raise AssertionError("the plan was current: nothing to add again")

    monkeypatch.setattr("app.store.rollups.planned.add_digests", not_stale)
    assert written(sessions, plan) == 3
    assert _daily(sessions) == [("*", 4, 40), ("eu", 4, 40)]


def test_catch_up_passes_over_runs_whose_samples_were_pruned(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    store(sessions, runs(4, n=10), counted=False)
    prune_samples(engine, NOW)
    assert catch_up(sessions, T0 - timedelta(days=1), NOW, batch=2) == 0


def test_current_breakdowns_cover_every_pair_seen(sessions: sessionmaker[Session]) -> None:
    recent = runs(6, start=NOW - timedelta(minutes=55), target="chat", vantage="eu")
    quiet = runs(3, start=NOW - timedelta(days=1), target="search", vantage="us", seed=5)
    store(sessions, recent + quiet)
    with sessions() as session:
        found = current_breakdowns(session, NOW)
    assert [(b.target, b.vantage) for b in found] == [("chat", "eu"), ("search", "us")]
    active, idle = found
    assert (active.runs, active.n) == (6, 120)
    assert active.total["p50"] == pytest.approx(exact([t for t, _ in timed(recent)])["p50"])
    # No run in the last hour: its latest state, the hour up to its last run, however old.
    assert (idle.runs, idle.n) == (3, 60) and idle.dominant is not None
    assert idle.last_run_at == quiet[-1].started_at
    assert idle.total["p50"] == pytest.approx(exact([t for t, _ in timed(quiet)])["p50"])
    with sessions() as session:
        merged = current_breakdowns(session, NOW, exact=False)
    assert [(b.target, b.vantage, b.runs, b.n) for b in merged] == [
        (b.target, b.vantage, b.runs, b.n) for b in found
    ]
    assert merged[1].last_run_at == idle.last_run_at and merged[1].dominant == idle.dominant
    fast, slow = merged[0], active
    assert (fast.source, fast.dominant) == ("digests", slow.dominant)
    for name, value in slow.total.items():
        assert abs(fast.total[name] - value) <= BOUND * value
    for row, exact_row in zip(fast.phases, slow.phases, strict=True):
        assert (row.phase, row.provenance) == (exact_row.phase, exact_row.provenance)
        assert abs(row.p99 - exact_row.p99) <= BOUND * exact_row.p99


def test_overview_shows_a_new_run_age_at_once_and_its_numbers_once_digested(
    sessions: sessionmaker[Session],
) -> None:
    digested = runs(3, start=NOW - timedelta(minutes=50), every=timedelta(minutes=15))
    old = runs(2, start=NOW - timedelta(days=3), target="batch", vantage="us", seed=3)
    store(sessions, digested + old)
    newest = runs(1, start=NOW - timedelta(minutes=4), seed=9)
    with sessions.begin() as session:  # stored as the pipeline stores: no digest yet
        store_run(session, newest[0], NOW)
    with sessions() as session:
        before = current_breakdowns(session, NOW, exact=False)
    assert [(b.target, b.vantage, b.runs) for b in before] == [
        ("batch", "us", 2),  # three days old: its latest hour, not an empty row
        ("chat", "eu", 3),
    ]
    assert before[0].last_run_at == old[-1].started_at  # older than a day: its own seek
    assert before[1].last_run_at == newest[0].started_at
    assert catch_up(sessions, NOW - timedelta(days=2), NOW) == 1  # the rollup loop's step
    with sessions() as session:
        after = current_breakdowns(session, NOW, exact=False)
        samples = current_breakdowns(session, NOW)
    assert [(b.runs, b.n, b.last_run_at) for b in after] == [
        (b.runs, b.n, b.last_run_at) for b in samples
    ]
    assert after[1].runs == 4
    expected = exact([t for t, _ in timed(digested + newest)])
    for name, value in expected.items():
        assert abs(after[1].total[name] - value) <= BOUND * value


def test_a_pages_breakdowns_and_sparklines_are_those_of_the_whole_fleet(
    sessions: sessionmaker[Session],
) -> None:
    """The overview reads only its page's series: the same numbers as reading them all."""
    stored = [
        runs(3, start=NOW - timedelta(minutes=50), target=t, vantage=v, seed=i)
        for i, (t, v) in enumerate([("a", "eu"), ("a", "us"), ("b", "eu"), ("c", "eu")])
    ]
    old = runs(2, start=NOW - timedelta(hours=5), target="d", vantage="eu", seed=9)
    store(sessions, [r for group in stored for r in group] + old)
    with sessions() as session:
        last = last_runs(session, NOW)
        every = digest_breakdowns(session, (NOW - timedelta(hours=1), NOW), last)
        lines = sparklines(session, NOW, hours=6)
        names = {b.target: pair[0] for pair, b in every.items()}
        page = [(names["a"], "us"), (names["d"], "eu"), (names["b"], "eu")]
        paged = digest_breakdowns(session, (NOW - timedelta(hours=1), NOW), last, page)
        page_lines = sparklines(
            session, NOW, hours=6, series=[(names["a"], "us"), (names["d"], "eu")]
        )
    assert len(last) == 5  # every series has its latest run
    assert sorted(paged) == sorted(page)
    for pair in page:
        assert paged[pair].to_json() == every[pair].to_json(), pair
    assert paged[(names["d"], "eu")].runs == 2  # no run this hour: the hour up to its last
    assert page_lines == {k: v for k, v in lines.items() if k[0] in ("a", "d")}
    assert set(page_lines) == {("a", "eu"), ("a", "us"), ("d", "eu")}


def test_last_runs_read_one_row_a_series_however_old_its_runs(
    sessions: sessionmaker[Session],
) -> None:
    # series_latest, not the runs: no grouped scan, no seek per pair seen long ago.
    old = runs(2, start=NOW - timedelta(days=3), target="batch", vantage="us", seed=3)
    older = runs(1, start=NOW - timedelta(days=4), target="batch", vantage="eu", seed=4)
    store(sessions, old + older)
    statements: list[str] = []

    def record(conn: object, cursor: object, statement: str, *rest: object) -> None:
        statements.append(statement)

    with sessions() as session:
        engine = session.get_bind()
        event.listen(engine, "before_cursor_execute", record)
        try:
            found = last_runs(session, NOW)
        finally:
            event.remove(engine, "before_cursor_execute", record)
    assert sorted(found.values()) == [older[-1].started_at, old[-1].started_at]
    assert len(statements) == 1 and "series_latest" in statements[0]


def test_sparklines_give_hourly_medians_per_pair(sessions: sessionmaker[Session]) -> None:
    now = T0 + timedelta(hours=5, minutes=30)
    records = runs(12, start=T0 + timedelta(hours=3), every=timedelta(minutes=15))
    store(sessions, records)
    with sessions() as session:
        lines = sparklines(session, now, hours=6)
    assert list(lines) == [("chat", "eu")]
    line = lines[("chat", "eu")]
    assert len(line) == 6 and line[:3] == [None, None, None]
    for hour, value in zip(range(3, 6), line[3:], strict=True):
        inside = [r for r in records if r.started_at.hour == hour]
        expected = exact([t for t, _ in timed(inside)])["p50"]
        assert value is not None and abs(value - expected) <= BOUND * expected


@pytest.mark.parametrize(
    ("span", "bucket"),
    [
        (timedelta(hours=1), 60),
        (timedelta(hours=8), 60),
        (timedelta(hours=24), 300),
        (timedelta(days=3), 900),
        (timedelta(days=7), 3600),
        (timedelta(days=30), 21600),
        (timedelta(days=90), 21600),
        (timedelta(days=365), 86400),
        (timedelta(days=1500), 3 * 86400),
    ],
)
def test_pick_bucket_keeps_to_about_500_buckets(span: timedelta, bucket: int) -> None:
    assert pick_bucket(T0, T0 + span) == bucket
    assert bucket_count(T0, T0 + span, bucket) <= 501


@pytest.mark.parametrize(
    ("bucket", "period"), [(60, None), (120, None), (300, 300), (1800, 900), (7200, 3600)]
)
def test_source_period_is_the_largest_rollup_dividing_the_bucket(
    bucket: int, period: int | None
) -> None:
    assert source_period(bucket) == period
