"""``SampleSet``: one target's measured samples as plain arrays, the what-if engine's input."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from app.probe.sample import HTTP_PHASES, LLM_PHASES

KEPT_STATUSES = frozenset({"ok", "deadline_exceeded"})
CENSORED = "deadline_exceeded"
_ORDER = {phase: rank for rank, phase in enumerate(dict.fromkeys((*LLM_PHASES, *HTTP_PHASES)))}

Row = tuple[Hashable, str, Mapping[str, float]]  # run key, status, phases (ms)
# A streamed answer's rhythm (app.analysis.llmmetrics): not a phase, so not in ``ms``.
RHYTHM = ("tpot_ms", "stall_ms")
Rhythm = Mapping[str, NDArray[np.float64]]  # a RHYTHM name -> one value a sample (NaN: none)


@dataclass(frozen=True)
class SampleSet:
    """``ms[i, j]`` is sample i's time in ``phases[j]``; the phases add up to its end-to-end.

    ``run[i]`` numbers sample i's run (0 … runs-1): the unit of resampling. ``censored[i]``:
    cut at the deadline (``deadline_ms``), so its end-to-end is a lower bound.
    ``rhythm[name][i]``: sample i's ``tpot_ms`` or ``stall_ms`` (NaN: it has none), read
    only for a target with an objective over it (else empty).
    """

    phases: tuple[str, ...]
    ms: NDArray[np.float64]
    run: NDArray[np.intp]
    censored: NDArray[np.bool_]
    deadline_ms: float | None = None
    rhythm: Rhythm = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.run)
        if self.ms.shape != (n, len(self.phases)) or self.censored.shape != (n,):
            raise ValueError("ms, run and censored must describe the same samples")
        if any(v.shape != (n,) or k not in RHYTHM for k, v in self.rhythm.items()):
            raise ValueError(f"rhythm holds one array of {' or '.join(RHYTHM)} per sample")

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
    return _with_deadline(SampleSet(phases, ms, run, censored, deadline_ms))


def from_columns(
    phases: Sequence[str],
    run_keys: Sequence[Hashable],
    statuses: Sequence[str],
    ms: NDArray[np.float64],
    deadline_ms: float | None = None,
    rhythm: Rhythm | None = None,
) -> SampleSet:
    """Column arrays as a ``SampleSet``: ``ms[i, j]`` NaN where sample i has no phase j.
    Phases no sample has are dropped; the rest keep the order given. ``rhythm``: one value
    a row, as ``ms``."""
    status = np.asarray(statuses, dtype=object)
    kept = np.isin(status, list(KEPT_STATUSES))
    ms = ms[kept]
    present = np.asarray(~np.isnan(ms).all(axis=0) if len(ms) else np.zeros(len(phases), bool))
    ms = np.nan_to_num(ms[:, present], nan=0.0)
    keys = np.asarray(run_keys, dtype=object)[kept]
    run = _factorised(keys.tolist())
    censored = status[kept] == CENSORED
    names = tuple(name for name, on in zip(phases, present.tolist(), strict=True) if on)
    kept_rhythm = {name: values[kept] for name, values in (rhythm or {}).items()}
    return _with_deadline(SampleSet(names, ms, run, censored, deadline_ms, kept_rhythm))


def _factorised(keys: list[Hashable]) -> NDArray[np.intp]:
    """Each key's index among the sorted distinct keys (``np.unique``'s inverse, which on an
    object array compares every pair in Python; a dict lookup each is cheaper)."""
    index = {key: i for i, key in enumerate(sorted(set(keys)))}  # type: ignore[type-var]
    return np.fromiter((index[key] for key in keys), np.intp, len(keys))


def _with_deadline(samples: SampleSet) -> SampleSet:
    if samples.deadline_ms is not None or not samples.censored.any():
        return samples
    cut = float(samples.totals[samples.censored].min())
    return replace(samples, deadline_ms=cut)
