"""The spool's files on a real directory: journals owned by a live lock are left alone, a
failed write leaves nothing behind, and the backlog is counted on as the file grows.

Two ``Spool`` objects on one directory stand for two processes: each holds a lock file of
its own (``flock``s of different open files exclude each other within a process too).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from app.clock import utcnow
from app.store.diskio import append_durable
from app.store.records import RunRecord, RunStatus
from app.store.spool import Spool


def journal(target: str = "api") -> RunRecord:
    return RunRecord(uuid.uuid4(), target, "here", utcnow(), RunStatus.ABORTED)


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
    assert first.flush(stored.append, lambda _: False) == 6
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
    assert spool.flush(lambda _: None, lambda _: False) == 4
    assert spool.pending() == 0
    spool.append(journal())  # a new file: counted from its start
    assert spool.pending() == 1
