"""``probe_failing`` — nothing gets through: no answer at all for several runs."""

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
    """No successful sample in the last ``failing_runs`` runs."""
    if len(last) < params.failing_runs:
        return Finding(Signal.HOLD)
    window = last[-params.failing_runs :]
    numbers = {"runs": len(window), "failed_samples": sum(run.failed for run in window)}
    if all(run.ok == 0 for run in window):
        return Finding(Signal.HIT, numbers)
    return Finding(Signal.CLEAR if window[-1].ok > 0 else Signal.HOLD, numbers)


def sentence(identity: Named, n: dict[str, Any]) -> str:
    return f"probe failing on {identity.target}: no successful sample in {n['runs']} runs"


DETECTOR = Detector(
    name="probe_failing",
    summary="nothing gets through: no successful sample in the last runs",
    sentence=sentence,
    judge=judge,
)
