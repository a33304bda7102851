"""Weeks of constructed runs for baseline_drift's tests: a queue with a daily cycle and a
level per day, and a change that may grow with the days."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

import numpy as np

from app.analysis.runs import RunData
from tests.runfactory import EVERY, LLM, make_run

Change = Callable[[float], dict[str, float]]  # day → phase factors ("slow": tail share)


def steady(_day: float) -> dict[str, float]:
    return {}


def runs(
    seed: int,
    start: datetime,
    days: float,
    change: Change = steady,
    every: timedelta = EVERY,
    target: str = "chat",
) -> Iterator[RunData]:
    """A run every ``every``: the queue follows a daily cycle (peak 15:00) and a level per
    day; ``change(day)`` scales phases, or sets the share of samples 300 ms slower."""
    rng = np.random.default_rng(seed)
    levels = np.exp(rng.normal(0.0, 0.08, int(days) + 2))
    at = start
    while at < start + timedelta(days=days):
        day = (at - start) / timedelta(days=1)
        medians = dict(LLM)
        cycle = 1 + 0.3 * math.sin(2 * math.pi * (at.hour - 9) / 24)
        medians["queue"] *= cycle * levels[int(day)]
        factors = change(day)
        for name, factor in factors.items():
            if name in medians:
                medians[name] *= factor
        slow = factors.get("slow", 0.02)
        yield make_run(rng, at, medians, run_sigma=0.1, slow=slow, slow_ms=300.0, target=target)
        at += every
