"""``level_shift`` — end-to-end, or a phase, got materially slower with no change of leader.

The statistic is in app/analysis/level.py; here is when it makes an alert. Slowdowns only
(a speed-up is not news), and quiet while another phase leads the window than the
reference, or a ``dominant_shift`` is open: a leader change is that detector's fact. The
newest runs' increments live in the vantage's memory (``DetectorMemory.cusums
["level_shift"]``: ``level_window_runs`` rows of one per series, flattened).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.detectors.base import Detector, Finding, Inputs, Named, Signal
from app.analysis.dominance import phase_mix
from app.analysis.level import TOTAL, LevelReference, changes, increments, window_cusum
from app.analysis.runs import Array, RunData

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams

NAME = "level_shift"


def judge(inputs: Inputs) -> list[Finding]:
    reference, params = inputs.reference, inputs.params
    if reference is None or reference.level is None or len(inputs.window) < params.recent_runs:
        return []
    level = reference.level
    if level.span < timedelta(days=params.level_min_days):
        return []  # a day-to-day wander is known only once days of it were seen
    if inputs.dominant_open or phase_mix(inputs.window).dominant != reference.mix.dominant:
        # A leader change is dominant_shift's: no evidence is kept for after it.
        inputs.cusums.pop(NAME, None)
        return []
    steps = advance(inputs.cusums, level, inputs.window[-1], params)
    scores, lengths = window_cusum(steps)
    return [level_finding(scores, lengths, level, inputs.onset, params)]


def kept_steps(memory: MutableMapping[str, list[float]], level: LevelReference, runs: int) -> Array:
    """The newest ``runs`` runs' increments (runs × series, newest last; zeros before any
    was kept, or for a reference of other series)."""
    width = len(level.series)
    kept = memory.get(NAME)
    if kept is None or len(kept) != runs * width:
        return np.zeros((runs, width))
    if type(kept) is KeptSteps:
        return kept.steps.reshape(runs, width)
    return np.array(kept, dtype=np.float64).reshape(runs, width)


class KeptSteps(list[float]):
    """The kept increments as Python floats (as the store keeps them), with the array they
    were made from: read back after every run, so a replay does not convert them back. A
    copy of the memory (a plain list) is read afresh, to the same numbers."""

    def __init__(self, steps: Array) -> None:
        super().__init__(steps.ravel().tolist())
        self.steps = steps


def advance(
    memory: MutableMapping[str, list[float]],
    level: LevelReference,
    run: RunData,
    params: DetectorParams,
) -> Array:
    """The newest runs' increments after ``run``, kept in ``memory``."""
    cap = params.level_cap * params.level_threshold
    step = increments(level, run, params.level_min_relative, params.level_min_ms, cap)
    steps = np.vstack((kept_steps(memory, level, params.level_window_runs)[1:], step))
    memory[NAME] = KeptSteps(steps)  # Python floats, as the store keeps them
    return steps


def level_finding(
    scores: Array,
    lengths: NDArray[np.int64],
    level: LevelReference,
    onset: Callable[[int], Sequence[RunData]],
    params: DetectorParams,
    threshold: float | None = None,
) -> Finding:
    """Hit once a series' CUSUM reaches the threshold (``params.level_threshold`` unless
    given); clear below half of it. The numbers are over the runs of the head series'
    excursion."""
    threshold = params.level_threshold if threshold is None else threshold
    series = level.series
    numbers: dict[str, Any] = {
        "cusum": round(float(scores[1:].max()), 2),
        "cusum_by_series": {
            name: round(float(s), 2) for name, s in zip(series, scores, strict=True)
        },
        "threshold": threshold,
    }
    if scores[1:].max() < threshold / 2:
        return Finding(Signal.CLEAR, numbers)
    # End-to-end is the phases' sum: its slowdown is theirs, judged where the noise is least
    # (a queue burst is a large share of end-to-end's spread in one run, none of network's).
    crossed = [
        name for name, s in zip(series, scores, strict=True) if s >= threshold and name != TOTAL
    ]
    top = 1 + int(np.argmax(scores[1:]))
    runs = max(int(lengths[top]), 1)
    pct, expected, observed = changes(level, onset(runs))
    # End-to-end is what a user feels: it heads the sentence whenever it moved materially.
    material = pct[0] >= 100 * params.level_min_relative
    head = 0 if material else top
    numbers |= {
        "series": series[head],
        "change_pct": _round(pct[head]),
        "reference_ms": _round(expected[head]),
        "recent_ms": _round(observed[head]),
        "runs": runs,
        "changes_pct": {
            name: _round(pct[j])
            for j, name in enumerate(series)
            if j != head and expected[j] >= params.level_min_ms
        },
        "crossed": crossed,
    }
    # The steps were summed as they came, each against the reference of its day; a rebuilt
    # reference may hold those hours as usual now. The alert says what the current one
    # sees over those runs: a slowdown less than the least worth an alert is none.
    if crossed and pct[top] >= 100 * params.level_min_relative:
        return Finding(Signal.HIT, numbers)
    return Finding(Signal.HOLD, numbers)


def _round(value: float) -> float | None:
    return None if not np.isfinite(value) else round(float(value), 1)


def sentence(identity: Named, n: dict[str, Any]) -> str:
    others = []
    for name, pct in n.get("changes_pct", {}).items():
        if pct is None:
            continue
        if abs(pct) < 5:
            others.append(f"{name} unchanged")
        else:
            others.append(f"{name} {pct:+.0f} %")
    tail = "; " + ", ".join(others) if others else ""
    return (
        f"{n['series']} is {n['change_pct']:.0f} % slower than usual at these hours on"
        f" {identity.target} (p50 {n['reference_ms']:,.0f} → {n['recent_ms']:,.0f} ms) for"
        f" {n['runs']} runs{tail}"
    )


def _confirm(params: DetectorParams) -> int:
    return params.level_confirm


DETECTOR = Detector(
    name=NAME,
    summary="end-to-end or a phase got materially slower than at these hours, leader unchanged",
    sentence=sentence,
    judge=judge,
    confirm=_confirm,
    rebases=True,
)
