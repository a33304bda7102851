"""Rows in time order whatever order the file has them in: checked in one pass, sorted on
disk in chunks when needed (stable for equal times); the backtest reads such a file as it
reads an export."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from app.csvio.ordering import time_ordered
from tests.backtestcorpus import corpus
from tests.clirun import run_cli

HEADER = "timestamp,target,vantage,run_id,status,total_ms\n"


def rows_of(path: Path) -> list[str]:
    return path.read_text().splitlines()[1:]


@pytest.mark.parametrize(
    ("lines", "expected", "out_of_order"),
    [
        (["2026-01-01T00:00:01Z,a", "2026-01-01T00:00:02Z,b"], None, 0),
        (
            ["2026-01-01T00:00:03Z,a", "2026-01-01T00:00:01Z,b", "2026-01-01T00:00:02Z,c"],
            ["2026-01-01T00:00:01Z,b", "2026-01-01T00:00:02Z,c", "2026-01-01T00:00:03Z,a"],
            2,
        ),
        # Equal times keep the file's order (a run's samples stay in their order).
        (
            ["2026-01-01T00:00:02Z,x", "2026-01-01T00:00:01Z,b", "2026-01-01T00:00:01Z,a",
             "2026-01-01T00:00:01Z,c"],
            ["2026-01-01T00:00:01Z,b", "2026-01-01T00:00:01Z,a", "2026-01-01T00:00:01Z,c",
             "2026-01-01T00:00:02Z,x"],
            3,
        ),
        # Another offset is the same instant: ordered by time, not by text.
        (
            ["2026-01-01T09:00:00+09:00,b", "2026-01-01T00:00:01Z,a"],
            None,
            0,
        ),
        # A time that cannot be read sorts first, for the reader to name with its line.
        (
            ["2026-01-01T00:00:01Z,a", "yesterday,b"],
            ["yesterday,b", "2026-01-01T00:00:01Z,a"],
            1,
        ),
    ],
    ids=["ordered", "shuffled", "stable", "offsets", "unreadable"],
)  # fmt: skip
def test_a_file_out_of_time_order_is_read_from_a_sorted_copy(
    tmp_path: Path, lines: list[str], expected: list[str] | None, out_of_order: int
) -> None:
    given = tmp_path / "in.csv"
    given.write_text("timestamp,what\n" + "".join(f"{line}\n" for line in lines))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    ordered, count = time_ordered(given, scratch, 0.0, chunk_rows=2)  # several chunks merged
    assert count == out_of_order
    if expected is None:
        assert ordered == given
    else:
        assert ordered != given and rows_of(ordered) == expected
        assert [p.name for p in scratch.iterdir()] == [ordered.name]  # chunks removed


def test_rows_behind_by_less_than_the_slack_are_time_order_enough(tmp_path: Path) -> None:
    given = tmp_path / "in.csv"
    given.write_text("timestamp\n2026-01-01T00:00:10Z\n2026-01-01T00:00:05Z\n")
    assert time_ordered(given, tmp_path, 5.0) == (given, 0)
    assert time_ordered(given, tmp_path, 4.9)[1] == 1


def test_the_backtest_of_a_file_grouped_by_target_makes_the_same_transitions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = corpus(days=4)
    exported = tmp_path / "exported.csv"
    exported.write_text(text)
    header, *rows = list(csv.reader(io.StringIO(text)))
    grouped = tmp_path / "grouped.csv"
    with grouped.open("w", newline="") as out:  # as other tools write: by target, vantage
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(sorted(rows, key=lambda row: (row[1], row[2])))

    def moved(path: Path) -> tuple[list[dict[str, object]], str]:
        code, out, err = run_cli(["backtest", str(path), "--format", "jsonl"], capsys)
        assert code == 0, err
        found = [json.loads(line) for line in out.splitlines()]
        # What moved, when and where; not the numbers: a target's random numbers (its
        # bootstrap's) are drawn in the order its simultaneous runs come.
        keys = ("at", "alert", "target", "vantage", "state", "severity", "from_phase", "to_phase")
        return [{k: t[k] for k in keys} for t in found], err

    want, quiet = moved(exported)
    got, noted = moved(grouped)
    # Runs that start at the same instant come in the order the file names them: the same
    # transitions, those of simultaneous runs perhaps in another order.
    assert want and sorted(got, key=json.dumps) == sorted(want, key=json.dumps)
    assert "not in time order" not in quiet
    assert "rows were not in time order: read from a copy sorted by time" in noted
