"""The watch loop's timing: one job per target on its shared grid, spread, never
overlapping, reloadable."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest
from apscheduler.schedulers.base import STATE_PAUSED

from app.config import Target
from app.runs.slots import Grid, epoch_ms
from app.runs.waits import within
from app.runtime.scheduler import MISFIRE_GRACE_S, Changes, GridTrigger, Watch, first_run_offset
from tests.helpers import until

pytestmark = pytest.mark.anyio
VANTAGE = "local"


def target(name: str, **fields: object) -> Target:
    return Target.model_validate({"name": name, "url": "http://127.0.0.1:1/"} | fields)


class Recorder:
    """The pipeline's place: records what the scheduler asked for, and when it ran.

    A run waits for ``release`` (set from the start unless ``hold``), so a test decides when
    runs finish instead of sleeping for them.
    """

    def __init__(self, *, hold: bool = False, busy_s: float = 0.0) -> None:
        self.calls: list[tuple[str, datetime | None]] = []
        self.slots: list[tuple[str, int | None]] = []
        self.busy_s = busy_s
        self.release = asyncio.Event()
        if not hold:
            self.release.set()
        self.active = 0
        self.most_active = 0
        self.cancelled = 0
        self.finished = 0
        self.skips = lambda: 0  # how many skips the watch has counted (a test sets it)
        self.skipped_before: list[int] = []  # ... when each run was called

    async def __call__(self, run: Target, due: datetime | None, slot: int | None) -> None:
        self.calls.append((run.name, due))
        self.skipped_before.append(self.skips())
        self.slots.append((run.name, slot))
        self.active += 1
        self.most_active = max(self.most_active, self.active)
        try:
            await self.release.wait()
            await asyncio.sleep(self.busy_s)
            self.finished += 1
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        finally:
            self.active -= 1

    def count(self, name: str) -> int:
        return sum(1 for called, _ in self.calls if called == name)

    def due(self, name: str) -> list[datetime]:
        return [due for called, due in self.calls if called == name and due is not None]


def test_first_runs_are_spread_over_the_interval_and_stable() -> None:
    offsets = [first_run_offset(f"target-{i}", 10.0) for i in range(200)]
    assert all(0 <= offset < 10 for offset in offsets)
    assert sum(offset < 5 for offset in offsets) in range(80, 121)  # about half
    assert first_run_offset("target-7", 10.0) == offsets[7]


def test_each_job_fires_first_at_the_next_cell_of_its_grid_then_every_interval() -> None:
    """Two processes started at different times fire on the same instants: the grid is the
    epoch + an offset of (target, vantage) + whole intervals, not the process's start."""
    times = []
    for started in (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 1, 0, 7, 3, tzinfo=UTC)):
        watch = Watch(Recorder(), VANTAGE)
        watch.apply([target("a", interval=0.2), target("b", interval=30)], now=started)
        for name, interval in (("a", 0.2), ("b", 30.0)):
            job = watch.scheduler.get_job(name)
            grid = Grid.of(name, VANTAGE, interval)
            first = job.next_run_time
            assert started <= first < started + timedelta(seconds=interval)
            assert (epoch_ms(first) - grid.offset_ms) % grid.interval_ms == 0
            assert (job.max_instances, job.coalesce) == (1, True)
            later = job.trigger.get_next_fire_time(first, first)
            assert later == first + timedelta(seconds=interval)
            times.append(later)
    a_then, b_then, a_later, b_later = times
    assert (epoch_ms(a_later) - epoch_ms(a_then)) % 200 == 0
    assert (epoch_ms(b_later) - epoch_ms(b_then)) % 30_000 == 0


def test_jitter_stays_inside_its_cell_and_never_drifts() -> None:
    """Up to ``jitter`` late, never early and never into the next cell: each fire time's slot
    is the cell after the last one's, however the draws fell."""
    grid = Grid.of("a", VANTAGE, 1.0)
    trigger = GridTrigger(grid, jitter_s=0.999)
    at = trigger.get_next_fire_time(None, datetime(2026, 1, 1, tzinfo=UTC))
    for _ in range(500):
        following = trigger.get_next_fire_time(at, at)
        assert grid.slot(following) == grid.slot(at) + 1000
        assert 0 <= epoch_ms(following) - grid.slot(following) < 1000
        at = following


