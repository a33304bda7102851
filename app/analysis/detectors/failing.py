"""``probe_failing`` — nothing gets through: no answer at all for several runs.

"No answer" is a failed request: an error (refused, reset, TLS, a malformed stream) or an
HTTP error status. A sample cut at the deadline is a late answer, not a missing one: it is
the deadline SLO's (``deadline_miss``), so a target that answers every request, slowly,
raises that alert and not this one beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from app.analysis.detectors.base import Detector, Finding, Inputs, Named, Signal
from app.analysis.runs import RunData

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams


def judge(inputs: Inputs) -> list[Finding]:
    return [failing_finding(inputs.recent, inputs.params)]


def failing_finding(last: Sequence[RunData], params: DetectorParams) -> Finding:
    """Every request of the last ``failing_runs`` runs failed."""
    if len(last) < params.failing_runs:
        return Finding(Signal.HOLD)
    window = last[-params.failing_runs :]
    numbers = {"runs": len(window), "failed_samples": sum(run.failed for run in window)}
    if not any(answered(run) for run in window):
        return Finding(Signal.HIT, numbers)
    return Finding(Signal.CLEAR if answered(window[-1]) else Signal.HOLD, numbers)


def answered(run: RunData) -> bool:
    """Some request got an answer: in time (ok) or past the deadline (censored)."""
    return run.timed > 0


def sentence(identity: Named, n: dict[str, Any]) -> str:
    return f"probe failing on {identity.target}: every request failed in {n['runs']} runs"


DETECTOR = Detector(
    name="probe_failing",
    summary="nothing gets through: every request of the last runs failed (no answer)",
    sentence=sentence,
    judge=judge,
)
