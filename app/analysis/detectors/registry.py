"""The registry: every detector by name, in the order they are evaluated and listed."""

from __future__ import annotations

from app.analysis.detectors import (
    composition,
    deadline,
    dominant,
    drift,
    failing,
    levelshift,
    objectiveslo,
    tailshift,
)
from app.analysis.detectors.base import Detector

DETECTORS: dict[str, Detector] = {
    module.DETECTOR.name: module.DETECTOR
    for module in (dominant, tailshift, levelshift, deadline, composition, failing, drift)
} | {detector.name: detector for detector in objectiveslo.DETECTORS}


def default_enabled() -> tuple[str, ...]:
    return tuple(name for name, detector in DETECTORS.items() if detector.enabled)


def severity_of(kind: str) -> str:
    """A kind's own severity (a detector's finding may name another: deadline_miss's
    ticket); an unknown kind — a row from an older version — is critical."""
    detector = DETECTORS.get(kind)
    return detector.severity if detector is not None else "critical"
