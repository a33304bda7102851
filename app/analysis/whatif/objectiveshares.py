"""The what-if for the objectives (``alerts.objectives``): the share of timed samples
meeting each latency objective, and goodput, before and after the changes.

From the settled samples (``apply.settle``): ``end_to_end_ms`` is the end-to-end time (a
miss at the deadline is at least the deadline); ``ttft_ms`` the time of the phases before
the first token — connect, network, queue, prefill, or a whole answer's server phase
(for a streamed answer that is the first token mark; for a whole answer whose server said
how long it generated, it leaves that out, where the mark would not). A sample cut before
its first token has only a lower bound, as the objectives count it. ``tpot_ms`` and
``stall_ms`` are the samples' own, at the changed generation's pace (``rhythm``), where the
samples carry them (``SampleSet.rhythm``). Availability is not
predicted: the what-if's samples are the timed ones, and no change makes a failed request
answer. Goodput here is over the timed samples: not cut, and every latency objective met.

Each share has a 95 % interval from the same run resamples as the end-to-end's
(``resample.resampled_ratios``), and a latency objective its burn: the share missing it over
the share its target allows to miss (1: the budget spent exactly over the SLO's window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.analysis.objectives import AVAILABILITY, Objective, Reading
from app.analysis.whatif.apply import Settled
from app.analysis.whatif.resample import Interval, Ratio, Spread, interval
from app.analysis.whatif.rhythm import readings as rhythm_readings

BEFORE_TOKEN = ("connect", "network", "queue", "prefill", "server")
PREDICTED = ("end_to_end_ms", "ttft_ms")  # what ``readings_of`` reads from the phases


GOODPUT = "goodput"
Bools = NDArray[np.bool_]
Floats = NDArray[np.float64]
Judged = dict[str, tuple[Bools, Bools]]  # metric -> per sample: good, counted


@dataclass(frozen=True, slots=True)
class ObjectiveOutcome:
    metric: str  # an objective's, or "goodput"
    below_ms: float | None
    before: Interval | None  # the share meeting it; None: nothing counted
    after: Interval | None
    target: float | None = None  # the objective's share (None: goodput)

    def burn(self, met: Interval | None) -> Interval | None:
        """The share missing it over the share its target allows to miss (higher met,
        lower burn: the interval's ends swap)."""
        if met is None or self.target is None or self.target >= 1:
            return None
        allowed = 1 - self.target
        return Interval((1 - met.value) / allowed, (1 - met.hi) / allowed, (1 - met.lo) / allowed)

    def to_json(self) -> dict[str, Any]:
        sides = {"before": self.before, "after": self.after}
        found: dict[str, Any] = {"metric": self.metric, "below_ms": self.below_ms}
        found |= {"target": self.target}
        for name, met in sides.items():
            found[name] = None if met is None else met.value
            found[f"{name}_interval"] = None if met is None else [met.lo, met.hi]
        for name, met in sides.items():
            burn = self.burn(met)
            found[f"burn_{name}"] = None if burn is None else burn.to_json()
        return found


def readings_of(phases: tuple[str, ...], settled: Settled) -> dict[str, Reading]:
    columns = [i for i, name in enumerate(phases) if name in BEFORE_TOKEN]
    ttft = settled.phase_ms[:, columns].sum(axis=1)
    reached = np.isclose(ttft, settled.values) & settled.miss  # cut before its first token
    return {"end_to_end_ms": (settled.values, settled.miss), "ttft_ms": (ttft, reached)}


def judged(
    phases: tuple[str, ...],
    settled: Settled,
    objectives: Sequence[Objective],
    rhythm: Mapping[str, Floats] | None = None,
) -> Judged:
    """Per sample, each latency objective's good and counted samples (the objectives'
    rules: a lower bound counts only when it is at or past the bound; a sample without
    the value is not counted), and goodput's: every sample counted, good when not cut and
    every latency objective met. ``rhythm``: each settled row's TPOT and stall, if read."""
    reads = readings_of(phases, settled) | rhythm_readings(rhythm or {}, settled.miss)
    found: Judged = {}
    every = ~settled.miss
    for objective in objectives:
        reading = reads.get(objective.metric)
        if objective.metric == AVAILABILITY or reading is None or objective.below_ms is None:
            continue
        values, lower = reading
        known = ~np.isnan(values)  # NaN compares False: not good, and not counted
        good = known & ~lower & (values <= objective.below_ms)
        counted = known & (~lower | (values >= objective.below_ms))
        found[objective.metric] = (good, counted)
        every = every & good
    found[GOODPUT] = (every, np.ones_like(every))
    return found


def unpredicted(
    objectives: Sequence[Objective], rhythm: Mapping[str, Floats] | None = None
) -> tuple[str, ...]:
    """A note naming the latency objectives left unanswered — a stream's rhythm
    (``tpot_ms``, ``stall_ms``) when the samples were read without it — which goodput here
    leaves out; none otherwise."""
    answered = {*PREDICTED, *(rhythm or {}), AVAILABILITY}
    left = [o.metric for o in objectives if o.metric not in answered]
    if not left:
        return ()
    return (
        f"the {' and '.join(left)} objective{'s are' if len(left) > 1 else ' is'} not predicted"
        " (the samples were read without a stream's rhythm): goodput here counts"
        " only the objectives above",
    )


def shares(
    phases: tuple[str, ...],
    settled: Settled,
    objectives: Sequence[Objective],
    rhythm: Mapping[str, Floats] | None = None,
) -> dict[str, float | None]:
    """Each latency objective's share met, and goodput's, of ``settled``."""
    return {
        metric: _share(good, counted)
        for metric, (good, counted) in judged(phases, settled, objectives, rhythm).items()
    }


def _share(good: Bools, counted: Bools) -> float | None:
    n = int(np.count_nonzero(counted))
    return None if n == 0 else int(np.count_nonzero(good & counted)) / n


def ratios(found: Judged) -> list[Ratio]:
    """``found`` as the resampling takes it (``resample.spreads``' ratios), in its order."""
    return [(g.astype(np.float64), c.astype(np.float64)) for g, c in found.values()]


def outcomes(
    sides: tuple[Judged, Judged], spreads: Sequence[Spread], objectives: Sequence[Objective]
) -> tuple[ObjectiveOutcome, ...]:
    """Each side's shares with their intervals over ``spreads``' ratios (in ``sides``'
    order); none without objectives."""
    if not objectives:
        return ()
    by_metric = {o.metric: o for o in objectives}
    met = [_intervals(side, spread) for side, spread in zip(sides, spreads, strict=True)]
    return tuple(
        ObjectiveOutcome(
            metric,
            by_metric[metric].below_ms if metric in by_metric else None,
            met[0][metric],
            met[1].get(metric),
            by_metric[metric].target if metric in by_metric else None,
        )
        for metric in sides[0]
    )


def _intervals(side: Judged, spread: Spread) -> dict[str, Interval | None]:
    found: dict[str, Interval | None] = {}
    for column, (metric, (good, counted)) in enumerate(side.items()):
        value = _share(good, counted)
        resampled = spread.ratios[:, column] if spread.ratios.size else np.zeros(0)
        found[metric] = None if value is None else interval(value, resampled)
    return found
