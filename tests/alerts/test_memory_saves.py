"""Only the detector memories that changed are written (app/alerts/memorysaves.py): what is
written stays what the evaluator holds, across restarts, take-overs and failed writes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.alerts.memory import DetectorMemory
from app.alerts.memorysaves import MemorySaves
from app.alerts.rows import state_of
from app.store.models import DetectorStateRow
from tests.alerts.test_engine import Watch, rows
from tests.runfactory import T0

LATER = T0 + timedelta(minutes=1)


def _memory(last_run: str = "r1", cusums: dict[str, list[float]] | None = None) -> DetectorMemory:
    return DetectorMemory(last_run=last_run, cusums=cusums if cusums is not None else {})


@pytest.mark.parametrize(
    ("written", "now", "changed"),
    [
        ({}, {"eu": _memory()}, ["eu"]),  # never written
        ({"eu": _memory()}, {"eu": _memory()}, []),  # the same but for the time
        ({"eu": _memory()}, {"eu": _memory("r2")}, ["eu"]),  # a new run
        ({"eu": _memory(cusums={"x": [1.0]})}, {"eu": _memory(cusums={"x": [1.5]})}, ["eu"]),
        ({"eu": _memory(cusums={"x": [1.0]})}, {"eu": _memory(cusums={})}, ["eu"]),  # dropped
        ({"eu": _memory(), "us": _memory()}, {"eu": _memory("r2"), "us": _memory()}, ["eu"]),
        ({"eu": _memory()}, {"eu": _memory(), "us": _memory()}, ["us"]),  # a new vantage
    ],
)
def test_changed_leaves_out_what_was_written_as_it_is(
    written: dict[str, DetectorMemory], now: dict[str, DetectorMemory], changed: list[str]
) -> None:
    saves = MemorySaves()
    saves.written(state_of("chat", v, m, T0) for v, m in written.items())
    assert [state.vantage for state in saves.changed("chat", now, LATER)] == changed


def test_a_memory_changed_in_place_after_it_was_written_is_written_again() -> None:
    saves, memory = MemorySaves(), _memory(cusums={"x": [1.0]})
    saves.written(saves.changed("chat", {"eu": memory}, T0))
    memory.cusums["x"][0] = 2.0  # the detectors change their lists in place
    assert [s.cusums for s in saves.changed("chat", {"eu": memory}, LATER)] == [{"x": [2.0]}]


def test_forget_makes_a_target_s_memories_written_again() -> None:
    saves, memories = MemorySaves(), {"eu": _memory(), "us": _memory()}
    for target in ("chat", "other"):
        saves.written(saves.changed(target, memories, T0))
    saves.forget("chat")
    assert len(saves.changed("chat", memories, LATER)) == 2
    assert saves.changed("other", memories, LATER) == []
    saves.forget()
    assert len(saves.changed("other", memories, LATER)) == 2


VANTAGES = ("ap", "eu", "us")


@pytest.fixture
def watch(sessions: sessionmaker[Session]) -> Watch:
    return Watch(sessions)


def _written_at(watch: Watch) -> dict[str, object]:
    return {row.vantage: row.updated_at for row in rows(watch.sessions, DetectorStateRow)}


def _rows_hold_the_memories(watch: Watch) -> None:
    evaluator = watch.engine.evaluator
    for row in rows(watch.sessions, DetectorStateRow):
        memory = evaluator.memory(row.target, row.vantage)
        assert (row.last_run_id, row.tail_runs, row.cusums) == (
            memory.last_run, memory.tail.runs, memory.cusums
        )  # fmt: skip


def test_a_run_at_one_vantage_writes_that_vantage_s_memory_alone(watch: Watch) -> None:
    for vantage in VANTAGES:
        watch.ok(vantage)
    before = _written_at(watch)
    watch.ok("eu")
    after = _written_at(watch)
    assert after["eu"] == watch.now > before["eu"]
    assert (after["ap"], after["us"]) == (before["ap"], before["us"])
    _rows_hold_the_memories(watch)


@pytest.mark.parametrize("how", ["restart", "adopt"])
def test_after_a_restart_or_a_take_over_every_memory_is_written_once(
    watch: Watch, how: str
) -> None:
    for vantage in VANTAGES:
        watch.ok(vantage)
    if how == "restart":
        watch.restart().restore()
    else:
        watch.engine.adopt("chat")  # another replica may have written the rows meanwhile
    watch.ok("eu")
    assert set(_written_at(watch).values()) == {watch.now}
    watch.ok("us")
    assert _written_at(watch)["ap"] < watch.now
    _rows_hold_the_memories(watch)


def test_a_silence_check_with_nothing_to_write_opens_no_transaction(watch: Watch) -> None:
    watch.ok()
    begun: list[object] = []
    engine, began = watch.sessions.kw["bind"], begun.append
    event.listen(engine, "begin", began)
    try:
        assert watch.engine.judge_vantages([], T0, 2) == []
    finally:
        event.remove(engine, "begin", began)
    assert begun == []
