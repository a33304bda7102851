"""The writer thread: runs stored as they come, passed on (alert evaluation) once none
waits to be stored, and a second run of one target only after the first was passed on."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from app.runs.memsink import MemorySink
from app.runs.sink import Stored
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.store.records import RunRecord, RunStatus

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def run(target: str) -> RunRecord:
    return RunRecord(
        id=uuid.uuid4(), target=target, vantage="eu", started_at=NOW, status=RunStatus.COMPLETE
    )


class Stores:
    """A sink that stores by calling ``store`` (a test's), never away."""

    problem = None
    batches = False

    def __init__(self, store: Callable[[RunRecord], bool]) -> None:
        self.store = store

    def store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        return [self.store(record) for record in records]


def test_waiting_runs_are_stored_before_the_stored_ones_are_passed_on(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    storing, gate = threading.Event(), threading.Event()

    def deliver(record: RunRecord) -> bool:
        if record.target == "a":
            storing.set()
            assert gate.wait(10)
        events.append(("store", record.target))
        return True

    def after(record: RunRecord) -> None:
        events.append(("after", record.target))

    writer = Writer(Stores(deliver), Spool(tmp_path), after_store=after)
    writer.start()

    async def submit() -> None:
        await writer.submit(run("a"))
        assert await asyncio.to_thread(storing.wait, 10)  # "a" holds the writer meanwhile
        for target in ("b", "c", "b"):
            await writer.submit(run(target))

    asyncio.run(submit())
    gate.set()
    assert writer.close(10) == 0

    assert events == [
        ("store", "a"),
        ("store", "b"),
        ("store", "c"),
        ("after", "a"),  # b's second run: b's first is passed on before it is stored
        ("after", "b"),
        ("after", "c"),
        ("store", "b"),
        ("after", "b"),
    ]


def test_a_run_stored_alone_is_passed_on_before_the_writer_waits_again(tmp_path: Path) -> None:
    passed = threading.Event()
    writer = Writer(
        Stores(lambda _record: True), Spool(tmp_path), after_store=lambda _r: passed.set()
    )
    writer.start()
    asyncio.run(writer.submit(run("a")))
    assert passed.wait(10)  # no second run needed to push it on
    assert writer.close(10) == 0


def test_runs_wait_in_the_spool_while_the_sink_is_away_and_arrive_in_order(
    tmp_path: Path,
) -> None:
    sink, spool = MemorySink(), Spool(tmp_path)
    writer = Writer(sink, spool)
    first, second, third, refused = run("a"), run("b"), run("c"), run("d")
    sink.go_away("the server is away")
    assert writer.deliver(first) is False and writer.deliver(second) is False
    assert spool.pending() == 2 and sink.problem == "the server is away"
    sink.come_back()
    sink.refuse(refused.id, "not this vantage's")
    spool.append(refused)
    assert writer.deliver(third) is True  # behind the spooled ones, which go first
    assert list(sink.runs) == [first.id, second.id, third.id]
    assert sink.problem is None and not spool.has_pending()
    assert str(refused.id) in (tmp_path / "rejected.jsonl").read_text()  # set aside, kept
