"""What the generator knows and the scorer needs: targets, events, alerts, as JSON.

An *event* is a change a detector should report: its kind, target, vantage (None: the
change is on the service, so any vantage will do), when it started, and the window in
which an alert counts. Events of one *group* are alternatives (the edge switch may show
as missed deadlines or as a new leader): detecting any of them detects the group.
``accept`` lists the alert kinds that detect it (``*``: any); ``tolerate`` lists kinds
that are true statements about the change without being the one asked for (a mix that
moved while its leader changed): they neither detect it nor count as false alarms.
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

    def accepts(self, kind: str) -> bool:
        return ANY_KIND in self.accept or kind in self.accept

    def tolerates(self, kind: str) -> bool:
        return kind in self.tolerate

    @property
    def tolerance(self) -> tuple[datetime, datetime]:
        return self.tolerate_window or self.window


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
    )


def write_labels(labels: Labels, path: Path) -> None:
    path.write_text(json.dumps(labels.to_json(), indent=2) + "\n")


def read_labels(path: Path) -> Labels:
    return Labels.from_json(json.loads(path.read_text()))


@dataclass(frozen=True, slots=True)
class Alert:
    """One firing alert, from phasewatch's backtest or from a baseline."""

    kind: str
    target: str
    vantage: str | None
    at: datetime
    scope: str | None = None
    summary: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "alert": self.kind,
            "state": "firing",
            "target": self.target,
            "vantage": self.vantage,
            "scope": self.scope,
            "at": iso(self.at),
            "summary": self.summary,
        }


def alerts_from_jsonl(lines: Iterable[str], episodes: bool = True) -> Iterator[Alert]:
    """The firing alerts among backtest output lines; other states and non-JSON are skipped.

    With ``episodes``, an alert that goes firing → recovering → firing again (the same
    ``alert_id``: it never resolved, nobody is told twice) fires once; a resolved alert
    that fires again is a new episode, a new id, and counts again.
    """
    seen: set[str] = set()
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        raw = json.loads(line)
        if raw.get("state", "firing") != "firing":
            continue
        episode = raw.get("alert_id")
        if episodes and episode is not None:
            if episode in seen:
                continue
            seen.add(episode)
        yield Alert(
            kind=str(raw["alert"]),
            target=str(raw["target"]),
            vantage=raw.get("vantage"),
            at=parse_time(str(raw["at"])),
            scope=raw.get("scope"),
            summary=str(raw.get("summary", "")),
        )


def write_alerts(alerts: Iterable[Alert], out: TextIO) -> None:
    for alert in alerts:
        out.write(json.dumps(alert.to_json()) + "\n")
