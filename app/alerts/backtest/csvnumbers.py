"""A run's number cells, as the backtest's reader (app/alerts/backtest/csvruns.py) keeps them,
read as numpy would read them, but faster: through JSON's parser where every cell is a JSON
number, as the export writes them."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Sequence

import numpy as np
import orjson

from app.analysis.runs import Array, phase_order


def run_numbers(
    timed: Sequence[str | list[str]], phases: list[str]
) -> tuple[tuple[str, ...], Array, Array]:
    """The phases present (a cell in any timed row), their matrix, and the totals, from
    each timed row's total and phase cells (joined by commas, or a list when a cell holds
    one); a ValueError says what is wrong with them."""
    text = ",".join(row if type(row) is str else "," for row in timed)
    present = list(range(len(phases)))
    cells: list[str] = []
    if not _JSON_CELLS.fullmatch(text):  # not all JSON-like, or a cell empty: cell by cell
        cells = list(itertools.chain.from_iterable(map(_cells, timed)))
        if "" in cells:  # a phase some sample lacks: 0 there, and absent if no sample has it
            rows = [cells[i : i + 1 + len(phases)] for i in range(0, len(cells), 1 + len(phases))]
            if any(not row[0] for row in rows):
                raise ValueError("a timed sample has no total")
            present = [i for i in present if any(row[1 + i] for row in rows)]
            cells = [cell or "0" for cell in cells]
        text = ""
    values = (_json_floats(text) if text else _floats(cells)).reshape(len(timed), 1 + len(phases))
    names, columns = _columns(tuple(phases), tuple(present) if timed else ())
    # Arrays of their own, each compact: a column pick is a transposed view of a copy, and
    # a backtest keeps a week of runs of every series (the same numbers either way).
    return names, np.ascontiguousarray(values[:, columns]), values[:, 0].copy()


def _floats(cells: list[str]) -> Array:
    """``np.array(cells, dtype=np.float64)``, the same numbers: through JSON's parser when
    every cell is a JSON number (as the export writes them; several times faster than
    numpy's conversion of strings), else numpy's own (``nan``, ``.5``, errors)."""
    text = ",".join(cells)
    if _JSON_NUMBERS.fullmatch(text):
        try:
            parsed = orjson.loads(f"[{text}]")
        except orjson.JSONDecodeError:
            parsed = None
        if parsed is not None and len(parsed) == len(cells):  # no cell held a comma
            return np.array(parsed, dtype=np.float64)
    return np.array(cells, dtype=np.float64)


_JSON_NUMBERS = re.compile(r"[-+.0-9eE,]*")
# Cells of JSON's characters, none empty, one comma between each two (a row whose cell held
# a comma is a lone comma in the text: no match).
_JSON_CELLS = re.compile(r"[-+.0-9eE]+(?:,[-+.0-9eE]+)*")


def _json_floats(text: str) -> Array:
    """``_floats`` of ``text``'s cells (``_JSON_CELLS``: none holds a comma)."""
    try:
        parsed = orjson.loads(f"[{text}]")
    except orjson.JSONDecodeError:
        return np.array(text.split(","), dtype=np.float64)
    return np.array(parsed, dtype=np.float64)


def _cells(row: str | list[str]) -> list[str]:
    return row.split(",") if isinstance(row, str) else row


@functools.lru_cache(maxsize=64)
def _columns(
    phases: tuple[str, ...], present: tuple[int, ...]
) -> tuple[tuple[str, ...], list[int]]:
    """The present phases in their order, and their columns among the numbers."""
    names = phase_order(phases[i] for i in present)
    return names, [1 + phases.index(name) for name in names]
