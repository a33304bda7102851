"""``predict``: a target's measured samples, changed, resampled run by run.

Two random streams of one seed: the changes' draws (cold starts, another target's phase)
come from ``default_rng(seed)``, as the API's curves draw them, and the run resamples from
a stream of their own, drawn in chunks (``resample.draws``) alongside.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from app.analysis.objectives import Objective
from app.analysis.whatif.apply import Applied, Settled, apply, deadline_of, settle
from app.analysis.whatif.changes import Change, ColdStarts, TakePhase
from app.analysis.whatif.objectiveshares import judged, outcomes, ratios, unpredicted
from app.analysis.whatif.outcome import Bound, Prediction, bound, end_to_end
from app.analysis.whatif.resample import CHUNK_CELLS, draws, spreads
from app.analysis.whatif.samples import SampleSet

RESAMPLES = 400
RESAMPLE_STREAM = 1  # the resamples' stream: default_rng((seed, RESAMPLE_STREAM))


def predict(
    samples: SampleSet,
    changes: Sequence[Change],
    *,
    donors: Mapping[str, SampleSet] | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
    cells: int = CHUNK_CELLS,
    objectives: Sequence[Objective] = (),
) -> Prediction:
    """Before and after ``changes``; both sides use the same run resamples (paired), drawn
    ``cells`` counts at a time (the answer is the same for any ``cells``)."""
    if samples.n == 0:
        raise ValueError("no samples to predict from")
    applied = apply(samples, changes, donors or {}, np.random.default_rng(seed))
    deadline_ms = deadline_of(samples, changes)
    settled = (
        _before(samples, deadline_ms),
        settle(applied.ms, applied.censored, applied.deadline_ms),
    )
    chunks = draws(samples.runs, resamples, (seed, RESAMPLE_STREAM), cells)
    sides = [
        (s.values, s.miss.astype(np.float64), run)
        for s, run in zip(settled, (samples.run, applied.run), strict=True)
    ]
    measured = (samples.n, samples.runs)
    verdicts = (
        judged(samples.phases, settled[0], objectives, samples.rhythm),
        judged(samples.phases, settled[1], objectives, applied.rhythm),
    )
    spread = spreads(chunks, sides, cells, [ratios(side) for side in verdicts])
    before, after = (
        end_to_end(samples.phases, side, found, deadline_ms, measured)
        for side, found in zip(settled, spread, strict=True)
    )
    optimistic = _optimistic(applied)
    notes = (*_notes(samples, changes, optimistic), *unpredicted(objectives, samples.rhythm))
    met = outcomes(verdicts, spread, objectives)
    return Prediction(before, after, tuple(changes), notes, optimistic, met)


def _before(samples: SampleSet, deadline_ms: float | None) -> Settled:
    """As measured; its misses counted against the deadline the changes set, if any, so
    that both sides are judged by one deadline."""
    settled = settle(samples.ms, samples.censored, samples.deadline_ms)
    if deadline_ms is not None:
        settled.miss[:] |= samples.totals > deadline_ms
    return settled


def _optimistic(applied: Applied) -> Bound | None:
    if not applied.censored.any():
        return None
    settled = settle(applied.ms, applied.censored, applied.deadline_ms, pessimistic=False)
    return bound(settled)


def _notes(
    samples: SampleSet, changes: Sequence[Change], optimistic: Bound | None
) -> tuple[str, ...]:
    notes = []
    cut = int(samples.censored.sum())
    if cut and optimistic is not None:
        notes.append(
            f"{cut} of {samples.n} samples were cut at the {samples.deadline_ms:g} ms deadline: "
            "what came after the cut is unknown, so after the change they still count as "
            "misses at the deadline; had each ended right after its known phases, p99 would be "
            f"{optimistic.p99_ms:.0f} ms and the miss rate {optimistic.miss_rate:.1%}"
        )
    if samples.runs < 2:
        notes.append("one run only: the intervals cannot show run-to-run variation")
    if any(isinstance(change, TakePhase) for change in changes):
        notes.append("a phase taken from elsewhere is drawn independently of the other phases")
    if any(isinstance(change, ColdStarts) for change in changes):
        notes.append("cold starts are added to that share of requests, chosen at random")
    return tuple(notes)
