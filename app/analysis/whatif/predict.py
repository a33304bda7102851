"""``predict``: a target's measured samples, changed, resampled run by run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from app.analysis.whatif.apply import Applied, apply, deadline_of, settle
from app.analysis.whatif.changes import Change, ColdStarts, TakePhase
from app.analysis.whatif.outcome import Bound, EndToEnd, Prediction, bound, end_to_end
from app.analysis.whatif.resample import run_counts
from app.analysis.whatif.samples import SampleSet

RESAMPLES = 400


def predict(
    samples: SampleSet,
    changes: Sequence[Change],
    *,
    donors: Mapping[str, SampleSet] | None = None,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> Prediction:
    """Before and after ``changes``; both sides use the same run resamples (paired)."""
    if samples.n == 0:
        raise ValueError("no samples to predict from")
    rng = np.random.default_rng(seed)
    counts = run_counts(samples.runs, resamples, rng)
    applied = apply(samples, changes, donors or {}, rng)
    before = _before(samples, counts, deadline_of(samples, changes))
    after_settled = settle(applied.ms, applied.censored, applied.deadline_ms)
    after = end_to_end(
        samples.phases, after_settled, applied.run, counts, applied.deadline_ms, samples.n
    )
    optimistic = _optimistic(applied)
    return Prediction(
        before, after, tuple(changes), _notes(samples, changes, optimistic), optimistic
    )


def _before(samples: SampleSet, counts: np.ndarray, deadline_ms: float | None) -> EndToEnd:
    """As measured; its misses counted against the deadline the changes set, if any, so
    that both sides are judged by one deadline."""
    settled = settle(samples.ms, samples.censored, samples.deadline_ms)
    if deadline_ms is not None:
        settled.miss[:] |= samples.totals > deadline_ms
    return end_to_end(samples.phases, settled, samples.run, counts, deadline_ms, samples.n)


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
