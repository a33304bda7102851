"""A ``Drift`` as the list of floats a detector keeps in ``DetectorMemory.cusums`` (stored
as JSON in detector_state.cusums, so no NaN), and read back."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from app.analysis.drift import KNOWN, SLOTS, Baseline, Drift

VERSION = 3.0
READS = (2.0, VERSION)  # version 2 had no counting noise: read as 0 (the daily spread alone)
NO_PIN = -1.0  # a pin's place in the packed floats when there is none


def pack(drift: Drift) -> list[float]:
    """``drift`` as the floats ``DetectorMemory.cusums`` keeps (``unpack`` reads them)."""
    return _head(drift) + baseline_floats(drift.baseline) + _runs_floats(drift)


def _head(drift: Drift) -> list[float]:
    base = drift.baseline
    head = [VERSION, len(base.phases), *(KNOWN.index(name) for name in base.phases)]
    pin = NO_PIN if math.isnan(drift.pin) else drift.pin  # the store keeps JSON: no NaN
    head += [base.start, base.end, drift.frozen_at, pin, len(drift.days)]
    return [float(x) for x in head]


def baseline_floats(base: Baseline) -> list[float]:
    """The frozen profile's part of the floats (the same until the next freeze)."""
    parts = (base.shares, base.tail0, base.spread, base.counting, base.means, base.tail_q)
    found: list[float] = np.concatenate([p.ravel() for p in parts]).tolist()
    return found


def _runs_floats(drift: Drift) -> list[float]:
    found: list[float] = np.concatenate((drift.bins.ravel(), drift.days.ravel())).tolist()
    return found


class Packed(list[float]):
    """The packed floats, with the ``Drift`` they were packed from: read back after every
    run, so a replay does not unpack a thousand floats each time. A copy of the memory
    (a plain list) is unpacked afresh. Packed again after every run, the frozen profile's
    floats (about half) are taken from ``previous`` while its baseline is the same."""

    drift: Drift
    profile: list[float]

    def __init__(self, drift: Drift, previous: object = None) -> None:
        base = drift.baseline
        if isinstance(previous, Packed) and previous.drift.baseline is base:
            profile = previous.profile
        else:
            profile = baseline_floats(base)
        super().__init__(_head(drift) + profile + _runs_floats(drift))
        self.drift, self.profile = drift, profile


def unpack(floats: Sequence[float] | None) -> Drift | None:
    """The ``Drift`` that ``pack`` gave these floats; None for none, or another layout."""
    if isinstance(floats, Packed):
        return floats.drift
    if not floats or floats[0] not in READS:
        return None
    phases = tuple(KNOWN[int(code)] for code in floats[2 : 2 + int(floats[1])])
    at = 2 + len(phases)
    start, end, frozen_at, pin, days = floats[at : at + 5]
    rest = np.asarray(floats[at + 5 :], dtype=np.float64)
    k, width = len(phases), 1 + 2 * len(phases)
    counted = k if floats[0] == VERSION else 0
    sizes = [k, k, width, counted, SLOTS * (k + 1), SLOTS * k, 24 * (2 + width)]
    sizes.append(int(days) * (1 + width))
    if len(rest) != sum(sizes):
        return None
    parts = np.split(rest, np.cumsum(sizes)[:-1])
    shares, tail0, spread, counting, means, tail_q, bins, kept = parts
    baseline = Baseline(
        start,
        end,
        phases,
        shares,
        means.reshape(SLOTS, k + 1),
        tail_q.reshape(SLOTS, k),
        tail0,
        spread,
        counting if counted else np.zeros(k),
    )
    pin = math.nan if pin == NO_PIN else pin
    return Drift(baseline, frozen_at, pin, bins.reshape(24, 2 + width), kept.reshape(-1, 1 + width))
