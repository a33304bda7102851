"""What the generator knows and the scorer needs: targets, events, alerts, as JSON.

An *event* is a change a detector should report: its kind, target, vantage (None: the
change is on the service, so any vantage will do), when it started, and the window in
which an alert counts. Events of one *group* are alternatives (the edge switch may show
as missed deadlines or as a new leader): detecting any of them detects the group.
``accept`` lists the alert kinds that detect it (``*``: any); ``tolerate`` lists kinds
that are true statements about the change without being the one asked for (a mix that
moved while its leader changed): they neither detect it nor count as false alarms.
An ``optional`` event is not counted in recall: alerts it accepts are allowed, not
needed (``probe_failing`` while the probe host fails). An ``slo`` event is an SLO
violation episode, scored as SLO alerts are (bench/detection/score.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

ANY_KIND = "*"


def iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat(timespec="seconds").removesuffix("+00:00") + "Z"


def parse_time(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TargetInfo:
    name: str
    kind: str  # openai | http
    vantages: tuple[str, ...]
    deadline_ms: float | None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Event:
    id: str
    group: str
    kind: str
    target: str
    vantage: str | None
    start: datetime
    window: tuple[datetime, datetime]
    abrupt: bool
    accept: tuple[str, ...]
    tolerate: tuple[str, ...] = ()
    tolerate_window: tuple[datetime, datetime] | None = None
    note: str = ""
    optional: bool = False
    slo: bool = False
    end: datetime | None = None  # an SLO episode's last violating run

    def accepts(self, kind: str) -> bool:
        return ANY_KIND in self.accept or kind in self.accept

    def tolerates(self, kind: str) -> bool:
        return kind in self.tolerate

    @property
    def tolerance(self) -> tuple[datetime, datetime]:
        return self.tolerate_window or self.window

    @property
    def extent(self) -> tuple[datetime, datetime]:
        """Where an SLO alert belongs to this episode: its start to its end or window's."""
        return self.start, max(self.end or self.window[1], self.window[1])


@dataclass(frozen=True, slots=True)
class Labels:
    scenario: str
    description: str
    start: datetime
    end: datetime
    interval_s: float
    samples_per_run: int
    targets: tuple[TargetInfo, ...]
    events: tuple[Event, ...]
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def target_months(self) -> float:
        """Targets × days of data / 30: the denominator of false alarms per target-month."""
        days = (self.end - self.start).total_seconds() / 86400
        return len(self.targets) * days / 30

    def to_json(self) -> dict[str, Any]:
        raw = asdict(self)
        raw["start"], raw["end"] = iso(self.start), iso(self.end)
        raw["events"] = [_event_json(event) for event in self.events]
        return raw

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Labels:
        return cls(
            scenario=raw["scenario"],
            description=raw["description"],
            start=parse_time(raw["start"]),
            end=parse_time(raw["end"]),
            interval_s=float(raw["interval_s"]),
            samples_per_run=int(raw["samples_per_run"]),
            targets=tuple(
                TargetInfo(**{**t, "vantages": tuple(t["vantages"])}) for t in raw["targets"]
            ),
            events=tuple(_event_from_json(e) for e in raw["events"]),
            params=raw.get("params", {}),
        )


def _event_json(event: Event) -> dict[str, Any]:
    raw = asdict(event)
    raw["start"] = iso(event.start)
    raw["window"] = [iso(t) for t in event.window]
    raw["tolerate_window"] = (
        [iso(t) for t in event.tolerate_window] if event.tolerate_window else None
    )
    raw["end"] = iso(event.end) if event.end else None
    return raw


def _event_from_json(raw: dict[str, Any]) -> Event:
    tolerance = raw.get("tolerate_window")
    return Event(
        id=raw["id"],
        group=raw["group"],
        kind=raw["kind"],
        target=raw["target"],
        vantage=raw["vantage"],
        start=parse_time(raw["start"]),
        window=(parse_time(raw["window"][0]), parse_time(raw["window"][1])),
        abrupt=bool(raw["abrupt"]),
        accept=tuple(raw["accept"]),
        tolerate=tuple(raw.get("tolerate", ())),
        tolerate_window=(parse_time(tolerance[0]), parse_time(tolerance[1])) if tolerance else None,
        note=raw.get("note", ""),
        optional=bool(raw.get("optional", False)),
        slo=bool(raw.get("slo", False)),
        end=parse_time(raw["end"]) if raw.get("end") else None,
    )


def write_labels(labels: Labels, path: Path) -> None:
    path.write_text(json.dumps(labels.to_json(), indent=2) + "\n")


def read_labels(path: Path) -> Labels:
    return Labels.from_json(json.loads(path.read_text()))


AlertKey = tuple[str, str, str | None, str | None, str | None, str | None, str | None]


@dataclass(frozen=True, slots=True)
class Alert:
    """One alert transition (firing, or resolved), from phasewatch's backtest or a baseline."""

    kind: str
    target: str
    vantage: str | None
    at: datetime
    scope: str | None = None
    summary: str = ""
    severity: str | None = None
    from_phase: str | None = None
    to_phase: str | None = None
    state: str = "firing"
    alert_id: str | None = None

    @property
    def key(self) -> AlertKey:
        """What makes two alerts the same alert (a flap is the same key firing again)."""
        return (
            self.kind,
            self.target,
            self.vantage,
            self.scope,
            self.from_phase,
            self.to_phase,
            self.severity,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "alert": self.kind,
            "state": self.state,
            "target": self.target,
            "vantage": self.vantage,
            "scope": self.scope,
            "from_phase": self.from_phase,
            "to_phase": self.to_phase,
            "severity": self.severity,
            "at": iso(self.at),
            "summary": self.summary,
            "alert_id": self.alert_id,
        }


def transitions_from_jsonl(lines: Iterable[str]) -> Iterator[Alert]:
    """Every firing and resolved line of backtest output; other states, non-JSON skipped."""
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        raw = json.loads(line)
        state = raw.get("state", "firing")
        if state not in ("firing", "resolved"):
            continue
        yield Alert(
            kind=str(raw["alert"]),
            target=str(raw["target"]),
            vantage=raw.get("vantage"),
            at=parse_time(str(raw["at"])),
            scope=raw.get("scope"),
            summary=str(raw.get("summary", "")),
            severity=raw.get("severity"),
            from_phase=raw.get("from_phase"),
            to_phase=raw.get("to_phase"),
            state=state,
            alert_id=raw.get("alert_id"),
        )


def firing(alerts: Iterable[Alert], episodes: bool = True) -> Iterator[Alert]:
    """The firing alerts. With ``episodes``, an alert that goes firing → recovering →
    firing again (the same ``alert_id``: it never resolved, nobody is told twice) fires
    once; a resolved alert that fires again is a new episode, a new id, and counts again.
    """
    seen: set[str] = set()
    for alert in alerts:
        if alert.state != "firing":
            continue
        if episodes and alert.alert_id is not None:
            if alert.alert_id in seen:
                continue
            seen.add(alert.alert_id)
        yield alert


def alerts_from_jsonl(lines: Iterable[str], episodes: bool = True) -> Iterator[Alert]:
    """The firing alerts among backtest output lines (see ``firing``)."""
    return firing(transitions_from_jsonl(lines), episodes)


def write_alerts(alerts: Iterable[Alert], out: TextIO) -> None:
    for alert in alerts:
        out.write(json.dumps(alert.to_json()) + "\n")