async def test_every_target_runs_on_its_interval() -> None:
    """Due times sit on each target's grid, one run a slot, and the slot the run is given is
    its due time's cell. How late runs start under load is bench.schedule_load's lateness
    (p99 <= 50 ms)."""
    recorder = Recorder()
    watch = Watch(recorder, VANTAGE)
    watch.apply([target("a", interval=0.2), target("b", interval=0.3)])
    watch.start(paused=False)
    await until(lambda: recorder.count("a") >= 4 and recorder.count("b") >= 3, what="runs")
    await watch.stop(grace_s=1)
    assert all(due is not None and due.tzinfo is UTC for _, due in recorder.calls)
    for name, interval in (("a", 0.2), ("b", 0.3)):
        grid = Grid.of(name, VANTAGE, interval)
        due = recorder.due(name)
        assert all(epoch_ms(at) == grid.slot(at) for at in due), due  # on the grid
        slots = [slot for called, slot in recorder.slots if called == name]
        assert slots == [grid.slot(at) for at in due]
        assert slots == sorted(set(slots)), slots  # never two runs for one slot
    assert len(watch.lateness_s) == len(recorder.calls)
    assert all(late >= 0 for late in watch.lateness_s)


async def test_a_slow_run_never_overlaps_the_next(caplog: pytest.LogCaptureFixture) -> None:
    """A run busy for 3.5 intervals: never two at once, and the slots it covered are skipped,
    not queued (the next due slot is the last one reached once it has finished); the log
    says so once a streak of skips, not once a slot."""
    caplog.set_level(logging.WARNING, logger="app.runtime.scheduler")
    recorder = Recorder(busy_s=0.35)
    watch = Watch(recorder, VANTAGE)
    recorder.skips = watch.skips.total.total
    watch.apply([target("slow", interval=0.1)])
    watch.start(paused=False)
    await until(lambda: recorder.finished >= 3, what="three slow runs")
    await watch.stop(grace_s=1)
    assert recorder.most_active == 1
    due = recorder.due("slow")
    gaps = [(b - a).total_seconds() for a, b in pairwise(due)]
    assert all(gap >= 0.3 - 1e-6 for gap in gaps), gaps
    said = [r.getMessage() for r in caplog.records if r.name == "app.runtime.scheduler"]
    started = "target slow: a due run skipped, the previous run is still going"
    assert 1 <= said.count(started) <= len(recorder.calls), said
    assert any(line.endswith("due runs were skipped before this one began") for line in said)
    # (A loop starved past an interval on a busy machine may add ``woke_late`` skips.)
    assert watch.skips.total["slow", "running"] >= 1
    assert set(watch.skips.total) <= {("slow", "running"), ("slow", "woke_late")}
    grid = Grid.of("slow", VANTAGE, 0.1)
    assert cells(grid, due) == len(due) + recorder.skipped_before[-1]  # a run or a skip each


def cells(grid: Grid, due: list[datetime]) -> int:
    """The cells of ``grid`` from the first due time to the last, both included."""
    return (grid.slot(due[-1]) - grid.slot(due[0])) // grid.interval_ms + 1


