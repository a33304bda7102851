"""What the evaluator remembers between runs, as plain values: each (target, vantage)'s
``DetectorMemory``, and a ``Snapshot`` of one target's part of the whole memory (what an
evaluation of that target can change), taken so that an evaluation that failed to commit
can be undone (``Evaluator.snapshot`` and ``Evaluator.restore``). ``EvaluatorView`` is
what the detectors' side (app.alerts.pervantage, app.alerts.crossvantage) reads of it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

import numpy as np

from app.alerts.identity import Alert, Identity
from app.alerts.state import Cooling
from app.analysis import detectors as d
from app.analysis.slo import MissLedger

if TYPE_CHECKING:
    from app.alerts.objectiveledgers import ObjectiveLedgers
from app.analysis.tail import TailState


@dataclass
class DetectorMemory:
    """The detectors' memory of one target seen from one vantage."""

    tail: TailState = field(default_factory=TailState)
    last_run: str | None = None
    reference: d.Reference | None = None
    # With no reference: not asked again before then (app.alerts.references); never stored.
    reference_wait: datetime | None = None
    rebase_at: datetime | None = None
    # Periods inside alerts that fired: kept out of the reference.
    excluded: list[tuple[datetime, datetime | None]] = field(default_factory=list)
    # Numbers a detector carries from run to run (a CUSUM's height, its run count), under
    # the detector's name; stored and read back with the rest (detector_state.cusums).
    cusums: dict[str, list[float]] = field(default_factory=dict)
    # Derived from the history's run counts, rebuilt with the reference (so a run flushed
    # late from a spool counts from the next rebuild on), never stored.
    misses: MissLedger | None = None
    misses_built_at: datetime | None = None
    # The same for each objective of ``alerts.objectives`` (app.alerts.objectiveledgers),
    # rebuilt with the misses and whenever the objectives change.
    objectives: ObjectiveLedgers | None = None

    def copy(self) -> DetectorMemory:
        """A copy that an evaluation's changes leave as it is. The miss ledger is shared:
        the run it may have taken is stored whether the evaluation commits or not."""
        return replace(
            self,
            excluded=list(self.excluded),
            tail=replace(self.tail),
            cusums={name: list(values) for name, values in self.cusums.items()},
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One target's memory, copied: its open alerts and those held back from firing
    again (by identity), its vantages' ``DetectorMemory`` (by vantage), and the last
    round of its vantages combined (each vantage's run id; None: none yet)."""

    target: str
    alerts: dict[Identity, Alert]
    cooling: dict[Identity, Cooling]
    memories: dict[str, DetectorMemory]
    last_round: dict[str, str] | None

    @classmethod
    def of(
        cls,
        target: str,
        alerts: Mapping[Identity, Alert],
        cooling: Mapping[Identity, Cooling],
        memories: Mapping[str, DetectorMemory],
        last_round: Mapping[str, str] | None,
    ) -> Snapshot:
        """``target``'s part, copied: the alerts and holds whose identity names it, and
        its vantages' memories and last round as given."""
        return cls(
            target,
            {i: copy.deepcopy(a) for i, a in alerts.items() if i.target == target},
            {i: replace(c) for i, c in cooling.items() if i.target == target},
            {vantage: memory.copy() for vantage, memory in memories.items()},
            None if last_round is None else dict(last_round),
        )

    def copy(self) -> Snapshot:
        """Another copy, so that one snapshot can be put back more than once."""
        return Snapshot.of(self.target, self.alerts, self.cooling, self.memories, self.last_round)


class EvaluatorView(Protocol):
    """What a judgement of a target reads of the evaluator, handed in with each call
    (app.alerts.evaluate's ``Evaluator`` is one)."""

    @property
    def alerts(self) -> Mapping[Identity, Alert]:
        """The open alerts, by identity."""
        ...

    def memory(self, target: str, vantage: str) -> DetectorMemory:
        """The detectors' memory of ``target`` at ``vantage``."""
        ...

    def rng(self, target: str) -> np.random.Generator:
        """``target``'s own random numbers."""
        ...
