"""A series' older runs kept packed (``MemoryHistory`` with ``Retention.pack_after``: the
backtest's), and built again as a ``RunData`` when a window reaches them.

A kept ``RunData`` costs some 2 KB beyond its numbers (the object, its arrays' headers and
allocations, its memo dict), and a fleet's backtest keeps a week of every series, ~176,000
runs (bench/README.md). Packed, a run is its numbers in a shared block of floats (its phase
matrix, its totals, then its memos: medians, log levels, ratios, ``total_median``) and a
``_Shape`` that most runs of a series share (phase names, counts, the memos' keys and
lengths). ``run`` builds it again: the same numbers and memos, a new object each time
(its arrays views of the block). A run that does not pack (readings, a memo that is no
float or 1-D float array) is kept as it is. ``PackedCounts``: a series' run counts alike.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Hashable
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from app.analysis.runs import Array, RunCount, RunData

BLOCK = 4096  # floats a block holds (a run larger than that gets a block of its own)
# A run's matrix and its totals start on a multiple of this many floats from a block's start:
# 16 bytes, as malloc aligns an array of their own (numpy's loops see the same alignment).
ALIGN = 2


@dataclass(frozen=True, slots=True)
class _Shape:
    """What a packed run's numbers are: most runs of a series share one (interned)."""

    names: tuple[str, ...]
    timed: int
    censored: int
    failed: int
    samples: int
    memos: tuple[tuple[Hashable, int], ...]  # each memo's key and length; -1: a float


class PackedRuns:
    """Runs in order (``append`` the next; ``drop`` the oldest), packed."""

    def __init__(self) -> None:
        self._blocks: list[Array] = []
        self._dropped = 0  # blocks dropped from the front
        self._used = BLOCK  # floats used of the last block
        self._where = array("q")  # per run: its block (counting dropped ones) and offset
        self._shapes: list[_Shape | None] = []  # None: kept as it is, in ``_others``
        self._others: dict[int, RunData] = {}  # by position (counting dropped runs)
        self._first = 0  # runs dropped
        self._interned: dict[_Shape, _Shape] = {}

    def __len__(self) -> int:
        return len(self._shapes)

    def append(self, run: RunData) -> None:
        packed = _parts(run)
        if packed is None:
            self._others[self._first + len(self._shapes)] = run
            self._shapes.append(None)
            self._where.extend((0, 0))
            return
        shape, memos = packed
        matrix = run.phases.ravel()
        size = _padded(len(matrix)) + _padded(run.timed) + sum(map(len, memos))
        block, offset = self._room(size)
        block[offset : offset + len(matrix)] = matrix
        offset += _padded(len(matrix))
        block[offset : offset + run.timed] = run.totals
        offset += _padded(run.timed)
        for memo in memos:
            block[offset : offset + len(memo)] = memo
            offset += len(memo)
        self._shapes.append(self._interned.setdefault(shape, shape))

    def run(self, index: int, key: tuple[datetime, str], target: str, vantage: str) -> RunData:
        """The ``index``-th run kept (0: the oldest), built again; ``key`` its (at, run_id)."""
        shape = self._shapes[index]
        if shape is None:
            return self._others[self._first + index]
        block = self._blocks[self._where[2 * index] - self._dropped]
        offset, timed, width = self._where[2 * index + 1], shape.timed, len(shape.names)
        phases = block[offset : offset + timed * width].reshape(timed, width)
        offset += _padded(timed * width)
        totals = block[offset : offset + timed]
        offset += _padded(timed)
        at, run_id = key
        run = RunData(
            run_id, target, vantage, at, shape.names, phases, totals,
            shape.censored, shape.failed, shape.samples,
        )  # fmt: skip
        for memo, length in shape.memos:
            if length < 0:
                run.remember(memo, float(block[offset]))
                offset += 1
            else:
                run.remember(memo, block[offset : offset + length])
                offset += length
        return run

    def drop(self, count: int) -> None:
        """Forget the oldest ``count`` runs, and the blocks only they used."""
        for position in range(self._first, self._first + count):
            self._others.pop(position, None)
        del self._shapes[:count], self._where[: 2 * count]
        self._first += count
        keep_from = self._where[0] if self._shapes else self._dropped + len(self._blocks)
        if keep_from > self._dropped:
            del self._blocks[: keep_from - self._dropped]
            self._dropped = keep_from
            if not self._blocks:
                self._used = BLOCK

    def _room(self, size: int) -> tuple[Array, int]:
        if not self._blocks or self._used + size > len(self._blocks[-1]):
            self._blocks.append(np.empty(max(BLOCK, size)))
            self._used = 0
        offset = self._used
        self._used = offset + _padded(size)
        self._where.extend((self._dropped + len(self._blocks) - 1, offset))
        return self._blocks[-1], offset


def _padded(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def _parts(run: RunData) -> tuple[_Shape, list[Array]] | None:
    """The run's shape and its memos' numbers in packing order; None if it does not pack."""
    if run.readings or not _floats(run.phases, 2) or not _floats(run.totals, 1):
        return None
    keys: list[tuple[Hashable, int]] = []
    parts: list[Array] = []
    for key, value in run.memos():
        if type(value) is float:
            keys.append((key, -1))
            parts.append(np.array([value]))
        elif isinstance(value, np.ndarray) and _floats(value, 1):
            keys.append((key, len(value)))
            parts.append(value)
        else:
            return None
    counts = (run.timed, run.censored, run.failed, run.samples)
    return _Shape(run.phase_names, *counts, tuple(keys)), parts


def _floats(values: Array, ndim: int) -> bool:
    return values.dtype == np.float64 and values.ndim == ndim and values.flags.c_contiguous


class PackedCounts:
    """A series' ``RunCount``s in their order, as a list of times and an array of their
    numbers (a tuple each was ~90 bytes, and a series keeps a month of them)."""

    def __init__(self) -> None:
        self.ats: list[datetime] = []
        self._numbers = array("q")  # timed, censored, samples of each

    def __len__(self) -> int:
        return len(self.ats)

    def add(self, count: RunCount) -> None:
        if not self.ats or count >= self.between(len(self.ats) - 1, len(self.ats))[0]:
            self.ats.append(count.at)
            self._numbers.extend(count[1:])
            return
        counts = self.between(0, len(self.ats))  # a late one: rare, so a plain insertion
        bisect.insort(counts, count)
        self.drop(len(self.ats))
        for each in counts:
            self.add(each)

    def between(self, first: int, stop: int) -> list[RunCount]:
        numbers = self._numbers
        return [
            RunCount(self.ats[i], numbers[3 * i], numbers[3 * i + 1], numbers[3 * i + 2])
            for i in range(first, stop)
        ]

    def drop(self, count: int) -> None:
        del self.ats[:count], self._numbers[: 3 * count]
