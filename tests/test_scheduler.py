"""The watch loop's timing: one job per target, spread, never overlapping, reloadable."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from app.config import Target
from app.scheduler import Watch, first_run_offset

pytestmark = pytest.mark.anyio


def target(name: str, **fields: object) -> Target:
    return Target.model_validate({"name": name, "url": "http://127.0.0.1:1/"} | fields)


class Recorder:
    """The pipeline's place: records what the scheduler asked for, and when."""

    def __init__(self, busy_s: float = 0.0) -> None:
        self.calls: list[tuple[str, datetime | None]] = []
        self.busy_s = busy_s
        self.active = 0
        self.most_active = 0

    async def __call__(self, run: Target, due: datetime | None) -> None:
        self.calls.append((run.name, due))
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            await asyncio.sleep(self.busy_s)
        finally:
            self.active -= 1

    def count(self, name: str) -> int:
        return sum(1 for called, _ in self.calls if called == name)


def test_first_runs_are_spread_over_the_interval_and_stable() -> None:
    offsets = [first_run_offset(f"target-{i}", 10.0) for i in range(200)]
    assert all(0 <= offset < 10 for offset in offsets)
    assert sum(offset < 5 for offset in offsets) in range(80, 121)  # about half
    assert first_run_offset("target-7", 10.0) == offsets[7]


async def test_every_target_runs_on_its_interval() -> None:
    recorder = Recorder()
    watch = Watch(recorder)
    watch.apply([target("a", interval=0.2), target("b", interval=0.3)])
    watch.start(paused=False)
    await asyncio.sleep(1.25)
    await watch.stop(grace_s=1)
    assert 5 <= recorder.count("a") <= 7
    assert 3 <= recorder.count("b") <= 5
    assert all(due is not None and due.tzinfo is UTC for _, due in recorder.calls)
    assert max(watch.lateness_s) < 0.05


async def test_a_slow_run_never_overlaps_the_next() -> None:
    recorder = Recorder(busy_s=0.35)
    watch = Watch(recorder)
    watch.apply([target("slow", interval=0.1)])
    watch.start(paused=False)
    await asyncio.sleep(1.0)
    await watch.stop(grace_s=1)
    assert recorder.most_active == 1
    assert 2 <= recorder.count("slow") <= 4


async def test_apply_adds_removes_reschedules_and_updates_without_restart() -> None:
    recorder = Recorder()
    watch = Watch(recorder)
    watch.apply([target("keep", interval=60), target("drop", interval=60)])
    watch.start(paused=False)
    changes = watch.apply(
        [target("keep", interval=0.1), target("new", interval=0.1)],
    )
    assert changes.added == ("new",) and changes.removed == ("drop",)
    assert changes.rescheduled == ("keep",)
    changes = watch.apply([target("keep", interval=0.1, samples=3), target("new", interval=0.1)])
    assert changes.updated == ("keep",) and not changes.rescheduled
    await asyncio.sleep(0.5)
    await watch.stop(grace_s=1)
    assert recorder.count("drop") == 0
    assert recorder.count("keep") >= 2 and recorder.count("new") >= 1
    assert {job.id for job in watch.scheduler.get_jobs()} == {"keep", "new"}


async def test_a_paused_watch_runs_nothing_until_resumed() -> None:
    recorder = Recorder()
    watch = Watch(recorder)
    watch.apply([target("a", interval=0.1)])
    watch.start(paused=True)
    await asyncio.sleep(0.4)
    assert recorder.calls == []
    watch.resume()
    await asyncio.sleep(0.4)
    await watch.stop(grace_s=1)
    assert recorder.count("a") >= 2


async def test_stop_gives_runs_in_flight_a_grace_then_cancels_them() -> None:
    recorder = Recorder(busy_s=30)
    watch = Watch(recorder)
    watch.apply([target("long", interval=0.05)])
    watch.start(paused=False)
    await asyncio.sleep(0.2)
    assert recorder.active == 1
    began = asyncio.get_running_loop().time()
    await watch.stop(grace_s=0.3)
    assert 0.25 < asyncio.get_running_loop().time() - began < 1.0
    assert recorder.active == 0
