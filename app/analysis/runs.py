"""Runs as the statistics see them: per-run arrays of end-to-end and phase times.

A run is the unit of independence. Samples within one run share the moment, the
connection and the server's load, so every interval and test here resamples or permutes
whole runs, never pooled samples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple, TypeVar

import numpy as np
from numpy.typing import NDArray

from app.analysis.medians import column_medians as column_medians
from app.analysis.medians import median_along as median_along
from app.analysis.medians import median_of as median_of
from app.analysis.medians import nan_column_medians as nan_column_medians
from app.analysis.objectives import Reading, readings, seen_of
from app.analysis.summary import Timed
from app.probe.sample import LLM_PHASES, Status

Array = NDArray[np.float64]
T = TypeVar("T")
_PHASE_ORDER = {name: i for i, name in enumerate((*LLM_PHASES, "server"))}
_WINDOWS = object()  # the memo's key of the memos of windows ending with the run
_PACKED = object()  # the memo's key of its 1-D float arrays packed (``forget_windows``)


@dataclass(frozen=True, slots=True, eq=False)
class RunData:
    run_id: str
    target: str
    vantage: str
    at: datetime
    phase_names: tuple[str, ...]
    # Timed samples only (ok and censored): rows are samples, columns phase_names.
    phases: Array
    totals: Array
    censored: int  # deadline exceeded: in ``totals`` at the deadline
    failed: int  # errors and HTTP errors: no latency
    samples: int
    # Each objective metric's value per timed sample (app.analysis.objectives); a run
    # built without marks has none, and its latency objectives count nothing.
    readings: Mapping[str, Reading] = field(default_factory=dict)
    # Every window the run is in asks for its phase medians again: worked out once.
    _memo: dict[Hashable, object] = field(default_factory=dict, init=False, repr=False)

    @property
    def timed(self) -> int:
        return len(self.totals)

    def memo(self, key: Hashable, compute: Callable[..., T], *args: object) -> T:
        """``compute(*args)`` the first time ``key`` is asked for: quantities of this run
        (or of a window ending with it, keyed by the window's runs). Asked for several
        hundred thousand times a backtest: a module function and its arguments cost less
        than a closure made at every call."""
        try:
            found = self._memo[key]
        except KeyError:
            found = self._memo[key] = compute(*args)
            return found
        if type(found) is slice:  # packed by ``forget_windows``: a view of the run's buffer
            return self._memo[_PACKED][found]  # type: ignore[index,no-any-return]
        return found  # type: ignore[return-value]  # no cast(): a call

    def window_memo(self, key: Hashable, compute: Callable[..., T], *args: object) -> T:
        """``memo`` for a quantity of a window of runs ending with this one: asked for
        while this run is its series' newest, and dropped by ``forget_windows``."""
        windows = self._memo.get(_WINDOWS)
        if windows is None:
            windows = self._memo[_WINDOWS] = {}
        assert isinstance(windows, dict)
        try:
            return windows[key]  # type: ignore[no-any-return]
        except KeyError:
            found = windows[key] = compute(*args)
            return found

    def forget_windows(self, pack: bool = True) -> None:
        """Drop what ``window_memo`` kept. A backtest's history calls it once a newer run
        of the series exists: the recent windows then end with that run, and a window
        ending here (a reference's, rebuilt daily) is worked out again, the same numbers.
        Kept, these were most of a kept run's memory (a fleet keeps ~200,000 runs).

        With ``pack``, the run's own 1-D float memos (medians, log levels, ratios) are
        packed into one array, each kept as its slice (``memo`` gives a view, the same
        numbers): an array's header costs more than its ten or so numbers. A history that
        packs its older runs itself (app/alerts/packedruns.py) asks for none here."""
        memo = self._memo
        memo.pop(_WINDOWS, None)
        if not pack or _PACKED in memo:
            return
        keys = [key for key, value in memo.items() if _packable(value)]
        if len(keys) < 2:
            return
        arrays: list[Array] = [memo[key] for key in keys]  # type: ignore[misc]
        memo[_PACKED] = np.concatenate(arrays)
        start = 0
        for key, array in zip(keys, arrays, strict=True):
            memo[key] = _slice(start, start + len(array))
            start += len(array)

    def memos(self) -> list[tuple[Hashable, object]]:
        """Its own memos (not its windows'), each as ``memo`` gives it: what a store that
        keeps runs packed saves, and gives back to the run it rebuilds (``remember``)."""
        packed = self._memo.get(_PACKED)
        return [
            (key, packed[value] if type(value) is slice else value)  # type: ignore[index]
            for key, value in self._memo.items()
            if key is not _WINDOWS and key is not _PACKED
        ]

    def remember(self, key: Hashable, value: object) -> None:
        """``memo``'s answer for ``key`` from now on (see ``memos``)."""
        self._memo[key] = value

    def medians(self, names: Sequence[str]) -> Array:
        """Each of ``names``' median over the run's timed samples (0 for a phase the run
        lacks), as ``np.median(stacked_phases([run], names)[0], axis=0)`` gives them."""
        own = self.memo("medians", lambda: column_medians(self.phases))
        if tuple(names) == self.phase_names:
            return own
        return np.array(
            [own[self.phase_names.index(n)] if n in self.phase_names else 0.0 for n in names]
        )

    def total_median(self) -> float:
        """The timed samples' end-to-end median, as ``np.median(totals)`` gives it (asked
        for by several detectors and every daily reference the run is in: worked out once)."""
        return self.memo("total_median", median_of, self.totals)

    @property
    def ok(self) -> int:
        return self.timed - self.censored

    def objective_readings(self) -> Mapping[str, Reading]:
        """``readings``; a run made without them still has its end-to-end times."""
        if self.readings:
            return self.readings
        return {"end_to_end_ms": (self.totals, self.cut_mask())}

    def cut_mask(self) -> NDArray[np.bool_]:
        """Which timed samples were cut at the deadline (without readings: its last few)."""
        found = self.readings.get("end_to_end_ms")
        if found is not None:
            return found[1]
        return np.arange(self.timed) >= self.timed - self.censored


@functools.lru_cache(maxsize=1024)
def _slice(start: int, stop: int) -> slice:
    """One slice object for every run's same part (runs of a series pack alike)."""
    return slice(start, stop)


def _packable(value: object) -> bool:
    """A 1-D float64 array (a view is copied: the array it views is then freed)."""
    return type(value) is np.ndarray and value.ndim == 1 and value.dtype == np.float64


class RunCount(NamedTuple):
    """What a run's summary keeps after its samples are pruned: enough for a miss rate."""

    at: datetime
    timed: int  # ok and deadline-exceeded samples
    censored: int  # deadline exceeded
    samples: int = 0  # every sample, failed ones too (availability's count)


def phase_order(names: Iterable[str]) -> tuple[str, ...]:
    return _ordered(frozenset(names))


@functools.lru_cache(maxsize=256)
def _ordered(names: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(names, key=lambda name: (_PHASE_ORDER.get(name, 99), name)))


def run_from_samples(
    run_id: str, target: str, vantage: str, at: datetime, samples: Sequence[Timed]
) -> RunData:
    timed = [s for s in samples if s.status in (Status.OK, Status.DEADLINE_EXCEEDED)]
    names = phase_order(name for s in timed for name in s.phases)
    phases = np.array(
        [[s.phases.get(name, 0.0) for name in names] for s in timed], dtype=np.float64
    ).reshape(len(timed), len(names))
    return RunData(
        run_id=run_id,
        target=target,
        vantage=vantage,
        at=at,
        phase_names=names,
        phases=phases,
        totals=np.array([s.total_ms for s in timed], dtype=np.float64),
        censored=sum(s.status == Status.DEADLINE_EXCEEDED for s in samples),
        failed=len(samples) - len(timed),
        samples=len(samples),
        readings=readings([seen_of(s) for s in timed]),
    )


def common_phases(runs: Sequence[RunData]) -> tuple[str, ...]:
    first = runs[0].phase_names if runs else ()
    for run in runs:
        if run.phase_names is not first and run.phase_names != first:
            return phase_order(name for run in runs for name in run.phase_names)
    return _ordered_tuple(first)  # the usual case: one set of phases, asked for per window


@functools.lru_cache(maxsize=256)
def _ordered_tuple(names: tuple[str, ...]) -> tuple[str, ...]:
    return _ordered(frozenset(names))


def stacked_phases(
    runs: Sequence[RunData], names: Sequence[str]
) -> tuple[Array, NDArray[np.int64]]:
    """All timed samples of ``runs`` as one (samples × names) matrix, and each run's size."""
    names = tuple(names)
    blocks = [
        run.phases if run.phase_names is names or run.phase_names == names else _aligned(run, names)
        for run in runs
    ]
    sizes = np.array([len(block) for block in blocks], dtype=np.int64)
    if not blocks:
        return np.empty((0, len(names))), sizes
    return np.concatenate(blocks, axis=0), sizes


def _aligned(run: RunData, names: Sequence[str]) -> Array:
    if run.phase_names == tuple(names):
        return run.phases
    columns = [
        run.phases[:, run.phase_names.index(name)]
        if name in run.phase_names
        else np.zeros(run.timed)
        for name in names
    ]
    return np.stack(columns, axis=1) if columns else np.empty((run.timed, 0))
