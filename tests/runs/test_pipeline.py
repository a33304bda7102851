"""probe → store: runs are stored whole, spooled while the database is away, never doubled."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import utcnow
from app.config import Target
from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.probe.spec import Kind
from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.store.db import make_engine, make_sessions
from app.store.models import RunRow, SampleRow
from app.store.records import RunRecord, RunStatus
from tests.helpers import until

pytestmark = pytest.mark.anyio

FAST = SimConfig(one_way_ms=2, queue_median_ms=5, queue_sigma=0, prefill_ms=2, tokens=5)
BODY = {"model": "sim", "stream": True, "messages": []}


@pytest.fixture
def sim_config() -> SimConfig:
    return FAST


def chat_target(sim: SimServer, **fields: object) -> Target:
    base = {
        "name": "chat",
        "kind": Kind.OPENAI,
        "url": f"{sim.url}/v1/chat/completions",
        "body": BODY,
        "samples": 4,
        "deadline_ms": 1500,
    }
    return Target.model_validate(base | fields)


def unreachable_sessions(tmp_path: Path) -> sessionmaker[Session]:
    # A database file in a directory that does not exist: every connect fails.
    return make_sessions(make_engine(f"sqlite:///{tmp_path}/absent/dir/pw.db"))


def pipeline_of(sessions: sessionmaker[Session], spool: Spool) -> Pipeline:
    """``serve``'s pipeline with its writer not started: runs are stored on the caller's
    thread, as in the demo."""
    return Pipeline(Writer(DatabaseSink(sessions), spool), vantage="here")


def stored_runs(sessions: sessionmaker[Session]) -> list[RunRow]:
    with sessions() as session:
        return list(session.scalars(select(RunRow).order_by(RunRow.started_at)))


def sample_count(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(SampleRow)) or 0


async def test_a_run_is_stored_whole_with_its_summary(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    pipeline = pipeline_of(sessions, Spool(tmp_path / "spool"))
    record = await pipeline.run(chat_target(sim))
    (run,) = stored_runs(sessions)
    assert (run.id, run.status, run.vantage, run.n_samples, run.n_ok) == (
        record.id, RunStatus.COMPLETE, "here", 4, 4
    )  # fmt: skip
    assert run.summary["dominant"] == run.dominant_phase
    assert set(run.summary["phases"]["queue"]) == {"p50", "p90", "p95", "p99", "share"}
    assert run.total_p99 is not None and run.total_p50 is not None
    assert sample_count(sessions) == 4
    assert not list((tmp_path / "spool" / "inflight").glob("*.json"))


async def test_runs_wait_in_the_spool_while_the_database_is_away_then_arrive_once_in_order(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    away = pipeline_of(unreachable_sessions(tmp_path), spool)
    first = await away.run(chat_target(sim))
    second = await away.run(chat_target(sim))
    assert spool.pending() == 2 and stored_runs(sessions) == []

    back = pipeline_of(sessions, spool)
    third = await back.run(chat_target(sim))  # flushes the spool first, keeping the order
    assert [run.id for run in stored_runs(sessions)] == [first.id, second.id, third.id]
    assert spool.pending() == 0
    assert back.writer.flush() == 0
    assert sample_count(sessions) == 12


async def test_a_run_cancelled_by_shutdown_is_stored_as_aborted(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    pipeline = pipeline_of(sessions, Spool(tmp_path / "spool"))
    task = asyncio.create_task(pipeline.run(chat_target(sim, samples=100, spacing=0.02)))
    await until(lambda: len(sim.truths()) >= 3, what="three samples answered")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (run,) = stored_runs(sessions)
    assert run.status == RunStatus.ABORTED
    assert 0 < run.n_samples < 100
    assert sample_count(sessions) == run.n_samples


async def test_a_run_cut_by_a_crash_is_recovered_as_aborted(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    import uuid

    crashed = Spool(tmp_path / "spool")
    journal = RunRecord(uuid.uuid4(), "chat", "here", utcnow(), RunStatus.ABORTED)
    crashed.begin(journal)  # the process died here, mid-run
    crashed.close()  # and its lock went with it

    restarted = Writer(DatabaseSink(sessions), Spool(tmp_path / "spool"))
    restarted.start()  # as the service starts it, then recovers
    assert await restarted.recover_orphans() == 1
    assert await asyncio.to_thread(restarted.close, 30) == 0  # stored, none left to spool
    (run,) = stored_runs(sessions)
    assert (run.id, run.status, run.n_samples) == (journal.id, RunStatus.ABORTED, 0)
    assert await restarted.recover_orphans() == 0


async def test_delivering_the_same_run_twice_stores_it_once(
    sim: SimServer, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    pipeline = pipeline_of(sessions, Spool(tmp_path / "spool"))
    record = await pipeline.run(chat_target(sim))
    assert pipeline.writer.deliver(record) is True  # delivered: already there, nothing added
    assert not pipeline.writer.sink.store(record)
    assert len(stored_runs(sessions)) == 1
    assert sample_count(sessions) == 4
