"""A CSV row given twice is one sample stored twice: `phasewatch import` refuses the file,
names both lines, and stores nothing from it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from app.csvio.importer import import_samples
from app.csvio.layout import CsvImportError, CsvProblem
from app.store.models import RunRow, SampleRow
from tests.faults.limited import run_limited

RUN = "9f1c4e2a-0000-4000-8000-000000000001"
OTHER = "9f1c4e2a-0000-4000-8000-000000000002"
HEADER = "timestamp,target,vantage,run_id,status,total_ms,queue_ms,generation_ms\n"
FIRST = f"2024-05-01T12:00:00.000000Z,chat,eu,{RUN},ok,10.5,1.5,\n"
SECOND = f"2024-05-01T12:00:01.000000Z,chat,eu,{RUN},ok,11.0,1.0,9.0\n"


def stored(engine: Engine) -> tuple[int, int]:
    with engine.connect() as connection:
        runs = connection.scalar(select(func.count()).select_from(RunRow))
        samples = connection.scalar(select(func.count()).select_from(SampleRow))
    return int(runs or 0), int(samples or 0)


@pytest.mark.process
def test_import_refuses_a_repeated_row_naming_both_lines_and_stores_nothing(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    path = tmp_path / "samples.csv"
    path.write_text(HEADER + FIRST + SECOND + FIRST)
    done = run_limited(["import", str(path), "--database-url", db_url], tmp_path)
    assert (done.code, done.out) == (1, ""), done.err
    assert done.err.splitlines() == [
        f"{path}:4: repeats line 2: the same sample (run_id and every cell) twice",
        f"phasewatch: error: nothing imported: 1 problem in {path}",
    ]
    assert stored(engine) == (0, 0)


def parse(text: str) -> list[CsvProblem]:
    # Refused before anything is stored: no database is needed to see the problems.
    with pytest.raises(CsvImportError) as caught:
        import_samples(None, io.StringIO(text))  # type: ignore[arg-type]
    return caught.value.problems


def test_the_same_cells_written_differently_are_still_a_repeat() -> None:
    again = FIRST.replace("12:00:00.000000Z", "14:00:00+02:00").replace("10.5", "10.50")
    assert parse(HEADER + FIRST + SECOND + again) == [
        CsvProblem(4, None, "repeats line 2: the same sample (run_id and every cell) twice")
    ]


def test_every_repeat_names_the_first_line_it_repeats() -> None:
    found = parse(HEADER + FIRST + FIRST + SECOND + FIRST + SECOND)
    assert [(p.line, p.reason.split(":")[0]) for p in found] == [
        (3, "repeats line 2"),
        (5, "repeats line 2"),
        (6, "repeats line 4"),
    ]


@pytest.mark.process
@pytest.mark.parametrize(
    "other",
    [
        FIRST.replace(RUN, OTHER),  # another run
        FIRST.replace("10.5", "10.6"),  # another total
        FIRST.replace("1.5,", "1.5,0.0"),  # a phase present, even at zero
        FIRST.replace(",ok,", ",error,"),
    ],
    ids=["run_id", "total", "phase", "status"],
)
def test_rows_that_differ_in_any_cell_are_two_samples(
    tmp_path: Path, db_url: str, engine: Engine, other: str
) -> None:
    path = tmp_path / "samples.csv"
    path.write_text(HEADER + FIRST + other)
    done = run_limited(["import", str(path), "--database-url", db_url], tmp_path)
    assert done.code == 0, done.err
    assert stored(engine)[1] == 2
