"""A streamed answer's rhythm after a change: its TPOT and its longest stall follow the
generation's pace (docs/whatif.md#a-streams-rhythm).

A change to the generation phase scales a sample's ``tpot_ms`` and ``stall_ms`` by the
factor its generation time moved (after over before, sample by sample): the tokens are the
same ones, arriving at another pace. Whatever sets the generation — scaled, set to a value,
taken from another target — moves them alike: the answer keeps this target's length and
takes the new generation time's pace. A change to any other phase leaves them as measured.
A sample with no generation time keeps its rhythm (there is no pace to scale).

Judged as the objectives judge them (app.analysis.objectives): a sample without the value
is not counted, and a sample that misses the deadline has no TPOT (only an answer that
completed has one) while its stall is the one it streamed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from app.analysis.objectives import Objective, Reading
from app.analysis.whatif.samples import RHYTHM, Rhythm

GENERATION = "generation"
COMPLETED_ONLY = frozenset({"tpot_ms"})  # None for an answer cut before its end

Floats = NDArray[np.float64]
Bools = NDArray[np.bool_]


def rhythm_of(objectives: Sequence[Objective]) -> tuple[str, ...]:
    """The rhythm values ``objectives`` judge: what the samples must carry (none for most
    targets, whose what-if then reads nothing more)."""
    return tuple(name for name in RHYTHM if any(o.metric == name for o in objectives))


def scaled(
    phases: tuple[str, ...], before_ms: Floats, after_ms: Floats, rhythm: Rhythm, copies: int = 1
) -> dict[str, Floats]:
    """``rhythm`` (one value a measured sample, rows of ``before_ms``) for each row of
    ``after_ms`` (``copies`` rows a sample, in order), at the changed generation's pace."""
    if not rhythm:
        return {}
    factor = np.ones(len(after_ms))
    if GENERATION in phases:
        column = phases.index(GENERATION)
        before = np.repeat(before_ms[:, column], copies)
        after = after_ms[:, column]
        factor = np.divide(after, before, out=factor, where=before > 0)
    return {name: np.repeat(values, copies) * factor for name, values in rhythm.items()}


def readings(rhythm: Mapping[str, Floats], miss: Bools) -> dict[str, Reading]:
    """Each rhythm value as the objectives read it: exact (never a lower bound), NaN where
    the sample has none; a missed sample's TPOT is none."""
    found: dict[str, Reading] = {}
    for name, values in rhythm.items():
        dropped = miss if name in COMPLETED_ONLY else np.zeros_like(miss)
        found[name] = (np.where(dropped, np.nan, values), np.zeros_like(miss))
    return found
