"""The detectors: from windows of runs to a signal (hit, hold, clear) and the numbers
behind it — one module per detector, a dict as the registry (as app/notifiers).

Pure: runs, references, parameters and a random generator in; no clock but the ``now``
they are given, no database. Every threshold is a field of ``DetectorParams`` and can be
set per target (``alerts:`` in the targets file); docs/detection.md says why each default
is what it is.
"""

from app.analysis.detectors.base import (
    CRITICAL,
    SERVER_SIDE,
    WARNING,
    Detector,
    Finding,
    Inputs,
    Reference,
    Signal,
)
from app.analysis.detectors.composition import CompositionReference, composition_finding
from app.analysis.detectors.dominant import (
    challenger,
    dominant_finding,
    dominant_resolution,
    fast_dominant,
    leads_by,
)
from app.analysis.detectors.failing import failing_finding
from app.analysis.detectors.params import BurnWindowParams, DetectorParams, SloParams
from app.analysis.detectors.registry import DETECTORS, default_enabled, severity_of
from app.analysis.detectors.tailshift import advance_tail, tail_finding

__all__ = [
    "CRITICAL",
    "DETECTORS",
    "SERVER_SIDE",
    "WARNING",
    "BurnWindowParams",
    "CompositionReference",
    "Detector",
    "DetectorParams",
    "Finding",
    "Inputs",
    "Reference",
    "Signal",
    "SloParams",
    "advance_tail",
    "challenger",
    "composition_finding",
    "default_enabled",
    "dominant_finding",
    "dominant_resolution",
    "failing_finding",
    "fast_dominant",
    "leads_by",
    "severity_of",
    "tail_finding",
]
