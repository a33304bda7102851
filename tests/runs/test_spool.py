"""The spool's files on a real directory: journals owned by a live lock are left alone, a
failed write leaves nothing behind, and the backlog is counted on as the file grows.

Two ``Spool`` objects on one directory stand for two processes: each holds a lock file of
its own (``flock``s of different open files exclude each other within a process too).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from app.clock import utcnow
from app.runs import spool as spool_module
from app.runs import spoolbatch
from app.runs.diskio import append_durable
from app.runs.sink import SinkAway, Stored
from app.runs.spool import Spool, batches
from app.store.records import RunRecord, RunStatus


def journal(target: str = "api") -> RunRecord:
    return RunRecord(uuid.uuid4(), target, "here", utcnow(), RunStatus.ABORTED)


class TakeAll:
    """A batch form that takes every run (and keeps them in ``stored``)."""

    def __init__(self, stored: list[RunRecord]) -> None:
        self.stored = stored

    def __call__(self, records: Sequence[RunRecord]) -> list[Stored]:
        self.stored.extend(records)
        return [True] * len(records)


def test_a_live_owners_journal_is_never_adopted_and_a_dead_ones_is_adopted_once(
    tmp_path: Path,
) -> None:
    live, other = Spool(tmp_path), Spool(tmp_path)
    run = journal()
    assert live.begin(run)
    assert other.adopt_orphans() == []  # its owner still holds the lock

    live.close()  # as the process's end would, with the run still in flight
    assert [r.id for r in other.adopt_orphans()] == [run.id]
    assert other.adopt_orphans() == []  # now the adopter's own, not an orphan
    assert [p.name for p in (tmp_path / "inflight").glob("*.json")] == [
        f"{other.journal.owner}.{run.id}.json"
    ]
    other.end(run.id)
    other.close()
    assert list((tmp_path / "inflight").iterdir()) == []  # lock files go with their owners


def test_a_journal_of_the_layout_before_owners_is_adopted_as_a_leftover(tmp_path: Path) -> None:
    run = journal()
    (tmp_path / "inflight").mkdir(parents=True)
    (tmp_path / "inflight" / f"{run.id}.json").write_text(json.dumps(run.to_json()))
    assert [r.id for r in Spool(tmp_path).adopt_orphans()] == [run.id]


def test_appends_from_two_spools_on_one_directory_are_all_kept(tmp_path: Path) -> None:
    first, second = Spool(tmp_path), Spool(tmp_path)
    runs = [journal(f"t{n}") for n in range(6)]
    for n, run in enumerate(runs):
        (first if n % 2 else second).append(run)
    assert first.pending() == second.pending() == 6

    stored: list[RunRecord] = []
    assert first.flush(TakeAll(stored), 2, 1 << 20) == 6
    assert [r.id for r in stored] == [r.id for r in runs]
    assert second.pending() == 0 and not second.has_pending()


def test_a_failed_append_leaves_the_file_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl"
    append_durable(path, b"one\n")
    # A directory cannot be appended to: the failure comes before anything is written.
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    with pytest.raises(OSError):
        append_durable(blocked, b"two\n")
    assert path.read_bytes() == b"one\n"


def test_an_unwritable_spool_says_so_once_and_writes_nothing(tmp_path: Path) -> None:
    file_in_the_way = tmp_path / "spool"
    file_in_the_way.write_text("not a directory")
    spool = Spool(file_in_the_way / "below")  # mkdir fails: ENOTDIR
    assert spool.begin(journal()) is False  # the run goes on without a journal
    assert spool.problem is not None and spool.problem.startswith("unwritable:")
    assert spool.check() is not None
    assert spool.pending() == 0 and spool.adopt_orphans() == []


def test_the_backlog_is_counted_on_from_the_last_count(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    for _ in range(3):
        spool.append(journal())
    assert spool.pending() == 3
    spool.append(journal())
    assert spool.pending() == 4
    assert spool.flush(TakeAll([]), 50, 1 << 20) == 4
    assert spool.pending() == 0
    spool.append(journal())  # a new file: counted from its start
    assert spool.pending() == 1


@pytest.mark.parametrize(
    ("sizes", "runs", "size", "expected"),
    [
        ([], 3, 100, []),
        ([10, 10, 10, 10], 3, 100, [[10, 10, 10], [10]]),  # at most 3 lines
        ([40, 40, 40], 10, 100, [[40, 40], [40]]),  # at most 100 bytes
        ([150, 10, 10], 10, 100, [[150], [10, 10]]),  # a longer line alone
        ([10, 150], 10, 100, [[10], [150]]),
    ],
)
def test_batches_keep_the_order_within_their_bounds(
    sizes: list[int], runs: int, size: int, expected: list[list[int]]
) -> None:
    lines = [f"{k:02d}" + "x" * (n - 2) for k, n in enumerate(sizes)]
    assert [[len(line) for line in b] for b in batches(lines, runs, size)] == expected
    assert [line for b in batches(lines, runs, size) for line in b] == lines


def spooled(spool: Spool, count: int) -> list[RunRecord]:
    runs = [journal(f"t{k}") for k in range(count)]
    for record in runs:
        spool.append(record)
    return runs


def left(spool: Spool) -> list[str]:
    path = spool.path
    return (
        [json.loads(line)["target"] for line in path.read_text().splitlines()]
        if path.exists()
        else []
    )


def test_a_batched_flush_removes_only_the_runs_answered_for(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spooled(spool, 5)
    sent: list[list[str]] = []

    def push(records: Sequence[RunRecord]) -> list[Stored]:
        sent.append([record.target for record in records])
        return [True, "refused: not assigned", False][: len(records)] if len(sent) == 1 else [True]

    # The first batch of 3 is answered whole (one refused: set aside); the second answers
    # for one run of two, so the flush stops there and the last run stays spooled.
    assert spool.flush(push, 3, 1 << 20) == 4
    assert sent == [["t0", "t1", "t2"], ["t3", "t4"]]
    assert left(spool) == ["t4"]
    rejected = (tmp_path / "rejected.jsonl").read_text().splitlines()
    assert [json.loads(line)["target"] for line in rejected] == ["t1"]


def test_a_batched_flush_keeps_everything_from_the_batch_the_server_did_not_take(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path)
    spooled(spool, 4)
    calls = []

    def push(records: Sequence[RunRecord]) -> list[Stored]:
        calls.append(len(records))
        if len(calls) == 2:
            raise SinkAway("the server went away")
        return [True] * len(records)

    flushed = spool.flush(push, 2, 1 << 20)
    assert (flushed, calls) == (2, [2, 2])
    assert left(spool) == ["t2", "t3"]
    assert spool.flush(TakeAll([]), 2, 99) == 2
    assert left(spool) == [] and not spool.has_pending()


def test_a_spooled_line_that_is_not_a_run_is_set_aside_and_the_flush_goes_on(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path)
    first, second = journal("t0"), journal("t1")
    spool.append(first)
    append_durable(spool.path, b'{"not": "a run"}\n')
    spool.append(second)
    stored: list[RunRecord] = []
    assert spool.flush(TakeAll(stored), 50, 1 << 20) == 3
    assert [r.id for r in stored] == [first.id, second.id]
    assert (tmp_path / "rejected.jsonl").read_text() == '{"not": "a run"}\n'
    assert not spool.has_pending()


def test_a_flush_tried_while_the_sink_is_away_reads_one_block_not_the_whole_spool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = Spool(tmp_path)
    runs = spooled(spool, 40)
    monkeypatch.setattr(spool_module, "READ_BLOCK", 4 * len(spool.path.read_text()) // 40)
    reads: list[int] = []

    def lines_at(path: Path, offset: int, limit: int) -> tuple[list[str], int]:
        reads.append(offset)
        return spoolbatch.lines_at(path, offset, limit)

    monkeypatch.setattr(spool_module, "lines_at", lines_at)

    def away(records: Sequence[RunRecord]) -> list[Stored]:
        raise SinkAway("the database is away")

    assert spool.flush(away, 2, 1 << 20) == 0
    assert reads == [0]  # one block of about four runs, not the forty
    assert left(spool) == [r.target for r in runs]
    reads.clear()
    stored: list[RunRecord] = []
    assert spool.flush(TakeAll(stored), 3, 1 << 20) == 40  # back: block after block, in order
    assert [r.id for r in stored] == [r.id for r in runs] and len(reads) >= 10
    assert not spool.has_pending()


def test_a_spooled_line_of_bytes_that_are_not_text_is_set_aside(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    first = journal("t0")
    spool.append(first)
    append_durable(spool.path, b'{"target": "\xff\xfe"}\n')
    stored: list[RunRecord] = []
    assert spool.flush(TakeAll(stored), 50, 1 << 20) == 2
    assert [r.id for r in stored] == [first.id] and not spool.has_pending()
    assert (tmp_path / "rejected.jsonl").exists()
