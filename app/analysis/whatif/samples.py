"""``SampleSet``: one target's measured samples as plain arrays, the what-if engine's input."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from app.probe.sample import HTTP_PHASES, LLM_PHASES

KEPT_STATUSES = frozenset({"ok", "deadline_exceeded"})
CENSORED = "deadline_exceeded"
_ORDER = {phase: rank for rank, phase in enumerate(dict.fromkeys((*LLM_PHASES, *HTTP_PHASES)))}

Row = tuple[Hashable, str, Mapping[str, float]]  # run key, status, phases (ms)


@dataclass(frozen=True)
class SampleSet:
    """``ms[i, j]`` is sample i's time in ``phases[j]``; the phases add up to its end-to-end.

    ``run[i]`` numbers sample i's run (0 … runs-1): the unit of resampling. ``censored[i]``:
    cut at the deadline (``deadline_ms``), so its end-to-end is a lower bound.
    """

    phases: tuple[str, ...]
    ms: NDArray[np.float64]
    run: NDArray[np.intp]
    censored: NDArray[np.bool_]
    deadline_ms: float | None = None

    def __post_init__(self) -> None:
        n = len(self.run)
        if self.ms.shape != (n, len(self.phases)) or self.censored.shape != (n,):
            raise ValueError("ms, run and censored must describe the same samples")

    @property
    def n(self) -> int:
        return len(self.run)

    @property
    def runs(self) -> int:
        return int(self.run.max()) + 1 if self.n else 0

    @property
    def totals(self) -> NDArray[np.float64]:
        return np.asarray(self.ms.sum(axis=1), np.float64)

    def column(self, phase: str) -> int:
        return self.phases.index(phase)


def sample_set(rows: Iterable[Row], deadline_ms: float | None = None) -> SampleSet:
    """Rows (in any order) as a ``SampleSet``. Failed samples (errors, HTTP errors) are left
    out: they have no end-to-end time a change could move. Without ``deadline_ms``, the
    deadline is where the censored samples were cut."""
    kept = [row for row in rows if row[1] in KEPT_STATUSES]
    phases = tuple(
        sorted({p for row in kept for p in row[2]}, key=lambda p: (_ORDER.get(p, 99), p))
    )
    runs: dict[Hashable, int] = {}
    run = np.fromiter((runs.setdefault(row[0], len(runs)) for row in kept), np.intp, len(kept))
    ms = np.array([[row[2].get(p, 0.0) for p in phases] for row in kept], np.float64)
    ms = ms.reshape(len(kept), len(phases))
    censored = np.fromiter((row[1] == CENSORED for row in kept), np.bool_, len(kept))
    if deadline_ms is None and censored.any():
        deadline_ms = float(ms[censored].sum(axis=1).min())
    return SampleSet(phases, ms, run, censored, deadline_ms)


def empty_like(phases: tuple[str, ...]) -> SampleSet:
    return SampleSet(phases, np.zeros((0, len(phases))), np.zeros(0, np.intp), np.zeros(0, bool))
