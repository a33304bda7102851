"""``level_shift``'s service lane: a phase every vantage sees, judged on the vantages'
level evidence pooled (the statistic is app.analysis.levelpool's).

After each run at any vantage, that run's increments (as ``level_shift`` computes them
against the vantage's own reference) join one CUSUM per pooled phase, weighted by how much
noise the vantages share; the newest ``level_window_runs`` runs of each vantage are
summed. Its crossing is the service's ``level_shift`` once the phase grew at every vantage
(a path's change stays the vantage's own alert). One level story at a time: while a
vantage's own ``level_shift`` is active the service's does not open, and while the
service's is, no vantage's opens. A vantage's own crossing on the server's work per request
(prefill, generation), which no other vantage saw grow over the same runs, needs
``UNSEEN_FACTOR`` × the threshold (``unseen``): the server is one, so its work taking
longer is seen from each vantage; a slowdown only one of them reads is most often that
vantage's own run-to-run wander. The state, in the first vantage's (by name)
``DetectorMemory.cusums["level_pool"]`` alone: the vantages pooled, then the rows of
increments. (Copied into every vantage's, it was V copies of V × ``level_window_runs`` rows,
each written at every evaluation: on a target of 20 vantages, 32,000 numbers a run. A vantage
count that changes starts the rows afresh either way; a first vantage that changes with the
count unchanged, one gone as another came, does too now, where a copy once carried rows
laid out for the vantages before.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np
from numpy.typing import NDArray

from app.alerts.combine import Alerts, Found
from app.alerts.history import History
from app.alerts.identity import Identity
from app.alerts.memory import DetectorMemory, EvaluatorView
from app.analysis import detectors as d
from app.analysis.detectors.levelshift import NAME, level_finding
from app.analysis.dominance import phase_mix
from app.analysis.level import MIN_TIMED, LevelReference, allowances, increments, window_cusum
from app.analysis.levelpool import POOLED, grew_everywhere, pooled_steps, weights
from app.analysis.runs import Array, RunData

KEY = "level_pool"
# The server's work on each request: slower, it is slower from every vantage. (Not the
# queue, nor a server time with the queue in it: a wait follows the load of the moment each
# vantage's run meets; nor transfer, pooled too, which streams through each one's path.)
SERVER_PHASES = ("prefill", "generation")
# A vantage's crossing on those alone, that no other vantage saw grow, is held until its
# CUSUM reaches this many times the threshold (bench/detection/README.md, "A slowdown only
# one vantage reads"): a persisting one still fires, a run longer; a few runs' wander not.
UNSEEN_FACTOR = 1.5


class PooledLevel:
    """The pooled lane, and the weights of each target's vantages (kept while their
    references are the same ones: rebuilt once a day)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self._weights: dict[str, tuple[tuple[tuple[str, datetime], ...], Array]] = {}

    def signals(
        self,
        view: EvaluatorView,
        identity: Identity,
        vantage: str,
        run: RunData,
        window: Sequence[RunData],
        params: d.DetectorParams,
    ) -> Found:
        """The service's finding after ``run`` at ``vantage`` (``identity``: its alert's)."""
        target = identity.target
        if NAME not in params.enabled or params.level_pooled_threshold <= 0:
            return {}
        vantages = self.history.vantages(target, run.at)
        memories = [view.memory(target, v) for v in vantages]
        levels = _levels(memories, params)
        own = view.memory(target, vantage).reference
        leader = own.mix.dominant if own is not None else None
        if (
            levels is None
            or vantage not in vantages
            or _dominant_active(view.alerts, target)
            or phase_mix(window).dominant != leader
        ):
            for memory in memories:
                memory.cusums.pop(KEY, None)  # a leader change is dominant_shift's
            return {}
        level = levels[vantages.index(vantage)]
        weight = self._weight(target, vantages, memories, levels)
        cap = params.level_cap * params.level_threshold
        step = increments(
            level,
            run,
            params.level_min_relative,
            params.level_min_ms,
            cap,
            params.level_pooled_alternative,
            # The in-sample spread: held out, the transfer × 2 of phase_slowdown waited 1–2
            # runs more, where this lane's quiet-corpus highest was 3.5 nats under its
            # threshold (bench/detection/README.md, "level_shift's reference error").
            held_out=False,
        )
        steps = _advance(memories, pooled_steps(level, step, weight), params.level_window_runs)
        scores, lengths = window_cusum(steps)
        finding = self._finding(view, target, vantage, vantages, levels, scores, lengths, params)
        finding.numbers["pooled_vantages"] = len(vantages)
        finding.numbers["pooled_weight"] = {
            name: round(float(w), 2) for name, w in zip(POOLED, weight, strict=True) if w > 0
        }
        return {identity: finding}

    def _weight(
        self,
        target: str,
        vantages: list[str],
        memories: list[DetectorMemory],
        levels: list[LevelReference],
    ) -> Array:
        key = tuple(
            (v, m.reference.built_at)
            for v, m in zip(vantages, memories, strict=True)
            if m.reference
        )
        kept = self._weights.get(target)
        if kept is None or kept[0] != key:
            kept = self._weights[target] = (key, weights(levels))
        return kept[1]

    def _finding(
        self,
        view: EvaluatorView,
        target: str,
        vantage: str,
        vantages: list[str],
        levels: list[LevelReference],
        scores: Array,
        lengths: NDArray[np.int64],
        params: d.DetectorParams,
    ) -> d.Finding:
        """``level_shift``'s finding from the pooled scores, said in this vantage's terms;
        a hit only where the phase grew at every vantage, and no vantage tells a level
        change of its own."""
        level = levels[vantages.index(vantage)]
        per_series = np.zeros(len(level.series))
        runs = np.zeros(len(level.series), dtype=np.int64)
        for k, name in enumerate(POOLED):
            if name in level.series:
                per_series[level.series.index(name)] = scores[k]
                runs[level.series.index(name)] = math.ceil(lengths[k] / len(vantages))
        onset = lambda count: self.history.last(target, vantage, count)  # noqa: E731
        found = level_finding(per_series, runs, level, onset, params, params.level_pooled_threshold)
        if found.signal is not d.Signal.HIT:
            return found
        top = POOLED[int(np.argmax(scores))]
        means, least = [], []
        for other, other_level in zip(vantages, levels, strict=True):
            newest = self.history.last(target, other, max(2, int(found.numbers["runs"])))
            grown = _mean_growth(other_level, newest, top, params)
            if grown is None:
                return d.Finding(d.Signal.HOLD, found.numbers)
            means.append(grown[0])
            least.append(grown[1])
        told = _vantage_level_active(view.alerts, target)
        if told or not grew_everywhere(means, least):
            return d.Finding(d.Signal.HOLD, found.numbers)
        return found

    def unseen(
        self,
        view: EvaluatorView,
        vantage: str,
        run: RunData,
        numbers: dict[str, object],
        params: d.DetectorParams,
    ) -> bool:
        """A vantage's ``level_shift`` hit (its ``numbers``) crossed on ``SERVER_PHASES``
        alone, which the service lane pools and no other vantage of the target saw
        grow by half their least slowdown worth an alert over as many runs, and short of
        ``UNSEEN_FACTOR`` × the threshold."""
        target = run.target
        vantages = self.history.vantages(target, run.at)
        memories = [view.memory(target, v) for v in vantages]
        levels = _levels(memories, params) if vantage in vantages else None
        crossed = numbers.get("crossed")
        if levels is None or not isinstance(crossed, list) or not crossed:
            return False
        weight = self._weight(target, vantages, memories, levels)
        server = {n for n, w in zip(POOLED, weight, strict=True) if w > 0 and n in SERVER_PHASES}
        scores = numbers.get("cusum_by_series")
        assert isinstance(scores, dict)
        bar = UNSEEN_FACTOR * params.level_threshold
        if any(name not in server or scores[name] >= bar for name in crossed):
            return False
        runs = numbers.get("runs")
        count = max(2, runs if isinstance(runs, int) else 1)
        for other, level in zip(vantages, levels, strict=True):
            newest = self.history.last(target, other, count) if other != vantage else []
            for name in crossed if newest else ():
                grown = _mean_growth(level, newest, name, params)
                if grown is None or grown[0] >= grown[1] / 2:
                    return False
        return True