async def test_slots_the_scheduler_woke_too_late_for_are_counted_and_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop held for 3.5 intervals (a process with no CPU): APScheduler runs the slot due
    now and drops the ones before it without a word; here each is a skip, counted and said,
    so every cell is a run or a skip."""
    caplog.set_level(logging.WARNING, logger="app.runtime.scheduler")
    recorder = Recorder()
    watch = Watch(recorder, VANTAGE)
    recorder.skips = watch.skips.total.total
    watch.apply([target("held", interval=0.1)])
    watch.start(paused=False)
    await until(lambda: recorder.finished >= 2, what="two runs")
    time.sleep(0.35)  # the loop held: no wake-up, no run
    held = recorder.finished
    await until(lambda: recorder.finished >= held + 2, what="two runs more")
    await watch.stop(grace_s=1)
    skipped = watch.skips.total
    assert skipped["held", "woke_late"] >= 2
    # (A run in flight as the loop was held makes the wake-up's slot a ``running`` skip.)
    assert set(skipped) <= {("held", "woke_late"), ("held", "running")}
    grid = Grid.of("held", VANTAGE, 0.1)
    assert cells(grid, recorder.due("held")) == len(recorder.calls) + recorder.skipped_before[-1]
    said = [r.getMessage() for r in caplog.records if r.name == "app.runtime.scheduler"]
    assert any("due runs skipped, the scheduler woke after its time" in line for line in said)
    assert watch.skips.counts(VANTAGE) == {(t, VANTAGE, r): n for (t, r), n in skipped.items()}


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        (Changes(), "no change"),
        (Changes(added=("a", "b")), "added a, b"),
        (Changes(("a",), ("b",), ("c",), ("d",)), "added a; removed b; rescheduled c; updated d"),
    ],
)
def test_changes_read_as_a_sentence_in_the_log(changes: Changes, said: str) -> None:
    assert str(changes) == said


async def test_apply_adds_removes_reschedules_and_updates_without_restart() -> None:
    recorder = Recorder()
    watch = Watch(recorder, VANTAGE)
    watch.apply([target("keep", interval=60), target("drop", interval=60)])
    watch.start(paused=False)
    changes = watch.apply(
        [target("keep", interval=0.1), target("new", interval=0.1)],
    )
    assert changes.added == ("new",) and changes.removed == ("drop",)
    assert changes.rescheduled == ("keep",)
    assert watch.scheduler.get_job("keep").trigger.interval == timedelta(seconds=0.1)
    changes = watch.apply([target("keep", interval=0.1, samples=3), target("new", interval=0.1)])
    assert changes.updated == ("keep",) and not changes.rescheduled
    assert watch.targets["keep"].samples == 3
    await until(lambda: recorder.count("keep") >= 2 and recorder.count("new") >= 1, what="runs")
    await watch.stop(grace_s=1)
    assert recorder.count("drop") == 0
    assert {job.id for job in watch.scheduler.get_jobs()} == {"keep", "new"}


async def test_a_paused_watch_runs_nothing_until_resumed() -> None:
    recorder = Recorder()
    watch = Watch(recorder, VANTAGE)
    # Applied a second ago: the first slot is already due when the watch starts.
    watch.apply([target("a", interval=0.1)], now=datetime.now(UTC) - timedelta(seconds=1))
    watch.start(paused=True)
    # A window for a run that should not happen; a slow machine only makes it shorter.
    await asyncio.sleep(0.3)
    assert recorder.calls == []
    watch.resume()
    await until(lambda: recorder.count("a") >= 2, what="runs after resume")
    await watch.stop(grace_s=1)


async def test_stop_lets_a_run_in_flight_finish_within_the_grace() -> None:
    recorder = Recorder(hold=True)
    watch = Watch(recorder, VANTAGE)
    watch.apply([target("long", interval=0.05)])
    watch.start(paused=False)
    await until(lambda: recorder.active == 1, what="a run in flight")
    stopping = asyncio.create_task(watch.stop(grace_s=60))
    await until(lambda: watch.scheduler.state == STATE_PAUSED, what="scheduling stopped")
    assert not stopping.done()  # waiting for the run
    recorder.release.set()
    await stopping
    assert (recorder.finished, recorder.cancelled, recorder.active) == (1, 0, 0)


async def test_stop_cancels_a_run_still_in_flight_after_the_grace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    recorder = Recorder(hold=True)
    watch = Watch(recorder, VANTAGE)
    watch.apply([target("long", interval=0.05)])
    watch.start(paused=False)
    await until(lambda: recorder.active == 1, what="a run in flight")
    loop = asyncio.get_running_loop()
    began = loop.time()
    await watch.stop(grace_s=0.3)
    assert loop.time() - began >= 0.3 - 0.01  # the grace was given in full
    assert (recorder.finished, recorder.cancelled, recorder.active) == (0, 1, 0)
    # One line that says so; no job error with a CancelledError traceback (APScheduler's).
    assert "target long: the run in flight was cut at stop" in caplog.messages
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


async def test_stop_leaves_a_run_that_swallows_its_cancellation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    began, release = asyncio.Event(), asyncio.Event()

    async def stubborn(_run: Target, _due: datetime | None, _slot: int | None) -> None:
        began.set()
        with contextlib.suppress(asyncio.CancelledError):  # as 3.11's wait_for could
            await asyncio.sleep(3600)
        await release.wait()

    watch = Watch(stubborn, VANTAGE)
    watch.apply([target("stubborn", interval=0.05)])
    watch.start(paused=False)
    await until(began.is_set, what="a run in flight")
    try:
        await within(watch.stop(grace_s=0.05), 30.0)  # ends: the run is left, named
        assert "stopping: run" in caplog.text and "did not end when cancelled" in caplog.text
    finally:
        release.set()


async def test_the_scheduler_keeps_to_its_schedule_until_a_due_run_is_a_grace_overdue() -> None:
    watch = Watch(Recorder(), VANTAGE)
    assert not watch.on_schedule(datetime.now(UTC))  # not started
    watch.apply([target("a", interval=1.0), target("b", interval=60)])
    watch.start(paused=False)
    try:
        await until(lambda: watch.scheduler.get_job("a").next_run_time is not None)
        now = datetime.now(UTC)
        assert watch.on_schedule(now)
        # A loaded minute: its runs start late, the scheduler still keeps time …
        assert watch.on_schedule(now + timedelta(seconds=MISFIRE_GRACE_S - 2))
        # … until a due run is later than it would ever start one.
        assert not watch.on_schedule(now + timedelta(seconds=MISFIRE_GRACE_S + 2))
        watch.pause()  # standing by: it probes nothing
        assert not watch.on_schedule(now)
    finally:
        await watch.stop(1.0)


async def test_a_slot_passed_to_an_owner_that_left_is_probed_late_within_its_cell() -> None:
    recorder = Recorder()
    here = [False]  # whether this replica owns the target's slots (app.replicas)
    watch = Watch(recorder, VANTAGE, owns=lambda _name, _slot: here[0])
    watch.apply([target("a", interval="1h")])
    watch.start(paused=False)
    try:
        await watch._job("a")  # its owner was live: passed
        assert (recorder.calls, watch.passed) == ([], 1)
        assert watch.take_passed() == []  # still the other's
        here[0] = True  # its lease turned out to end before the slot
        slot = Grid.of("a", VANTAGE, 3600).slot(datetime.now(UTC))
        assert watch.take_passed() == ["a"]
        await until(lambda: recorder.finished == 1)
        assert recorder.slots == [("a", slot)]
        assert watch.take_passed() == []  # once
    finally:
        await watch.stop(1.0)


async def test_a_passed_slot_whose_cell_is_over_is_left_to_the_next() -> None:
    recorder = Recorder()
    watch = Watch(recorder, VANTAGE, owns=lambda _name, _slot: False)
    watch.apply([target("a", interval="1h")])
    watch.start(paused=False)
    try:
        await watch._job("a")
        watch.owns = lambda _name, _slot: True
        assert watch.take_passed(datetime.now(UTC) + timedelta(hours=1)) == []
        assert watch.take_passed() == []  # forgotten, not kept for later
        assert recorder.calls == []
    finally:
        await watch.stop(1.0)


async def test_runs_past_max_in_flight_wait_their_turn_then_run() -> None:
    recorder = Recorder(hold=True)
    watch = Watch(recorder, VANTAGE, max_in_flight=2)
    watch.apply([target(name, interval="1h") for name in "abc"])
    watch.start(paused=True)
    try:
        jobs = [asyncio.ensure_future(watch._job(name)) for name in "abc"]
        await until(lambda: recorder.active == 2)
        await asyncio.sleep(0.05)  # the third would have started by now, unbounded
        assert (len(recorder.calls), len(watch.running)) == (2, 3)  # it waits, still its job's
        recorder.release.set()
        await asyncio.gather(*jobs)
        assert (recorder.finished, recorder.most_active) == (3, 2)
        assert not watch.skips.total
    finally:
        await watch.stop(1.0)


async def test_a_due_run_that_waits_its_whole_interval_for_a_turn_is_skipped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder(hold=True)
    watch = Watch(recorder, VANTAGE, max_in_flight=1)
    watch.apply([target("a", interval="1h"), target("b", interval="1h")])
    watch.start(paused=True)
    try:
        first = asyncio.ensure_future(watch._job("a"))
        await until(lambda: recorder.active == 1)
        # b's due time was in the cell before the current one: once its turn comes the
        # next slot is due, so this one is skipped, not probed a cell late.
        watch._due["b"] = datetime.now(UTC) - timedelta(hours=1)
        second = asyncio.ensure_future(watch._job("b"))
        recorder.release.set()
        await asyncio.gather(first, second)
        assert [name for name, _ in recorder.calls] == ["a"]
        assert (watch.skips.total, watch.skips.streak) == ({("b", "turn"): 1}, {"b": 1})
        assert "target b: a due run skipped, it waited its whole interval" in caplog.text
    finally:
        await watch.stop(1.0)
