"""``csv.reader``'s rows, read faster: a line without a quote or any other character the
CSV dialect treats specially is ``str.split`` at its commas, which gives the very list
the reader would, at less than half its cost (bench/README.md's backtest section); any
other line is read by ``csv.reader`` itself (with the lines after it, if a quoted cell
spans lines), so quoting, errors and limits are the module's own.
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterator
from typing import TextIO


def csv_rows(text: TextIO) -> Iterator[list[str]]:
    """The rows ``csv.reader(text)`` yields (its default dialect), the same lists."""
    lines = iter(text)
    limit = csv.field_size_limit()
    for line in lines:
        plain = line[:-2] if line.endswith("\r\n") else line[:-1] if line[-1:] in "\r\n" else line
        if '"' in plain or "\r" in plain or "\n" in plain or "\0" in plain or len(plain) > limit:
            yield from _by_reader(line, lines)
        elif plain:
            yield plain.split(",")
        else:
            yield []


def _by_reader(line: str, lines: Iterator[str]) -> Iterator[list[str]]:
    """The one row that starts with ``line``, read by ``csv.reader`` (which takes from
    ``lines`` as many more as a quoted cell spans, and never more)."""
    for row in csv.reader(itertools.chain((line,), lines)):
        yield row
        return
