"""The private parts of prometheus-client that /metrics uses, reached from this module alone.

A stored run of 20 samples is ~120 histogram observations (its requests' times, twice, and
each phase's), and ``Histogram.observe`` takes two locks and walks the buckets in Python
for each: a share of a pushed run's CPU in ``serve`` (bench/README.md, "Pushes: a run's
observations and seeks"). ``observe_many`` counts a run's values into their buckets first,
then adds each bucket's count and the values' sum once. It reads a histogram child's
bounds, buckets and sum, private in prometheus-client; a version without them is observed
one value at a time. tests/runtime/test_promcompat.py fails when the installed version no
longer takes the counted road, or when it gives other numbers than ``observe``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from prometheus_client import Histogram

_PARTS = ("_upper_bounds", "_buckets", "_sum")


def counted(child: Histogram) -> bool:
    """Whether ``observe_many`` can count into ``child``'s buckets (its version's parts)."""
    return all(hasattr(child, part) for part in _PARTS)


def observe_many(child: Histogram, values: Sequence[float]) -> None:
    """``child.observe(value)`` for each of ``values``: the same bucket counts, the same
    count, and their sum (added once, so equal up to rounding)."""
    if not values:
        return
    if not counted(child):
        for value in values:
            child.observe(value)
        return
    parts: Any = child  # the private parts, as _PARTS names them
    bounds: Sequence[float] = parts._upper_bounds  # noqa: SLF001
    found: dict[int, int] = {}
    for value in values:
        at = bisect_left(bounds, value)  # observe's bucket: the first bound >= value
        if at < len(bounds) and value <= bounds[at]:  # NaN: in no bucket, as observe does
            found[at] = found.get(at, 0) + 1
    parts._sum.inc(sum(values))  # noqa: SLF001
    for at, count in found.items():
        parts._buckets[at].inc(count)  # noqa: SLF001
