"""``load_sample_set`` reads what the pipeline stored, on every database."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy.orm import Session, sessionmaker

from app.store.reads.whatifsamples import load_sample_set, vantages_of
from app.store.records import RunRecord, SampleRecord
from app.store.targets import TargetValues, sync_targets
from tests.runfactory import EVERY, T0, make_run, record_of, store_records, streamed_sample

NOW = T0 + timedelta(days=2)


def _stored(sessions: sessionmaker[Session]) -> list[RunRecord]:
    rng = np.random.default_rng(4)
    records = [
        record_of(make_run(rng, T0 + i * EVERY, n=10, censored=1, failed=1, vantage=vantage))
        for i in range(6)
        for vantage in ("eu", "us")
    ]
    records.append(record_of(make_run(rng, T0 + 6 * EVERY, target="other")))
    with sessions.begin() as session:
        values = [TargetValues("chat", "openai", "http://x", 900.0, {"deadline_ms": 1200.0})]
        sync_targets(session, values, NOW)
    store_records(sessions, records, NOW)
    return records


def test_one_vantages_samples_come_back_as_stored_runs_by_runs(
    sessions: sessionmaker[Session],
) -> None:
    records = _stored(sessions)
    with sessions() as session:
        found = load_sample_set(session, "chat", "eu", T0, T0 + timedelta(days=1))
        assert vantages_of(session, "chat", T0, NOW) == ["eu", "us"]
    assert found is not None
    eu = [r for r in records if r.vantage == "eu" and r.target == "chat"]
    assert found.n == 6 * 10  # the failed sample of each run is left out
    assert found.runs == 6
    assert int(found.censored.sum()) == 6
    assert found.deadline_ms == 1200.0
    assert found.phases == ("connect", "network", "queue", "prefill", "generation", "transfer")
    stored = sorted(s.total_ms for r in eu for s in r.samples if s.status != "error")
    assert sorted(found.totals) == pytest.approx(stored)


def test_the_window_and_every_vantage(sessions: sessionmaker[Session]) -> None:
    _stored(sessions)
    with sessions() as session:
        both = load_sample_set(session, "chat", None, T0, NOW)
        first_two = load_sample_set(session, "chat", "us", T0, T0 + 2 * EVERY)
        nothing = load_sample_set(session, "chat", "eu", NOW, NOW + EVERY)
        unknown = load_sample_set(session, "nobody", None, T0, NOW)
    assert both is not None and both.runs == 12
    assert first_two is not None and first_two.runs == 2
    assert nothing is not None and nothing.n == 0
    assert unknown is None


def test_a_streams_rhythm_is_read_only_when_asked(sessions: sessionmaker[Session]) -> None:
    # Streamed answers: tokens from 100 to 100 + 30·(tokens − 1) ms, TPOT 30 ms; one whole
    # answer (no marks, no stream) has neither value.
    streamed = [
        streamed_sample(i, 100.0, 100.0 + 30.0 * (3 + i), 4 + i, 40.0 + i) for i in range(3)
    ]
    whole = SampleRecord(3, T0, "ok", 250.0, {"prefill": 50.0, "generation": 200.0})
    record = replace(
        record_of(make_run(np.random.default_rng(1), T0, n=1)), samples=(*streamed, whole)
    )
    store_records(sessions, [record], NOW)
    with sessions() as session:
        found = load_sample_set(session, "chat", None, T0, NOW, ("tpot_ms", "stall_ms"))
        bare = load_sample_set(session, "chat", None, T0, NOW)
    assert found is not None and bare is not None
    tpot, stall = found.rhythm["tpot_ms"], found.rhythm["stall_ms"]  # in the rows' order
    np.testing.assert_allclose(np.sort(tpot), [30.0, 30.0, 30.0, np.nan])
    np.testing.assert_allclose(np.sort(stall), [40.0, 41.0, 42.0, np.nan])
    np.testing.assert_array_equal(np.isnan(tpot), found.totals == 250.0)  # the whole answer
    assert bare.rhythm == {} and bare.n == found.n == 4
