"""Rows in time order, whatever order a file has them in, within bounded memory.

``phasewatch export`` writes samples in time order, and the backtest reads them so, a run
at a time, in memory flat however long the file. Files from other tools are often grouped
by target, or by run: ``time_ordered`` checks the order in one streaming pass and, only
when it is not time order, sorts a copy on disk: chunks of ``CHUNK_ROWS`` rows sorted in
memory, written to a temporary folder, then merged (``heapq.merge``). Rows of equal time
keep their order in the file (the sort is stable), so a run's samples stay in their order.
A row whose time cannot be read sorts first and is left for the reader to name.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from app.clock import parse_timestamp
from app.csvio.rows import csv_rows

CHUNK_ROWS = 200_000
TIME_COLUMN = "timestamp"
_UNREADABLE = float("-inf")
_FORM_LENGTH = len("2024-05-01T12:00:00.000000Z")
Keyed = tuple[float, int, list[str]]


def time_ordered(
    path: Path, folder: Path, slack_s: float = 0.0, chunk_rows: int = CHUNK_ROWS
) -> tuple[Path, int]:
    """``path`` if its rows are in time order give or take ``slack_s`` (what its reader takes:
    runs of several series interleave), else a sorted copy in ``folder``; and how many rows
    were out of order (0: the file itself is returned)."""
    out_of_order = _count_out_of_order(path, slack_s)
    if out_of_order == 0:
        return path, 0
    return _sorted_copy(path, folder, chunk_rows), out_of_order


def _time_of(row: list[str], column: int) -> float:
    try:
        text = row[column]
        if len(text) == _FORM_LENGTH and text[-1] == "Z":
            # The export's form, UTC already: ``parse_timestamp``'s checks and conversion
            # add nothing to it, and this pass reads every row of a file before the replay.
            return datetime.fromisoformat(text).timestamp()
        return parse_timestamp(text).timestamp()
    except (ValueError, IndexError):
        return _UNREADABLE


def _header(path: Path) -> tuple[list[str], int] | None:
    with path.open(newline="") as rows:
        header = next(csv_rows(rows), None)
    if header is None or TIME_COLUMN not in header:
        return None  # nothing to order by: the reader says what is wrong with the file
    return header, header.index(TIME_COLUMN)


def _count_out_of_order(path: Path, slack_s: float) -> int:
    found = _header(path)
    if found is None:
        return 0
    _, column = found
    latest, count = _UNREADABLE, 0
    with path.open(newline="") as rows:
        reader = csv_rows(rows)
        next(reader)
        for row in reader:
            at = _time_of(row, column)
            if at < latest - slack_s:
                count += 1
            latest = max(latest, at)
    return count


def _sorted_copy(path: Path, folder: Path, chunk_rows: int) -> Path:
    header, column = _header(path) or ([], 0)
    chunks = _write_chunks(path, folder, column, chunk_rows)
    target = folder / f"{path.stem}.sorted.csv"
    with target.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(header)
        merged = heapq.merge(*(_read_chunk(chunk) for chunk in chunks))
        writer.writerows(row for _, _, row in merged)
    for chunk in chunks:
        chunk.unlink()
    return target


def _write_chunks(path: Path, folder: Path, column: int, chunk_rows: int) -> list[Path]:
    chunks: list[Path] = []
    with path.open(newline="") as rows:
        reader = csv_rows(rows)
        next(reader)
        buffer: list[Keyed] = []
        for line, row in enumerate(reader):
            buffer.append((_time_of(row, column), line, row))
            if len(buffer) == chunk_rows:
                chunks.append(_write_chunk(folder, len(chunks), buffer))
                buffer = []
        if buffer:
            chunks.append(_write_chunk(folder, len(chunks), buffer))
    return chunks


def _write_chunk(folder: Path, index: int, buffer: list[Keyed]) -> Path:
    buffer.sort(key=lambda keyed: (keyed[0], keyed[1]))
    chunk = folder / f"chunk-{index:05d}.csv"
    with chunk.open("w", newline="") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerows([repr(at), line, *row] for at, line, row in buffer)
    return chunk


def _read_chunk(chunk: Path) -> Iterator[Keyed]:
    with chunk.open(newline="") as rows:
        for at, line, *row in csv.reader(rows):
            yield float(at), int(line), row


def describe(out_of_order: int, copy: Path) -> str:
    """The note a command prints when it sorted a copy."""
    return (
        f"{out_of_order:,} rows were not in time order: read from a copy sorted by time"
        f" ({copy}, removed afterwards)"
    )
