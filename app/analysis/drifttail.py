"""A tail's kept days as a CUSUM against the fixed baseline (``baseline_drift``'s third
reading of a tail, after a day's value and the mean of the newest 2…7 days).

A tail's daily value (the log of its share over the baseline's p95, against the
baseline's share) strays by counting noise, independent from day to day, around an offset
of its own: the baseline's p95 at each hour is itself read from a week's samples, and
every later day is scored against the same error. On the detection corpus's fleet (10
samples a run) that offset is 0.06 in log from tail to tail, the day's counting noise
0.14 (bench/detection/README.md). So a slow drift is told by its sum over days, each
day's excess over ``K`` (the least rise that counts, a day at a time), against ``H``
counting noises: a one-sided CUSUM. ``K`` is 2.9 of those offsets over their mean (−0.04):
a quiet tail whose offset is over ``K`` climbs for good (about one in 600); ``H`` is the
evidence: counting noise alone, ``K`` one noise a day, reaches it once in 10⁵ days.
"""

from __future__ import annotations

import math

import numpy as np

from app.analysis.runs import Array

K = math.log1p(0.15)  # the least rise of a tail's share over days: × 1.15
H = 6.0  # the sum of the excess over K that tells, in a day's counting noise


def tail_cusum(values: Array, noise: Array) -> tuple[Array, Array, Array]:
    """Each column's CUSUM over the rows (days, oldest first) of ``values``: the sum of
    each day's excess over ``K`` since it last left 0, in units of ``noise`` (per column,
    a day's counting noise; 0 or less: that column is not read), how many days that sum
    holds, and the mean of those days' values."""
    days, cols = values.shape
    total, held, sums = np.zeros(cols), np.zeros(cols), np.zeros(cols)
    for row in values:
        total = total + row - K
        fresh = total <= 0
        total = np.where(fresh, 0.0, total)
        held = np.where(fresh, 0.0, held + 1)
        sums = np.where(fresh, 0.0, sums + row)
    known = noise > 0
    score = np.where(known, total / np.where(known, noise, 1.0), 0.0)
    mean = np.where(held > 0, sums / np.maximum(held, 1), 0.0)
    return score, held, mean
