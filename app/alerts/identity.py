"""What an alert is: its stable identity, its episode, and the transitions it goes through."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from app.alerts.state import Position, State
from app.analysis.detectors.registry import severity_of


@dataclass(frozen=True, slots=True)
class Identity:
    """One episode is one alert: the same identity while it is open.

    ``vantage`` is None for a change seen across vantages (scope ``service``); scope
    ``path`` is a change seen from one vantage only; ``vantage`` a single-vantage target.
    ``severity`` is the detector's own unless it raises alerts of two (deadline_miss: a
    critical page and a warning ticket are two alerts).
    """

    kind: str
    target: str
    vantage: str | None
    scope: str
    from_phase: str | None = None
    to_phase: str | None = None
    severity: str = ""

    def __post_init__(self) -> None:
        if not self.severity:
            object.__setattr__(self, "severity", severity_of(self.kind))

    def labels(self) -> dict[str, str]:
        """Stable labels (no numbers): what Alertmanager groups and deduplicates by."""
        labels = {
            "alertname": self.kind,
            "target": self.target,
            "scope": self.scope,
            "severity": self.severity,
        }
        optional = {
            "vantage": self.vantage,
            "from_phase": self.from_phase,
            "to_phase": self.to_phase,
        }
        return labels | {name: value for name, value in optional.items() if value is not None}


@dataclass
class Alert:
    id: str
    identity: Identity
    position: Position
    opened_at: datetime
    fired_at: datetime | None = None
    resolved_at: datetime | None = None
    summary: str = ""
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Transition:
    alert_id: str
    identity: Identity
    at: datetime
    before: State
    after: State
    summary: str
    numbers: dict[str, Any]
    acknowledged: bool = False

    @property
    def moved(self) -> bool:
        """A change of state (not a refresh, nor a streak that grew inside one state)."""
        return self.before is not self.after

    @property
    def refresh(self) -> bool:
        """Still firing: not a change of state, but Alertmanager wants to hear it again."""
        return self.before is State.FIRING and self.after is State.FIRING

    def to_json(self) -> dict[str, Any]:
        identity = self.identity
        return {
            "alert": identity.kind,
            "state": self.after.value,
            "previous": self.before.value,
            "target": identity.target,
            "vantage": identity.vantage,
            "scope": identity.scope,
            "from_phase": identity.from_phase,
            "to_phase": identity.to_phase,
            "severity": identity.severity,
            "at": self.at.isoformat().replace("+00:00", "Z"),
            "summary": self.summary,
            "numbers": self.numbers,
            "alert_id": self.alert_id,
        }
