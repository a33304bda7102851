"""The backlog behind a spool that cannot be written: runs wait in memory in order, only
those beyond its limit are lost (counted, told once), and they all drain, oldest first,
when the sink is back. A spool that cannot be written has a file where its folder would
be here (every append fails, as on a full disk); the tmpfs of a real full disk is
``tests/faults/test_spool_recovers.py``."""

from __future__ import annotations

import json
import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from app.runs.backlog import Backlog, Placed
from app.runs.diskio import append_durable, rewrite_in_place
from app.runs.memsink import MemorySink
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.store.records import RunRecord, RunStatus

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def run(target: str = "api") -> RunRecord:
    return RunRecord(
        id=uuid.uuid4(), target=target, vantage="eu", started_at=NOW, status=RunStatus.COMPLETE
    )


def line(record: RunRecord) -> str:
    return json.dumps(record.to_json(), separators=(",", ":")) + "\n"


def blocked(spool: Spool) -> None:
    """Every append to the spool fails from now on, until ``unblocked``."""
    spool.directory.write_bytes(b"in the spool's way\n")


def unblocked(spool: Spool) -> None:
    spool.directory.unlink()


def test_runs_the_spool_cannot_take_wait_in_memory_and_only_those_beyond_it_are_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = Spool(tmp_path / "spool")
    blocked(spool)
    backlog = Backlog(spool, limit=2)
    runs = [run() for _ in range(5)]
    placed = [backlog.place(record) for record in runs]
    assert placed == [Placed.HELD, Placed.HELD, Placed.LOST, Placed.LOST, Placed.LOST]
    assert spool.losses.total == 3 and spool.losses.ongoing is not None
    assert caplog.text.count("runs are being lost") == 1  # once, not once a run

    sink = MemorySink()
    assert backlog.flush_held(sink.store_batch, 50) == 2
    assert list(sink.runs) == [r.id for r in runs[:2]]
    assert backlog.place(run()) == Placed.HELD  # room again: the episode ends, with its number
    assert "3 run(s) lost since" in caplog.text and spool.losses.ongoing is None


def test_held_runs_move_to_the_spool_before_a_new_run_once_it_takes_them_again(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "spool")
    blocked(spool)
    backlog = Backlog(spool)
    first, second, third = run("a"), run("b"), run("c")
    assert [backlog.place(first), backlog.place(second)] == [Placed.HELD, Placed.HELD]
    unblocked(spool)
    assert backlog.place(third) == Placed.SPOOLED
    assert spool.path.read_text() == line(first) + line(second) + line(third)
    assert backlog.held() == 0


def test_a_writer_whose_sink_and_spool_both_fail_stores_every_held_run_in_order_once_back(
    tmp_path: Path,
) -> None:
    sink, spool = MemorySink(), Spool(tmp_path / "spool")
    writer = Writer(sink, spool)
    sink.go_away("the database is away")
    blocked(spool)
    waiting = [run(f"t{n}") for n in range(4)]
    assert not any(writer.deliver(record) for record in waiting)
    assert writer.waiting() and spool.losses.total == 0

    sink.come_back()
    latest = run("latest")
    assert writer.deliver(latest) is True  # the backlog drained first, then this one
    assert list(sink.runs) == [r.id for r in [*waiting, latest]]
    assert not writer.waiting()


def test_a_refused_run_that_cannot_be_set_aside_is_counted_and_the_flush_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool, sink = Spool(tmp_path), MemorySink()
    first, refused, last = run(), run(), run()
    for record in (first, refused, last):
        spool.append(record)
    sink.refuse(refused.id, "not valid")
    (tmp_path / "rejected.jsonl").mkdir()  # it cannot be written
    with caplog.at_level(logging.ERROR):
        assert spool.flush(sink.store_batch, 50, 1 << 20) == 3
    assert list(sink.runs) == [first.id, last.id]
    assert not spool.has_pending()  # nothing left to push again
    assert spool.losses.total == 1
    assert "1 run(s) lost: refused for good and not set aside" in caplog.text


def test_a_torn_last_line_is_never_read_and_is_cut_before_the_next_append(
    tmp_path: Path,
) -> None:
    spool, sink = Spool(tmp_path), MemorySink()
    whole, after = run(), run()
    spool.append(whole)
    with spool.path.open("a") as file:
        file.write(line(run())[:40])  # a crash part-way through a write
    assert spool.pending() == 1
    spool.append(after)
    assert spool.path.read_text() == line(whole) + line(after)
    assert spool.flush(sink.store_batch, 50, 1 << 20) == 2


@pytest.mark.parametrize(
    ("before", "torn"),
    [(b"", 0), (b"a\n", 0), (b"a\nb", 1), (b"abc", 3), (b"a\n" + b"x" * 5000, 5000)],
)
def test_append_durable_cuts_only_a_torn_last_line(
    tmp_path: Path, before: bytes, torn: int
) -> None:
    path = tmp_path / "lines"
    path.write_bytes(before)
    assert append_durable(path, b"new\n") == torn
    assert path.read_bytes() == before[: len(before) - torn] + b"new\n"


def test_rewrite_in_place_keeps_the_file_and_only_shortens_it(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b"one\ntwo\nthree\n")
    inode = path.stat().st_ino
    rewrite_in_place(path, b"three\n")
    assert (path.read_bytes(), path.stat().st_ino) == (b"three\n", inode)
    with pytest.raises(ValueError):
        rewrite_in_place(path, b"longer than it is\n")
