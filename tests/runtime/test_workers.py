"""Heavy reads in worker processes: at most ``workers`` at once and ``queue`` waiting, the
rest Busy at once with a Retry-After; exceptions cross whole; a worker that dies fails its
call only, and ``close`` ends a call in flight instead of waiting for it."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from app.analysis.whatif import ChangeError
from app.runtime.workermetrics import WorkersCollector
from app.runtime.workers import Busy, WorkerLost, Workers

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]


def held_until(path: str) -> int:
    """Runs until ``path`` exists (the test's hand on how long a call lasts); the worker's pid."""
    while not Path(path).exists():
        time.sleep(0.01)
    return os.getpid()


def refuse(token: str) -> None:
    raise ChangeError(token, "no such change")


class Unpicklable(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a} and {b}")


def refuse_oddly() -> None:
    raise Unpicklable(1, 2)


def die() -> None:
    os._exit(3)


def pid() -> int:
    return os.getpid()


async def test_calls_past_the_workers_and_the_queue_are_busy_at_once(tmp_path: Path) -> None:
    workers = Workers(workers=1, queue=2)
    release = tmp_path / "release"
    try:
        calls = [asyncio.create_task(workers.run(held_until, str(release))) for _ in range(3)]
        await asyncio.sleep(0.1)
        assert workers.admitted == 3
        for _ in range(2):
            with pytest.raises(Busy) as busy:
                await workers.run(pid)
            assert busy.value.retry_after_s >= 1
        assert workers.refused == 2
        release.touch()
        pids = await asyncio.gather(*calls)
        assert len(set(pids)) == 1 and pids[0] != os.getpid()  # one worker, not this process
        assert workers.admitted == 0
        assert await workers.run(pid) == pids[0]  # room again, the same worker
    finally:
        workers.close()


@pytest.mark.parametrize(("workers", "queue", "admitted"), [(2, 0, 2), (1, 0, 1), (3, 1, 4)])
async def test_as_many_run_at_once_as_there_are_workers(
    tmp_path: Path, workers: int, queue: int, admitted: int
) -> None:
    pool = Workers(workers=workers, queue=queue)
    release = tmp_path / "release"
    try:
        calls = [asyncio.create_task(pool.run(held_until, str(release))) for _ in range(admitted)]
        await asyncio.sleep(0.1)
        with pytest.raises(Busy):
            await pool.run(pid)
        release.touch()
        assert len(set(await asyncio.gather(*calls))) == min(workers, admitted)
    finally:
        pool.close()


async def test_an_exception_crosses_whole_or_as_its_text() -> None:
    workers = Workers(workers=1, queue=0)
    try:
        with pytest.raises(ChangeError) as refused:
            await workers.run(refuse, "warp*2")
        assert (refused.value.token, refused.value.reason) == ("warp*2", "no such change")
        with pytest.raises(RuntimeError, match="Unpicklable: 1 and 2"):
            await workers.run(refuse_oddly)
    finally:
        workers.close()


async def test_a_worker_that_dies_fails_its_call_and_the_next_gets_a_new_one() -> None:
    workers = Workers(workers=1, queue=0)
    try:
        first = await workers.run(pid)
        with pytest.raises(WorkerLost, match="exit code 3"):
            await workers.run(die)
        assert await workers.run(pid) != first
    finally:
        workers.close()


async def test_close_ends_a_call_in_flight_and_refuses_the_next(tmp_path: Path) -> None:
    workers = Workers(workers=1, queue=1)
    await workers.run(pid)  # the worker is up
    call = asyncio.create_task(workers.run(held_until, str(tmp_path / "never")))
    await asyncio.sleep(0.5)
    workers.close()
    with pytest.raises(WorkerLost):
        await asyncio.wait_for(call, 30)
    with pytest.raises(Busy):
        await workers.run(pid)


async def test_the_metrics_say_how_many_wait_were_refused_or_lost() -> None:
    workers = Workers(workers=1, queue=0)
    registry = CollectorRegistry()
    registry.register(WorkersCollector(workers))
    try:
        with pytest.raises(WorkerLost):
            await workers.run(die)
        call = asyncio.create_task(workers.run(pid))
        await asyncio.sleep(0)
        with pytest.raises(Busy):
            await workers.run(pid)
        text = generate_latest(registry).decode()
        await call
    finally:
        workers.close()
    assert "phasewatch_whatif_admitted 1.0" in text
    assert "phasewatch_whatif_refused_total 1.0" in text
    assert "phasewatch_whatif_workers_lost_total 1.0" in text


async def test_a_call_cancelled_midway_ends_its_worker_and_the_next_gets_its_own_answer(
    tmp_path: Path,
) -> None:
    workers = Workers(workers=1, queue=1)
    try:
        first = await workers.run(pid)
        call = asyncio.create_task(workers.run(held_until, str(tmp_path / "never")))
        await asyncio.sleep(0.5)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert workers.admitted == 0
        second = await asyncio.wait_for(workers.run(pid), 60)
        assert second != first  # a new worker, and its own answer (not the cut call's)
    finally:
        workers.close()
