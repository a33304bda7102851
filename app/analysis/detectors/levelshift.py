"""``level_shift`` — end-to-end, or a phase, got materially slower with no change of leader.

The statistic is in app/analysis/level.py; here is when it makes an alert. Slowdowns only
(a speed-up is not news), and quiet while another phase leads the window than the
reference, or a ``dominant_shift`` is open: a leader change is that detector's fact. The
CUSUM heights live in the vantage's memory (``DetectorMemory.cusums["level_shift"]``: the
runs since it left 0, then one height per series).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from app.analysis.detectors.base import Detector, Finding, Inputs, Named, Signal
from app.analysis.dominance import phase_mix
from app.analysis.level import TOTAL, LevelReference, changes, cusum_step, increments
from app.analysis.runs import Array

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams

NAME = "level_shift"
# The sentence reads the runs since the CUSUM left 0, up to this many recent windows.
ONSET_WINDOWS = 4


def judge(inputs: Inputs) -> list[Finding]:
    reference, params = inputs.reference, inputs.params
    if reference is None or reference.level is None or len(inputs.window) < params.recent_runs:
        return []
    if reference.span < timedelta(days=params.level_min_days):
        return []  # a day-to-day wander is known only once days of it were seen
    level = reference.level
    if inputs.dominant_open or phase_mix(inputs.window).dominant != reference.mix.dominant:
        # A leader change is dominant_shift's: no evidence is kept for after it.
        reset(inputs.cusums, level)
        return []
    runs, scores = advance(inputs.cusums, level, inputs.window[-1], params)
    since = min(max(runs, 1), ONSET_WINDOWS * params.recent_runs)
    return [level_finding(scores, runs, level, inputs.onset(since), params)]


def state(memory: MutableMapping[str, list[float]], level: LevelReference) -> tuple[int, Array]:
    """The runs since the CUSUM left 0 and its heights (0 for a reference of other series)."""
    kept = memory.get(NAME)
    if kept is None or len(kept) != len(level.series) + 1:
        return 0, np.zeros(len(level.series))
    return int(kept[0]), np.array(kept[1:], dtype=np.float64)


def reset(memory: MutableMapping[str, list[float]], level: LevelReference) -> None:
    memory[NAME] = [0.0] * (len(level.series) + 1)


def advance(
    memory: MutableMapping[str, list[float]],
    level: LevelReference,
    run: Any,
    params: DetectorParams,
) -> tuple[int, Array]:
    """The CUSUM after ``run``, kept in ``memory``."""
    runs, scores = state(memory, level)
    cap = params.level_cap * params.level_threshold
    steps = increments(level, run, params.level_min_relative, params.level_min_ms, cap)
    scores = cusum_step(scores, steps, 3 * params.level_threshold)
    runs = runs + 1 if scores.max() > 0 else 0
    memory[NAME] = [float(runs), *map(float, scores)]
    return runs, scores


def level_finding(
    scores: Array,
    runs: int,
    level: LevelReference,
    recent: Any,
    params: DetectorParams,
) -> Finding:
    """Hit once a series' CUSUM reaches the threshold; clear below half of it."""
    series = level.series
    numbers: dict[str, Any] = {
        "cusum": round(float(scores.max()), 2),
        "cusum_by_series": {
            name: round(float(s), 2) for name, s in zip(series, scores, strict=True)
        },
        "threshold": params.level_threshold,
    }
    if scores.max() < params.level_threshold / 2:
        return Finding(Signal.CLEAR, numbers)
    pct, expected, observed = changes(level, recent)
    crossed = [name for name, s in zip(series, scores, strict=True) if s >= params.level_threshold]
    ranked = sorted(range(len(series)), key=lambda i: -scores[i])
    # End-to-end is what a user feels: it heads the sentence whenever it moved materially.
    material = TOTAL in crossed or pct[0] >= 100 * params.level_min_relative
    head = TOTAL if material else series[ranked[0]]
    i = series.index(head)
    numbers |= {
        "series": head,
        "change_pct": _round(pct[i]),
        "reference_ms": _round(expected[i]),
        "recent_ms": _round(observed[i]),
        "runs": runs,
        "changes_pct": {
            name: _round(pct[j])
            for j, name in enumerate(series)
            if name != head and expected[j] >= params.level_min_ms
        },
        "crossed": crossed,
    }
    if crossed:
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
)
