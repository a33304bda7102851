"""The overview's page as the databases rank it (``ranked_page``: the alerted series ranked
apart, the rest filtered, sorted, counted and cut by SQL) is the page the pure ranking of
every series gives (``page_of``), for every filter, sort and page, on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.views import AlertView
from app.config import Target
from app.runtime.targetsync import target_values
from app.store.db import make_engine, make_sessions
from app.store.reads.seriesrank import fleet_counts, series_ranks
from app.store.records import RunRecord, SampleRecord
from app.store.targets import sync_targets
from app.web.pages.overview import ranked_page, series_facts
from app.web.pages.overviewpaging import OverviewQuery, Paged, page_of
from tests.runfactory import store_records

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# target → interval (None: known only by its runs); "a_b" for the filter's escaping
TARGETS = {f"t{i:02d}": 60.0 if i % 3 else None for i in range(12)} | {"a_b": 60.0}
AGES_S = [30, 500, 7200, 600]  # fresh; stale at 60 s; stale either way; stale at 60 s only


def alert(target: str, vantage: str | None, state: str = "firing") -> AlertView:
    return AlertView(
        id=str(uuid.uuid4()), kind="tail_shift", target=target, vantage=vantage,
        scope="service" if vantage is None else "vantage", from_phase=None, to_phase=None,
        severity="critical", state=state, open=True, streak=1, opened_at=NOW,
        fired_at=NOW, resolved_at=None, acknowledged_at=None, acknowledged_by=None,
        summary="", numbers={}, labels={}, updated_at=NOW,
    )  # fmt: skip


ALERTS: dict[tuple[str, str | None], list[AlertView]] = {
    ("t03", "eu"): [alert("t03", "eu")],
    ("t05", "us"): [alert("t05", "us", "pending")],
    ("t07", None): [alert("t07", None), alert("t07", None, "pending")],  # both vantages
    ("t09", "eu"): [alert("t09", "eu"), alert("t09", "eu")],
    ("*", "us"): [alert("*", "us")],  # a vantage's silence: no series
    ("ghost", "eu"): [alert("ghost", "eu")],  # a target with no run
}


def run(target: str, vantage: str, index: int) -> RunRecord:
    at = NOW - timedelta(seconds=AGES_S[index % len(AGES_S)])
    misses = index % 3  # of 4 samples: ties in misses, ordered by name
    samples = tuple(
        SampleRecord(i, at, "deadline_exceeded" if i < misses else "ok", 10.0, {"server": 10.0})
        for i in range(4)
    )
    return RunRecord(uuid.uuid4(), target, vantage, at, "complete", samples, finished_at=at)


@pytest.fixture(scope="module")
def fleet(module_db_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(module_db_url)
    sessions = make_sessions(engine)
    known = [Target(name=n, url="http://127.0.0.1:9/", interval=i or 60.0)
             for n, i in TARGETS.items() if i]  # fmt: skip
    with sessions.begin() as session:
        sync_targets(session, target_values(known), NOW)
    pairs = [(t, v) for t in TARGETS for v in ("eu", "us") if (t, v) != ("t11", "us")]
    records = [run(target, vantage, index) for index, (target, vantage) in enumerate(pairs)]
    store_records(sessions, records, NOW)
    yield sessions
    engine.dispose()


def expected(sessions: sessionmaker[Session], query: OverviewQuery) -> Paged:
    with sessions() as session:
        return page_of(series_facts(series_ranks(session), ALERTS, NOW), query)


QUERIES = [
    OverviewQuery(),
    OverviewQuery(per=5),
    OverviewQuery(per=5, page=2),
    OverviewQuery(per=5, page=3),
    OverviewQuery(per=7, page=4),
    OverviewQuery(per=5, page=99),
    OverviewQuery(sort="name", per=5, page=2),
    OverviewQuery(sort="name", per=4, page=7),
    OverviewQuery(q="t0"),
    OverviewQuery(q="T1 US"),
    OverviewQuery(q="_b"),
    OverviewQuery(q="t_1"),  # "_" is no wildcard: nothing
    OverviewQuery(q="nothing"),
    *(
        OverviewQuery(show=show, sort=sort, per=3, page=page)
        for show in ("firing", "alerting", "missing", "stale")
        for sort in ("worst", "name")
        for page in (1, 2)
    ),  # fmt: skip
    OverviewQuery(q="eu", show="missing", per=2, page=2),
]


@pytest.mark.parametrize("query", QUERIES, ids=lambda q: q.href())
def test_the_databases_page_is_the_page_of_every_series_ranked_here(
    fleet: sessionmaker[Session], query: OverviewQuery
) -> None:
    with fleet() as session:
        found = ranked_page(session, query, ALERTS, NOW).paged
    assert found == expected(fleet, query)


# (query, statements that read series_latest on PostgreSQL, on SQLite). PostgreSQL: the
# alerted series' lookup by name, then one statement that filters, counts, sorts and cuts
# the fleet with the summary's counts; another only for a page past the last, asked for
# again once the count is known. SQLite: the fleet's counts, the filter's (when one is
# given) and the page (when it has any of the fleet's series) apart.
READS = [
    (OverviewQuery(), 2, 3),
    (OverviewQuery(q="t0 eu", per=2, page=2), 2, 4),
    (OverviewQuery(show="missing", sort="name", per=3, page=3), 2, 4),
    (OverviewQuery(show="firing"), 2, 2),
    (OverviewQuery(q="nothing"), 2, 3),
    (OverviewQuery(per=5, page=99), 3, 4),
    (OverviewQuery(show="firing", per=1, page=9), 2, 2),  # past the last, but alerted only
]


@pytest.mark.parametrize(
    ("query", "postgres", "sqlite"),
    READS,
    ids=lambda v: v.href() if isinstance(v, OverviewQuery) else str(v),
)
def test_a_page_reads_the_fleet_once_with_its_counts(
    fleet: sessionmaker[Session], query: OverviewQuery, postgres: int, sqlite: int
) -> None:
    sent: list[str] = []
    with fleet() as session:
        engine = session.get_bind()
        listen = lambda *args: sent.append(args[2])  # noqa: E731  (conn, cursor, statement, …)
        event.listen(engine, "before_cursor_execute", listen)
        try:
            found = ranked_page(session, query, ALERTS, NOW)
        finally:
            event.remove(engine, "before_cursor_execute", listen)
        counts = fleet_counts(session, NOW)
    reads = postgres if engine.dialect.name == "postgresql" else sqlite
    assert sum("series_latest" in statement for statement in sent) == reads
    assert found.fleet == counts and found.paged == expected(fleet, query)


def test_the_filters_escape_and_some_queries_keep_only_alerted_or_nothing(
    fleet: sessionmaker[Session],
) -> None:
    """Guards on the table above: each case is not trivially empty or whole."""
    assert [f.target for f in expected(fleet, OverviewQuery(q="_b")).items] == ["a_b"] * 2
    assert expected(fleet, OverviewQuery(show="firing")).matching == 4  # t03, t07 ×2, t09
    assert 0 < expected(fleet, OverviewQuery(show="stale")).matching < 25


def test_the_summary_counts_every_series_target_and_stale_one(
    fleet: sessionmaker[Session],
) -> None:
    with fleet() as session:
        counts = fleet_counts(session, NOW)
        facts = series_facts(series_ranks(session), ALERTS, NOW)
    assert (counts.series, counts.targets) == (25, 13)
    assert counts.stale == sum(f.stale for f in facts) > 0
