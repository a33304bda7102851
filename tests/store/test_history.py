"""DatabaseHistory, on SQLite and PostgreSQL: stored runs rebuilt as the detectors see them."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import delete
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.evaluate import Evaluator
from app.analysis.detectors import DetectorParams
from app.analysis.runs import RunData, run_from_samples
from app.runs.dbsink import DatabaseSink
from app.store.dbhistory import DatabaseHistory
from app.store.models import SampleRow
from app.store.records import RunRecord
from tests.runfactory import (
    EVERY,
    T0,
    failed_run,
    make_run,
    record_of,
    store_records,
    streamed_sample,
)


def store(sessions: sessionmaker[Session], *runs: RunData, status: str = "complete") -> None:
    store_records(sessions, [replace(record_of(run), status=status) for run in runs], T0)


def series(seed: int, count: int, vantage: str = "eu", start: datetime = T0) -> list[RunData]:
    rng = np.random.default_rng(seed)
    runs = [make_run(rng, start + i * EVERY, vantage=vantage, run_id=None) for i in range(count)]
    # Stored runs are known by uuid: give the constructed ones the ids the store will use.
    return [replace_id(run) for run in runs]


def replace_id(run: RunData) -> RunData:
    record = record_of(run)
    return RunData(
        str(record.id), run.target, run.vantage, run.at, run.phase_names, run.phases,
        run.totals, run.censored, run.failed, run.samples,
    )  # fmt: skip


def test_a_stored_run_comes_back_as_it_was_measured(sessions: sessionmaker[Session]) -> None:
    rng = np.random.default_rng(1)
    original = replace_id(make_run(rng, T0, censored=3, failed=2))
    store(sessions, original)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 4)
    assert rebuilt.run_id == original.run_id
    assert (rebuilt.at, rebuilt.phase_names) == (original.at, original.phase_names)
    np.testing.assert_allclose(rebuilt.phases, original.phases)
    np.testing.assert_allclose(rebuilt.totals, original.totals)
    counts = (rebuilt.censored, rebuilt.failed, rebuilt.samples, rebuilt.ok)
    assert counts == (3, 2, 22, 17)


def test_last_and_window_give_complete_runs_oldest_first(
    sessions: sessionmaker[Session],
) -> None:
    runs = series(2, 6)
    store(sessions, *runs[:3], *runs[4:])
    store(sessions, runs[3], status="aborted")
    store(sessions, *series(3, 2, vantage="us"))
    history = DatabaseHistory(sessions)
    complete = [runs[i].run_id for i in (0, 1, 2, 4, 5)]
    assert [run.run_id for run in history.last("chat", "eu", 3)] == complete[-3:]
    assert [run.run_id for run in history.last("chat", "eu", 50)] == complete
    # [start, end): the run at ``end`` is not in it.
    window = history.window("chat", "eu", runs[1].at, runs[5].at)
    assert [run.run_id for run in window] == [runs[i].run_id for i in (1, 2, 4)]
    assert history.last("chat", "nowhere", 3) == []
    assert history.last("other", "eu", 3) == []


def test_a_run_whose_samples_were_pruned_is_left_out(sessions: sessionmaker[Session]) -> None:
    runs = series(4, 4)
    store(sessions, *runs)
    with sessions.begin() as session:
        session.execute(delete(SampleRow).where(SampleRow.run_id == record_of(runs[1]).id))
        # Part of a run pruned (the cutoff fell inside it): it cannot be rebuilt either.
        session.execute(
            delete(SampleRow).where(SampleRow.run_id == record_of(runs[2]).id, SampleRow.idx < 5)
        )
    history = DatabaseHistory(sessions)
    assert [run.run_id for run in history.last("chat", "eu", 4)] == [
        runs[0].run_id,
        runs[3].run_id,
    ]
    assert len(history.window("chat", "eu", T0, T0 + timedelta(days=1))) == 2


def test_a_run_without_any_timed_sample_is_kept(sessions: sessionmaker[Session]) -> None:
    failed = replace_id(failed_run(T0, failed=4))
    store(sessions, failed)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 3)
    assert (rebuilt.timed, rebuilt.failed, rebuilt.ok) == (0, 4, 0)


def test_runs_are_built_once_and_new_ones_found_even_when_they_arrive_late(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    runs = series(5, 6)
    store(sessions, *runs[:3], *runs[4:])
    history = DatabaseHistory(sessions)
    history.last("chat", "eu", 4)
    assert len(sample_reads) == 1
    for count in (4, 2, 1, 4):
        history.last("chat", "eu", count)
    assert len(sample_reads) == 1  # nothing new: nothing rebuilt
    # A run flushed from the spool late, older than the newest already seen.
    store(sessions, runs[3])
    latest = history.last("chat", "eu", 4)
    assert [run.run_id for run in latest] == [run.run_id for run in runs[2:]]
    assert len(sample_reads) == 2
    # The reference window reuses what is built and is kept for the same bounds.
    history.window("chat", "eu", T0, runs[5].at)
    history.window("chat", "eu", T0, runs[5].at)
    assert len(sample_reads) == 3


def test_vantages_are_those_with_a_run_in_the_last_seven_days(
    sessions: sessionmaker[Session],
) -> None:
    store(sessions, *series(6, 2, vantage="eu"))
    store(sessions, *series(7, 2, vantage="old", start=T0 - timedelta(days=8)))
    store(sessions, *series(8, 1, vantage="us"), status="aborted")
    now = T0 + timedelta(hours=1)
    history = DatabaseHistory(sessions)
    assert history.vantages("chat", now) == ["eu"]
    assert history.vantages("unknown", now) == []
    # A new vantage is present as soon as its runs are read, cache or not.
    store(sessions, *series(9, 1, vantage="ap", start=T0 + timedelta(minutes=30)))
    history.last("chat", "ap", 4)
    assert history.vantages("chat", now) == ["ap", "eu"]
    assert history.vantages("chat", T0 + timedelta(days=8)) == []


MINUTE, HOUR, WEEK = timedelta(minutes=1), timedelta(hours=1), timedelta(days=7)
Starts = dict[str, list[timedelta]]  # each vantage's runs, by start from T0


def runs_at(starts: Starts) -> list[RunData]:
    rng = np.random.default_rng(30)
    made = [
        make_run(rng, T0 + at, vantage=v, run_id=None) for v, ats in starts.items() for at in ats
    ]
    return [replace_id(run) for run in made]


@pytest.mark.parametrize(
    ("stored", "added", "asks"),
    [
        # (runs in the database, runs added after the first ask, each ask: when, reads)
        pytest.param(
            {"eu": [-2 * HOUR], "us": [-3 * HOUR]}, {}, [(0 * HOUR, 1), (-90 * MINUTE, 0)],
            id="a-run-read-in-an-earlier-window",
        ),
        pytest.param(
            {"eu": [-2 * HOUR], "us": [-3 * HOUR]}, {"eu": [-30 * MINUTE]},
            [(0 * HOUR, 1), (-HOUR, 0)], id="a-run-read-before-a-newer-one-added",
        ),
        pytest.param(
            {"eu": [-WEEK - 3 * HOUR, -2 * HOUR, -HOUR], "us": [-3 * HOUR]}, {},
            [(0 * HOUR, 1), (-90 * MINUTE, 1)], id="a-run-not-known-between-the-first-and-newest",
        ),
        pytest.param(
            {"eu": [-2 * HOUR], "us": [-WEEK - 3 * HOUR, -2 * HOUR, -30 * MINUTE]}, {},
            [(0 * HOUR, 1), (-HOUR, 1), (-HOUR, 0)], id="no-known-run-in-the-window-is-read-again",
        ),
        pytest.param(
            {"eu": [-3 * HOUR], "us": [-30 * MINUTE]}, {}, [(0 * HOUR, 1), (-HOUR, 0)],
            id="a-first-run-after-now-proves-none-before",
        ),
        pytest.param(
            {"eu": [-3 * HOUR], "old": [-WEEK - HOUR]}, {}, [(0 * HOUR, 1), (-2 * HOUR, 0)],
            id="absent-at-the-read-present-earlier",
        ),
        pytest.param(
            {"eu": [-3 * HOUR], "x": [-WEEK - 5 * HOUR, HOUR], "y": [-WEEK - 5 * HOUR]}, {},
            [(0 * HOUR, 1), (-2 * HOUR, 0)], id="no-run-in-the-window-proved-by-the-read",
        ),
        pytest.param(
            {"eu": [-3 * HOUR, -HOUR]}, {}, [(0 * HOUR, 1), (-7 * HOUR, 1)],
            id="earlier-than-the-read-reaches",
        ),
        pytest.param(
            {"eu": [-3 * HOUR]}, {"us": [-HOUR]}, [(0 * HOUR, 1), (-30 * MINUTE, 0)],
            id="a-run-added-after-the-read",
        ),
        pytest.param(
            {"eu": [-3 * HOUR], "us": [-WEEK - 3 * HOUR, -30 * MINUTE]},
            {"ap": [MINUTE, 2 * MINUTE]}, [(0 * HOUR, 1), (-HOUR, 1), (MINUTE * 1.5, 0)],
            id="runs-added-outlive-a-read-at-an-earlier-time",
        ),
    ],
)  # fmt: skip
def test_vantages_asked_earlier_than_the_read_are_answered_from_the_times_known(
    sessions: sessionmaker[Session],
    run_reads: list[str],
    stored: Starts,
    added: Starts,
    asks: list[tuple[timedelta, int]],
) -> None:
    store(sessions, *runs_at(stored))
    history = DatabaseHistory(sessions)
    for k, (at, reads) in enumerate(asks):
        if k == 1:
            for run in runs_at(added):
                store(sessions, run)
                history.add(record_of(run))
        before = len(run_reads)
        answer = history.vantages("chat", T0 + at)
        assert len(run_reads) - before == reads, f"ask {k} at {at}"
        assert answer == DatabaseHistory(sessions).vantages("chat", T0 + at)  # a fresh read's


def test_vantages_asked_at_any_time_answer_as_a_fresh_read_would(
    sessions: sessionmaker[Session], run_reads: list[str]
) -> None:
    rng = np.random.default_rng(31)

    def minutes(low: int, high: int) -> timedelta:
        return MINUTE * int(rng.integers(low, high))

    vantages = ["ap", "eu", "sa", "us"]
    store(sessions, *runs_at({v: [minutes(-8 * 24 * 60, 0) for _ in range(3)] for v in vantages}))
    history, asks, reads = DatabaseHistory(sessions), 0, 0
    for _ in range(60):
        if rng.random() < 0.4:  # a run stored by this process, handed to the history
            (run,) = runs_at({str(rng.choice(vantages)): [minutes(-8 * 60, 10)]})
            store(sessions, run)
            history.add(record_of(run))
            continue
        now, before = T0 + minutes(-8 * 60, 10), len(run_reads)
        answer = history.vantages("chat", now)
        asks, reads = asks + 1, reads + len(run_reads) - before
        assert answer == DatabaseHistory(sessions).vantages("chat", now), f"at {now}"
    assert 0 < reads < asks / 2  # most asks answered from what is known


def test_the_window_skips_runs_it_cannot_rebuild_without_asking_again(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    runs = series(10, 3)
    store(sessions, *runs)
    with sessions.begin() as session:
        session.execute(delete(SampleRow))
    history = DatabaseHistory(sessions)
    assert history.window("chat", "eu", T0, T0 + timedelta(days=1)) == []
    assert history.last("chat", "eu", 3) == []
    assert len(sample_reads) == 1


def test_a_reference_window_longer_than_the_bound_is_not_kept(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    runs = series(11, 6)
    store(sessions, *runs)
    history = DatabaseHistory(sessions, kept_window_runs=4)
    for _ in range(2):
        history.window("chat", "eu", T0, runs[4].at)  # 4 runs: kept, read once
    assert len(sample_reads) == 1
    for _ in range(2):
        history.window("chat", "eu", T0, runs[5].at + EVERY)  # 6 runs: read every time
    assert len(sample_reads) == 3


def test_runs_the_store_hands_over_are_answered_from_memory_without_a_query(
    sessions: sessionmaker[Session], run_reads: list[str], sample_reads: list[str]
) -> None:
    runs = series(12, 6)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    store_records(sessions, records[:3], T0)
    for record in records[:3]:
        history.add(record)
    history.last("chat", "eu", 4)  # read once from the database
    asked = len(run_reads)
    for record in records[3:]:
        store_records(sessions, [record], T0)
        history.add(record)
        latest = history.last("chat", "eu", 4)
        assert latest[-1].run_id == str(record.id)
        assert history.last("chat", "eu", 2) == latest[-2:]
    assert [run.run_id for run in latest] == [run.run_id for run in runs[2:]]
    # Every answer from memory, after one seek for the newest run's id each.
    assert len(run_reads) == asked + 2 * len(records[3:])
    assert sample_reads == []  # the runs handed over were never read back
    np.testing.assert_allclose(latest[-1].phases, runs[-1].phases)
    assert history.vantages("chat", runs[-1].at) == ["eu"]


def test_a_newer_run_stored_by_another_process_is_found_at_once(
    sessions: sessionmaker[Session],
) -> None:
    runs = series(13, 4)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    store_records(sessions, records[:2], T0)
    history.add(records[1])
    history.last("chat", "eu", 3)
    # Not handed over: an agent's push taken by another replica.
    store_records(sessions, records[2:3], T0)
    found = history.last("chat", "eu", 3)
    assert [r.run_id for r in found] == [r.run_id for r in runs[:3]]


def test_an_evaluation_seeks_the_newest_run_once_and_the_next_finds_a_newer_one(
    sessions: sessionmaker[Session], run_reads: list[str]
) -> None:
    runs = series(17, 4)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    store_records(sessions, records[:2], T0)
    for record in records[:2]:
        history.add(record)
    history.last("chat", "eu", 3)  # read once from the database
    asked = len(run_reads)
    with history.evaluation():
        first = history.last("chat", "eu", 3)
        assert history.last("chat", "eu", 2) == first[-2:]
        store_records(sessions, records[2:3], T0)  # not handed over: another replica's
        assert history.last("chat", "eu", 3) == first  # this evaluation looked already
    assert len(run_reads) == asked + 1  # one seek for the three
    with history.evaluation():
        found = history.last("chat", "eu", 3)
        assert history.last("chat", "eu", 1) == found[-1:]
    assert [r.run_id for r in found] == [r.run_id for r in runs[:3]]
    asked = len(run_reads)
    for _ in range(2):
        assert history.last("chat", "eu", 3) == found
    assert len(run_reads) == asked + 2  # outside an evaluation: a seek every time


def test_a_steady_evaluation_asks_the_database_one_seek(
    sessions: sessionmaker[Session], run_reads: list[str]
) -> None:
    runs = series(18, 12)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    evaluator = Evaluator(history, lambda _target: DetectorParams())
    seeks = []
    for record, run in zip(records, runs, strict=True):
        store_records(sessions, [record], T0)
        history.add(record)
        asked = len(run_reads)
        evaluator.evaluate("chat", "eu", run.at + timedelta(seconds=1))
        # ``last``'s statements: the seek for the newest run's id, or reading the newest runs
        newest = [q for q in run_reads[asked:] if "ORDER BY runs.started_at DESC" in q]
        seeks.append(len(newest))
    assert seeks[-4:] == [1, 1, 1, 1]  # once warm: one seek an evaluation, read nothing


def test_a_targets_vantages_judged_together_ask_their_newest_runs_in_one_statement(
    sessions: sessionmaker[Session], run_reads: list[str]
) -> None:
    vantages = ["ap", "eu", "us", "za"]
    runs = {v: series(40 + k, 3, vantage=v) for k, v in enumerate(vantages)}
    history = DatabaseHistory(sessions)
    for v in vantages:
        for record in [record_of(run) for run in runs[v][:2]]:
            store_records(sessions, [record], T0)
            history.add(record)
        history.last("chat", v, 2)  # read once from the database
    asked = len(run_reads)
    with history.evaluation():
        found = {v: history.last("chat", v, 2) for v in vantages}
    seeks = [q for q in run_reads[asked:] if "ORDER BY runs.started_at DESC" in q]
    assert len(seeks) == 1  # every series kept at once, with the first asked
    assert all([r.run_id for r in found[v]] == [r.run_id for r in runs[v][:2]] for v in vantages)
    # Not handed over: another replica took this push; the next evaluation finds it.
    store_records(sessions, [record_of(runs["us"][2])], T0)
    with history.evaluation():
        found = {v: history.last("chat", v, 2) for v in vantages}
    assert [r.run_id for r in found["us"]] == [r.run_id for r in runs["us"][1:]]
    assert [r.run_id for r in found["za"]] == [r.run_id for r in runs["za"][:2]]


def test_an_older_run_stored_by_another_process_is_found_at_the_next_resync(
    sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = series(16, 4)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    store_records(sessions, [records[0], records[2]], T0)
    history.add(records[2])
    history.last("chat", "eu", 3)
    store_records(sessions, records[1:2], T0)  # not handed over: a spool flushed late
    assert [r.run_id for r in history.last("chat", "eu", 3)] == [runs[0].run_id, runs[2].run_id]
    monkeypatch.setattr("app.store.dbhistory.RESYNC_S", 0.0)
    found = history.last("chat", "eu", 3)
    assert [r.run_id for r in found] == [r.run_id for r in runs[:3]]


def test_a_longer_tail_than_was_read_is_asked_of_the_database(
    sessions: sessionmaker[Session],
) -> None:
    runs = series(14, 5)
    records = [record_of(run) for run in runs]
    store_records(sessions, records, T0)
    history = DatabaseHistory(sessions)
    history.add(records[-1])
    assert len(history.last("chat", "eu", 2)) == 2
    assert [r.run_id for r in history.last("chat", "eu", 5)] == [r.run_id for r in runs]


def test_the_database_sink_hands_each_run_it_stored_to_the_history_once(
    sessions: sessionmaker[Session], run_reads: list[str]
) -> None:
    runs = series(15, 3)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    handed: list[str] = []

    def stored(record: RunRecord) -> None:
        handed.append(str(record.id))
        history.add(record)

    sink = DatabaseSink(sessions, clock=lambda: runs[-1].at + EVERY, stored=stored)
    assert sink.store(records[0])
    history.last("chat", "eu", 3)
    asked = len(run_reads)
    assert sink.store_batch(records[1:]) == [True, True]
    assert sink.store(records[2]) is False  # stored already: not handed over again
    assert handed == [str(record.id) for record in records]
    assert [r.run_id for r in history.last("chat", "eu", 3)] == [r.run_id for r in runs]
    assert len(run_reads) == asked + 1  # the seek for the newest run's id; no run read


def test_a_stored_run_comes_back_with_its_objective_values(
    sessions: sessionmaker[Session],
) -> None:
    rng = np.random.default_rng(2)
    record = record_of(make_run(rng, T0, censored=2, failed=1))
    # The first token of each answered sample 10 ms apart; the cut ones never got one.
    samples = tuple(
        replace(s, marks={"first_answer_token": (100 + 10 * s.idx) * 1_000_000})
        if s.status == "ok"
        else s
        for s in record.samples
    )
    store_records(sessions, [replace(record, samples=samples)], T0)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 1)
    values, lower = rebuilt.readings["ttft_ms"]
    np.testing.assert_allclose(values[:18], [100 + 10 * i for i in range(18)])
    assert lower.tolist() == [False] * 18 + [True] * 2  # cut before a token: at least the cut
    np.testing.assert_allclose(values[18:], rebuilt.totals[18:])
    assert rebuilt.cut_mask().tolist() == [False] * 18 + [True] * 2


def test_windows_of_twenty_lengths_read_samples_with_six_statements(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    # Each IN-list length is a statement SQLite prepares and caches apart (app.store.inlists).
    runs = series(12, 20)
    store(sessions, *runs)
    for count in range(1, 21):
        window = DatabaseHistory(sessions).window("chat", "eu", T0, runs[count - 1].at + EVERY)
        assert [run.run_id for run in window] == [run.run_id for run in runs[:count]]
    assert len(sample_reads) == 20
    assert len(set(sample_reads)) == 6  # 1, 2, 4, 8, 16 and 32 parameters


def test_a_stored_streamed_run_comes_back_with_its_tpot_and_stall(
    sessions: sessionmaker[Session],
) -> None:
    # The first answer token at 100 ms, the 11th at 600: TPOT 50 ms; stalls 80 and 400 ms.
    samples = (streamed_sample(0, 100, 600, 11, 80.0), streamed_sample(1, 100, 600, 11, 400.0))
    record = record_of(make_run(np.random.default_rng(3), T0, n=2))
    record = replace(record, samples=samples)
    store_records(sessions, [record], T0)
    (rebuilt,) = DatabaseHistory(sessions).last("chat", "eu", 1)
    # What ``add`` keeps of the run the store hands over: the same values.
    handed = run_from_samples(str(record.id), "chat", "eu", T0, record.samples)
    for run in (rebuilt, handed):
        np.testing.assert_allclose(run.readings["tpot_ms"][0], [50.0, 50.0])
        np.testing.assert_allclose(run.readings["stall_ms"][0], [80.0, 400.0])


def test_a_run_added_while_a_read_holds_the_history_is_kept_without_waiting_for_it(
    sessions: sessionmaker[Session], sample_reads: list[str]
) -> None:
    runs = series(21, 3)
    records = [record_of(run) for run in runs]
    history = DatabaseHistory(sessions)
    store_records(sessions, records[:1], T0)
    history.add(records[0])
    assert [run.run_id for run in history.last("chat", "eu", 2)] == [str(records[0].id)]
    store_records(sessions, records[1:], T0)
    added = threading.Thread(target=lambda: [history.add(record) for record in records[1:]])
    with history._hand.held():  # a read in flight: its database round trip holds the lock
        added.start()
        added.join(30)  # the store's thread (an agent's push) does not wait for the read
        assert not added.is_alive()
    latest = history.last("chat", "eu", 2)  # the next read takes the runs in first
    assert [run.run_id for run in latest] == [str(record.id) for record in records[1:]]
    assert sample_reads == []  # from memory: the runs added, never read back
    assert history.vantages("chat", runs[-1].at) == ["eu"]
