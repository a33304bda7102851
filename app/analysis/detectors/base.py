"""What every detector shares: the signal it gives, the finding behind it, what it reads,
and the descriptor that names its facts in one place.

A detector is one module in this package with one ``DETECTOR``; the registry
(``registry.py``) is a dict of them. The evaluator (app/alerts/evaluate.py) asks the
registry which detectors run, how many confirmations each needs, how severe its alerts
are, which sentence explains them and what to reset when one resolves — it knows no
detector by name except ``dominant_shift``, the one judged across vantages, and
``composition_shift``, whose part of the reference is built only for a target that runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from app.analysis.dominance import Mix
from app.analysis.leadspread import LogSpread
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger
from app.analysis.tail import TailReference, TailState

if TYPE_CHECKING:
    from app.analysis.detectors.composition import CompositionReference
    from app.analysis.detectors.params import DetectorParams
    from app.analysis.drift import Baseline
    from app.analysis.level import LevelReference

# Phases the server spends: a change there should be seen from every vantage.
SERVER_SIDE = frozenset({"queue", "prefill", "generation", "server"})
CRITICAL, WARNING = "critical", "warning"


class Signal(StrEnum):
    """What one evaluation says of an alert's condition (the state machine's input)."""

    HIT = "hit"  # the trigger condition holds
    HOLD = "hold"  # neither: keep the alert where it is
    CLEAR = "clear"  # the resolve condition holds (stricter than "no hit": hysteresis)
    ACK = "ack"  # a person accepted the new normal


@dataclass(frozen=True, slots=True)
class Finding:
    signal: Signal
    numbers: dict[str, Any] = field(default_factory=dict)
    # A detector with alerts of two severities (deadline_miss: page and ticket) says which
    # one this finding is about; None: the detector's own severity.
    severity: str | None = None
    # "service": judged on the target's vantages pooled (one alert, no vantage); None: this
    # vantage's own.
    scope: str | None = None
    # Its own confirmation: the evidence already spans runs at every vantage (the pooled
    # lane's newest runs), so the first hit fires rather than waiting ``confirm`` rounds.
    confirmed: bool = False


@dataclass(frozen=True, slots=True)
class Reference:
    """A vantage's normal, built from the reference window (frozen between rebuilds)."""

    built_at: datetime
    runs: int
    span: timedelta  # from its first run to its last
    mix: Mix
    tail: TailReference | None
    composition: CompositionReference | None  # built only for a target that runs it
    # The runs' log-median spread, for dominant_shift's lead (None: too few runs to say).
    spread: LogSpread | None = None
    # A profile baseline_drift may freeze: built only from a full week, for a target that runs it.
    drift: Baseline | None = None
    level: LevelReference | None = None  # each hour's log medians (level_shift, pooling)


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a per-vantage detector may read after a run at one (target, vantage)."""

    window: Sequence[RunData]  # the recent window, newest last
    recent: Sequence[RunData]  # the newest runs, at least as many as any detector needs
    reference: Reference | None  # None: too little history to compare against
    params: DetectorParams
    rng: np.random.Generator
    now: datetime
    tail: TailState
    onset: Callable[[int], Sequence[RunData]]  # the newest ``n`` runs, from the history
    misses: MissLedger
    dominant_open: bool  # a dominant_shift is active here: composition stays quiet
    # (kind, severity) firing here now, the service's alerts (no vantage) with them
    active: frozenset[tuple[str, str]] = frozenset()
    # The vantage's DetectorMemory.cusums: a detector reads and writes its own entry.
    cusums: dict[str, list[float]] = field(default_factory=dict)
    rebase_at: datetime | None = None  # a change was acknowledged then (DetectorMemory's)
    # Each objective's ledger (alerts.objectives), by metric: the *_slo detectors' counts.
    objectives: Mapping[str, MissLedger] = field(default_factory=dict)


class Carrying(Protocol):
    """What an ended episode may reset of a vantage's memory (app.alerts.memory)."""

    cusums: dict[str, list[float]]


class Named(Protocol):
    """What a sentence may say of an alert's identity."""

    @property
    def target(self) -> str: ...
    @property
    def from_phase(self) -> str | None: ...
    @property
    def to_phase(self) -> str | None: ...


def _confirm(params: DetectorParams) -> int:
    return params.confirm


@dataclass(frozen=True, slots=True)
class Detector:
    """One detector's facts. ``judge`` is None for the one judged across vantages."""

    name: str
    summary: str  # one line for the docs
    sentence: Callable[[Named, dict[str, Any]], str]  # explains an alert from its numbers
    judge: Callable[[Inputs], list[Finding]] | None
    severity: str = CRITICAL
    enabled: bool = True  # runs unless a target's ``enabled`` leaves it out
    confirm: Callable[[DetectorParams], int] = _confirm  # consecutive hits before firing
    on_resolve: Callable[[Carrying], None] | None = None  # what an ended episode resets
    # A critical alert's runs are kept out of the reference; a warning is a hint only.
    excludes_runs: bool = True
    # Its alert tells of a lasting change (a new leader, a new level): once resolved, the
    # vantages' references start again from it, as on an acknowledgement...
    rebases: bool = False
    # ...if it was told this long. A leader change that lasts is told for days, so one over
    # within hours was a burst or a drift's first hours, and re-basing on it would leave
    # baseline_drift nothing to drift from; a level shift is told for its window's runs
    # only, then resolves, and must re-base or it is told again.
    rebase_after: timedelta = timedelta(0)
    # Said after the sentence and where it was seen ("… at 2/2 vantages; queue leads now").
    aside: Callable[[Named, dict[str, Any]], str] | None = None
    # A firing alert's sentence keeps the numbers of its firing; this says what they read
    # now, from a later evaluation's numbers ("…; now generation 7.9 %"). Empty: nothing.
    current: Callable[[Named, dict[str, Any]], str] | None = None


def ci(low: Any, high: Any, unit: str) -> str:
    """``, 95 % CI 1–2 ms`` for a sentence, or nothing when a bound is missing."""
    if low is None or high is None:
        return ""
    return f", 95 % CI {low:g}–{high:g}{unit}"
