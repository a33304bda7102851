"""``csv_rows`` gives exactly ``csv.reader``'s rows, on plain lines and on every line
that sends it to the reader itself."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from app.csvio.rows import csv_rows

CASES = {
    "plain, CRLF": "a,b,c\r\n1,2,3\r\n",
    "plain, LF, no final newline": "a,b,c\n1,2,3",
    "old Mac CR endings": "a,b\r1,2\r",
    "blank lines": "a,b\r\n\r\n\n1,2\n",
    "empty cells": ",\n,,x,\n",
    "spaces kept": " a , b \n",
    "quoted cell with a comma": 'a,"b,c",d\n1,2,3\n',
    "quoted cell spanning lines": 'a,"b\r\nc",d\n1,2,3\n',
    "doubled quotes": 'a,"say ""hi""",c\n',
    "a quote inside an unquoted cell": 'a,b"c,d\n',
    "a lone CR inside a line": "a,b\rc\n1,2\n",
    "NUL": "a,\0b\n",
    "only a newline": "\n",
    "empty": "",
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
@pytest.mark.parametrize("newline", ["", None])
def test_rows_are_csv_readers_rows(text: str, newline: str | None) -> None:
    expected = list(csv.reader(io.StringIO(text, newline=newline)))
    assert list(csv_rows(io.StringIO(text, newline=newline))) == expected


def test_a_file_opened_without_newline_translation_reads_alike(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    path.write_bytes(b'a,b\r\n"x\r\ny",z\rq,"w"\n1,2')
    with path.open(newline="") as one, path.open(newline="") as other:
        assert list(csv_rows(one)) == list(csv.reader(other))


def test_a_cell_over_the_field_limit_is_the_readers_error() -> None:
    text = "a," + "x" * (csv.field_size_limit() + 1) + "\n"
    with pytest.raises(csv.Error) as ours:
        list(csv_rows(io.StringIO(text)))
    with pytest.raises(csv.Error) as theirs:
        list(csv.reader(io.StringIO(text)))
    assert str(ours.value) == str(theirs.value)
