"""What-if: a target's measured samples, changed phase by phase, resampled run by run.

Pure: plain arrays in, plain values out; the store loads the samples
(``app.store.reads.whatifsamples``).
See docs/whatif.md.
"""

from app.analysis.whatif.changes import (
    Change,
    ChangeError,
    ColdStarts,
    Deadline,
    ScalePhase,
    SetPhase,
    TakePhase,
    changes_from_json,
    changes_to_json,
    parse_changes,
)
from app.analysis.whatif.levers import Lever, LeverObjective, levers, levers_to_json
from app.analysis.whatif.objectivelevers import ObjectiveLevers, objective_levers
from app.analysis.whatif.objectiveshares import ObjectiveOutcome
from app.analysis.whatif.outcome import Bound, EndToEnd, Prediction
from app.analysis.whatif.predict import predict
from app.analysis.whatif.resample import Interval
from app.analysis.whatif.samples import SampleSet, sample_set

__all__ = [
    "Bound",
    "Change",
    "ChangeError",
    "ColdStarts",
    "Deadline",
    "Interval",
    "Lever",
    "LeverObjective",
    "ObjectiveLevers",
    "ObjectiveOutcome",
    "EndToEnd",
    "Prediction",
    "SampleSet",
    "ScalePhase",
    "SetPhase",
    "TakePhase",
    "changes_from_json",
    "changes_to_json",
    "levers",
    "levers_to_json",
    "objective_levers",
    "parse_changes",
    "predict",
    "sample_set",
]
