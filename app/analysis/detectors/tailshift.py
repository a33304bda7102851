"""``tail_shift`` — a tail got heavier than the reference (a likelihood-ratio CUSUM).

The statistics are in app/analysis/tail.py (the bins and the reference) and tailcusum.py
(the family of inflations, the dispersion, the CUSUM); here is when they make an alert.

Two channels, each a CUSUM per member of the family:

* **end-to-end**, per vantage: a tail that any part of the path grew;
* **the load phase** (queue, or server), **pooled over the target's vantages**: the server
  is one, so a heavier queue tail is seen from every vantage, and each sample's ratio over
  its own run's median is its own draw. Each vantage's run adds its increments (against
  its own reference) to the same CUSUM, kept alike in every vantage's memory. With two or
  more vantages its alert is the service's (scope ``service``).

The state, in ``DetectorMemory.cusums["tail_shift"]``: the vantages pooled when it was
last advanced, each channel's runs since its CUSUM left 0, then each channel's members'
CUSUMs (end-to-end first).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from app.analysis.detectors.base import (
    Carrying,
    Detector,
    Finding,
    Inputs,
    Named,
    Reference,
    Signal,
)
from app.analysis.runs import RunData
from app.analysis.tail import TOTAL, Channel, TailReference, TailState
from app.analysis.tailcusum import MEMBER_RATIOS, MEMBERS, caps, cusum, increments, shape

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams

NAME = "tail_shift"
CHANNELS = 2  # end-to-end, the load phase
ONSET_WINDOWS = 4  # the sentence reads the runs since the CUSUM left 0, at most this many windows


@dataclass(slots=True)
class Cusums:
    """``cusums["tail_shift"]`` read: the vantages pooled, runs and scores per channel."""

    vantages: int
    runs: list[int]
    scores: list[list[float]]

    @classmethod
    def of(cls, values: Sequence[float] | None) -> Cusums:
        if values is None or len(values) != 1 + CHANNELS * (1 + MEMBERS):
            return cls(1, [0] * CHANNELS, [[0.0] * MEMBERS for _ in range(CHANNELS)])
        scores = values[1 + CHANNELS :]
        return cls(
            int(values[0]),
            [int(v) for v in values[1 : 1 + CHANNELS]],
            [list(scores[i * MEMBERS : (i + 1) * MEMBERS]) for i in range(CHANNELS)],
        )

    def values(self) -> list[float]:
        flat = [float(v) for channel in self.scores for v in channel]
        return [float(self.vantages), *map(float, self.runs), *flat]


def advance_tail(
    own: dict[str, list[float]],
    others: Sequence[dict[str, list[float]]],
    run: RunData,
    reference: Reference,
    params: DetectorParams,
) -> TailState | None:
    """The CUSUMs after a new run (before the detectors judge it): the end-to-end one in
    ``own`` (this vantage's memory), the load phase's in ``own`` and in every other vantage's
    memory of the target (``others``). Returns what the store keeps of it; None while the
    reference is too short to judge against (hours seen on one day only: no evidence yet)."""
    tail = reference.tail
    if tail is None or reference.span < timedelta(days=params.tail_min_days):
        return None
    state = Cusums.of(own.get(NAME))
    state.vantages = 1 + len(others)
    for index, name in enumerate(_names(tail)):
        channel = tail.channels.get(name) if name else None
        steps = None if channel is None else increments(run, channel)
        if channel is None or steps is None:
            continue
        threshold = params.tail_threshold if index else params.tail_threshold_end_to_end
        state.scores[index] = cusum(state.scores[index], steps, caps(channel, threshold))
        state.runs[index] = state.runs[index] + 1 if max(state.scores[index]) > 0 else 0
    own[NAME] = state.values()
    for memory in others:
        other = Cusums.of(memory.get(NAME))
        other.vantages, other.runs[1], other.scores[1] = (
            state.vantages,
            state.runs[1],
            state.scores[1],
        )
        memory[NAME] = other.values()
    return TailState((max(max(s) for s in state.scores),), max(state.runs))


def _names(reference: TailReference) -> tuple[str | None, str | None]:
    load = next((name for name in reference.channels if name != TOTAL), None)
    return (TOTAL if TOTAL in reference.channels else None, load)


def judge(inputs: Inputs) -> list[Finding]:
    reference, params = inputs.reference, inputs.params
    if reference is None or reference.tail is None or len(inputs.window) < params.recent_runs:
        return []
    if reference.span < timedelta(days=params.tail_min_days):
        return []  # a day-to-day difference is known only once that many days were seen
    state = Cusums.of(inputs.cusums.get(NAME))
    if told(inputs):
        # End-to-end's spread over its own median follows the mix and the level, and this
        # vantage's reference predates the change another alert told: what it would add is
        # that change again. Its evidence starts afresh (the load phase's ratio over the
        # load phase's own median does not move with the mix: it keeps judging).
        state.scores[0], state.runs[0] = [0.0] * MEMBERS, 0
        inputs.cusums[NAME] = state.values()
    allowed = MEMBER_RATIOS >= params.tail_min_ratio - 1e-9
    found = []
    for index, name in enumerate(_names(reference.tail)):
        if name is None:
            continue
        scores = np.where(allowed, np.asarray(state.scores[index]), -np.inf)
        best = int(np.argmax(scores))
        since = min(max(state.runs[index], params.recent_runs), ONSET_WINDOWS * params.recent_runs)
        pooled = index == 1 and state.vantages > 1
        found.append(
            tail_finding(
                float(scores[best]),
                best,
                inputs.onset(since),
                reference.tail.channels[name],
                params.tail_threshold if index else params.tail_threshold_end_to_end,
                state.vantages if index == 1 else 1,
                "service" if pooled else None,
            )
        )
    if len(found) == 2 and float(found[1].numbers["cusum"]) >= params.tail_threshold / 2:
        # The load phase's tail explains the end-to-end one: one story, told once.
        found[0] = Finding(Signal.HOLD, found[0].numbers, scope=found[0].scope)
    if len(found) == 2 and found[1].scope is None:
        # One vantage: one alert for both channels, the one nearer its threshold speaks.
        found = [max(found, key=lambda f: (f.signal.value == "hit", _nearness(f)))]
    return found


# The alerts that tell a change of the mix or the level at a vantage.
TELLING = ("dominant_shift", "level_shift")


def told(inputs: Inputs) -> bool:
    """A leader change or a level shift is active at this vantage (or for the service)."""
    return inputs.dominant_open or any(kind in TELLING for kind, _ in inputs.active)


def _nearness(finding: Finding) -> float:
    return float(finding.numbers["cusum"]) / float(finding.numbers["threshold"])


def tail_finding(
    score: float,
    best: int,
    recent: Sequence[RunData],
    channel: Channel,
    threshold: float,
    vantages: int,
    scope: str | None,
) -> Finding:
    """Hit when the channel's CUSUM (its best member's) reaches the threshold; clear under
    half of it. ``recent``: the runs since the CUSUM left 0, for the sentence."""
    numbers: dict[str, Any] = {
        "channel": channel.name,
        "cusum": round(score, 2),
        "threshold": threshold,
        "vantages_pooled": vantages,
    }
    if score < threshold / 2:
        return Finding(Signal.CLEAR, numbers, scope=scope)
    found = shape(best, recent, channel)
    if found is not None:
        numbers |= {
            "quantile": found.quantile,
            "inflation": found.inflation,
            "recent_share_pct": round(100 * found.recent_share, 2),
            "reference_share_pct": round(100 * found.reference_share, 2),
            "recent_ratio": round(found.recent_ratio, 2),
            "reference_ratio": round(found.reference_ratio, 2),
            "samples": found.samples,
            "recent_ms": round(found.recent_ms, 1),
            "reference_ms": round(found.reference_ms, 1),
        }
    # A tail heavier only against a body that shrank (generation collapsed) is no slower.
    longer = found is None or found.recent_ms > found.reference_ms
    signal = Signal.HIT if score >= threshold and longer else Signal.HOLD
    return Finding(signal, numbers, scope=scope)


def sentence(identity: Named, n: Mapping[str, Any]) -> str:
    if "channel" not in n:  # an alert stored before the tail was binned
        return f"tail got heavier on {identity.target}"
    what = "end-to-end" if n["channel"] == TOTAL else n["channel"]
    if "quantile" not in n:
        return f"{what} tail got heavier on {identity.target} (CUSUM {n['cusum']:g})"
    q, usual = n["quantile"], max(float(n["reference_ratio"]), 1e-9)
    pooled = f", {n['vantages_pooled']} vantages pooled" if n["vantages_pooled"] > 1 else ""
    return (
        f"{what} {q} is {n['recent_ratio'] / usual:.1f}× its usual over the run median on"
        f" {identity.target} ({n['recent_ratio']:g}× the median, usually {usual:g}×):"
        f" {n['recent_share_pct']:g} % of samples beyond the usual {q}, against"
        f" {n['reference_share_pct']:g} % ({q} {n['reference_ms']:g} → {n['recent_ms']:g} ms;"
        f" {n['samples']} samples{pooled})"
    )


def current(identity: Named, n: Mapping[str, Any]) -> str:
    """The tail now: its share beyond the usual quantile where it was judged, else how far
    the CUSUM is."""
    if "quantile" in n:
        return f"{n['recent_share_pct']:g} % beyond the usual {n['quantile']}"
    return f"CUSUM {n.get('cusum', 0):g} of {n.get('threshold', 0):g}"


def reset(memory: Carrying) -> None:
    """An episode ended: the evidence for it is spent."""
    memory.cusums.pop(NAME, None)


DETECTOR = Detector(
    name=NAME,
    summary="a tail got heavier: more samples far above their run's median than at these hours",
    sentence=sentence,
    judge=judge,
    confirm=lambda _params: 1,  # the threshold is calibrated for the CUSUM alone
    on_resolve=reset,
    current=current,
)
