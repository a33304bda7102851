"""Lists of values padded so that few statement texts ever reach the database.

SQLAlchemy writes an ``IN`` list as one parameter per value, and a many-row ``INSERT ...
RETURNING`` as one ``VALUES`` tuple per row, so each length is a statement of its own.
SQLite's driver keeps the last 128 statements it prepared on each connection, and a
statement's size grows with its parameters (one of 500 is a hundred times one of 1;
bench/README.md, "Soak"): the runs of a window, the runs a rollup counts, each a new
length, filled every connection's cache with large statements, evicted and prepared again
as new lengths came, and serve's memory rose with them (issue 36). Padded to the next power
of two, the last value repeated, a query has a dozen lengths at most, prepared once.
Repeating is harmless where this is used: ``IN`` matches a row once however often its value
is listed, and a repeated row of an ``INSERT ... ON CONFLICT DO NOTHING`` conflicts with its
first copy and is skipped (nor returned). PostgreSQL parses each statement anew; there it
costs a few repeated parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def padded(values: Sequence[T]) -> list[T]:
    """``values``, the last one repeated up to the next power of two in length."""
    found = list(values)
    if not found:
        return found
    size = 1 << (len(found) - 1).bit_length()
    return found + [found[-1]] * (size - len(found))
