"""Two writers merging runs into the same rollup rows at once, on SQLite and PostgreSQL:
each run counted once, no merge lost (PostgreSQL's rows are locked in key order by
``app.store.rollups.pgrows``; SQLite has one writer)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import numpy as np
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.digest import Digest, digest_of, merge_digests
from app.store.db import write_transaction
from app.store.ingest import store_run
from app.store.models import RollupRow
from app.store.records import RunRecord
from app.store.rollups.digests import add_run
from tests.runfactory import T0, make_run, record_of

NOW = T0 + timedelta(days=1)


def _runs(count: int, vantage: str, seed: int) -> list[RunRecord]:
    rng = np.random.default_rng(seed)
    every = timedelta(seconds=30)  # all within one 5-minute period and so every coarser one
    return [
        record_of(make_run(rng, T0 + i * every, target="chat", vantage=vantage))
        for i in range(count)
    ]


def _add_each(sessions: sessionmaker[Session], records: list[RunRecord]) -> None:
    for record in records:
        with write_transaction(sessions) as session:
            add_run(session, record, NOW)


def test_two_writers_merging_into_the_same_rows_lose_nothing(
    sessions: sessionmaker[Session],
) -> None:
    first, second = _runs(10, "eu", 1), _runs(10, "us", 2)
    with sessions.begin() as session:
        for record in first + second:
            store_run(session, record, NOW)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for done in [pool.submit(_add_each, sessions, part) for part in (first, second)]:
            done.result()
    with sessions() as session:
        pooled = session.scalars(
            select(RollupRow).where(RollupRow.vantage == "*").order_by(RollupRow.period_s)
        ).all()
    every = merge_digests(digest_of(record.samples) for record in first + second)
    assert [row.runs for row in pooled] == [20] * 5
    for row in pooled:
        assert Digest.from_json(row.digest).to_json() == every.to_json()