def _levels(
    memories: list[DetectorMemory], params: d.DetectorParams
) -> list[LevelReference] | None:
    """Each vantage's hours' levels, once every vantage has days of them; else None."""
    if len(memories) < 2:
        return None
    found = []
    for memory in memories:
        level = None if memory.reference is None else memory.reference.level
        if level is None or level.span < timedelta(days=params.level_min_days):
            return None
        found.append(level)
    return found


def _advance(memories: list[DetectorMemory], row: Array, runs: int) -> Array:
    """The pooled rows after ``row`` (the newest ``runs`` per vantage), kept in the first
    vantage's memory (and in no other: a copy left from an older version goes)."""
    vantages = len(memories)
    depth, width = runs * vantages, len(POOLED)
    kept = memories[0].cusums.get(KEY)
    if kept is None or len(kept) != 1 + depth * width or int(kept[0]) != vantages:
        steps = np.zeros((depth, width))
    else:
        steps = np.array(kept[1:], dtype=np.float64).reshape(depth, width)
    steps = np.vstack((steps[1:], row))
    memories[0].cusums[KEY] = [float(vantages), *steps.ravel().tolist()]
    for memory in memories[1:]:
        memory.cusums.pop(KEY, None)
    return steps


def _mean_growth(
    level: LevelReference, runs: Sequence[RunData], series: str, params: d.DetectorParams
) -> tuple[float, float] | None:
    """The mean residual of ``series`` over ``runs`` and its least slowdown worth an alert
    (log terms); None where the vantage has no timed run of it."""
    if series not in level.series:
        return None
    column = level.series.index(series)
    timed = [run for run in runs if run.timed >= MIN_TIMED]
    values = [level.residuals(run)[column] for run in timed]
    values = [v for v in values if np.isfinite(v)]
    if not values:
        return None
    least = allowances(level, timed[-1], params.level_min_relative, params.level_min_ms)
    return float(np.mean(values)), float(least[column])


def _dominant_active(alerts: Alerts, target: str) -> bool:
    return any(
        i.kind == "dominant_shift" and i.target == target and a.position.active
        for i, a in alerts.items()
    )


def _vantage_level_active(alerts: Alerts, target: str) -> bool:
    return any(
        i.kind == NAME and i.target == target and i.vantage is not None and a.position.active
        for i, a in alerts.items()
    )


def service_level_active(alerts: Alerts, target: str) -> bool:
    """The service's ``level_shift`` of ``target`` is active: no vantage's opens beside it."""
    return any(
        i.kind == NAME and i.target == target and i.vantage is None and a.position.active
        for i, a in alerts.items()
    )
