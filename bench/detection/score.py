"""Score firing alerts against labels: recall, false alarms, delay, precision, F1.

An alert *detects* an event when it names the event's target, the event's vantage (any
vantage, or none, when the event names none), fires inside the event's window, and is of
a kind the event accepts (any kind with ``any_kind``: how baselines are scored). Events of
one group are alternatives: the group is detected when one of them is.

* recall = detected groups / groups
* false alarm = a firing alert that detects no event and is not tolerated by one (a kind
  the event lists under ``tolerate``, inside its tolerance window; never for any_kind);
  false alarms per target-month = false alarms / (targets × days of data / 30)
* delay (abrupt groups) = the run, counted from the change, of the first detecting alert:
  ⌊(at − start) / interval⌋ + 1, so an alert on the first changed run has delay 1
* precision = detected / (detected + false alarms); F1 = 2PR / (P + R)

Several alerts inside one window detect it once and cost nothing; every alert outside
every window costs one false alarm. *Optional* events are not counted in recall: the
alerts they accept are allowed, not needed.

SLO episodes (``slo`` events, one per violating (target, vantage) stretch) are scored as
SLO alerts are: the first ``deadline_miss`` per (target, vantage, severity) inside the
episode's extent belongs to it (and detects it when inside the window); **every further
firing of that (target, vantage, severity) inside the episode is a false alarm** (cause
``SLO re-fire``); a ``deadline_miss`` outside every episode is scored like any alert.

A *flap* is a firing of an alert key (kind, target, vantage, scope, from_phase,
to_phase, severity) within 24 h after an alert of the same key resolved; flaps are
counted beside false alarms (a flap may be either). False alarms are also sorted by
*cause*, to read, not to score: ``warm-up`` (the first two days of data), ``after a
change`` (after a labelled change on that target started: re-fires of a change the window
has closed on), ``SLO re-fire``, ``other``.

    .venv/bin/python -m bench.detection.score LABELS.json ALERTS.jsonl [--any-kind]
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from bench.detection.labels import (
    Alert,
    AlertKey,
    Event,
    Labels,
    firing,
    read_labels,
    transitions_from_jsonl,
)

WARM_UP = timedelta(days=2)
FLAP_WITHIN = timedelta(hours=24)
SLO_REFIRE = "SLO re-fire"
CAUSES = ("warm-up", "after a change", SLO_REFIRE, "other")


@dataclass(slots=True)
class Score:
    groups: int = 0
    detected: int = 0
    false_alarms: int = 0
    tolerated: int = 0
    alerts: int = 0
    target_months: float = 0.0
    delays: list[int] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    false: list[Alert] = field(default_factory=list)
    causes: Counter[str] = field(default_factory=Counter)
    flapped: list[Alert] = field(default_factory=list)
    false_why: list[str] = field(default_factory=list)  # each false alarm's cause

    @property
    def flaps(self) -> int:
        return len(self.flapped)

    @property
    def recall(self) -> float | None:
        return self.detected / self.groups if self.groups else None

    @property
    def precision(self) -> float | None:
        flagged = self.detected + self.false_alarms
        return self.detected / flagged if flagged else None

    @property
    def f1(self) -> float | None:
        p, r = self.precision, self.recall
        if p is None or r is None:
            return None
        return 2 * p * r / (p + r) if p + r else 0.0

    @property
    def false_per_target_month(self) -> float:
        return self.false_alarms / self.target_months if self.target_months else math.nan

    @property
    def median_delay(self) -> float | None:
        return statistics.median(self.delays) if self.delays else None

    def add(self, other: Score) -> Score:
        return Score(
            groups=self.groups + other.groups,
            detected=self.detected + other.detected,
            false_alarms=self.false_alarms + other.false_alarms,
            tolerated=self.tolerated + other.tolerated,
            alerts=self.alerts + other.alerts,
            target_months=self.target_months + other.target_months,
            delays=self.delays + other.delays,
            missed=self.missed + other.missed,
            false=self.false + other.false,
            causes=self.causes + other.causes,
            flapped=self.flapped + other.flapped,
            false_why=self.false_why + other.false_why,
        )


def detects(event: Event, alert: Alert, any_kind: bool = False) -> bool:
    return (
        _same_place(event, alert)
        and event.window[0] <= alert.at <= event.window[1]
        and (any_kind or event.accepts(alert.kind))
    )


def tolerated(event: Event, alert: Alert) -> bool:
    low, high = event.tolerance
    return _same_place(event, alert) and low <= alert.at <= high and event.tolerates(alert.kind)


def _same_place(event: Event, alert: Alert) -> bool:
    return alert.target == event.target and (
        event.vantage is None or alert.vantage == event.vantage
    )


def score(
    labels: Labels, transitions: Iterable[Alert], any_kind: bool = False, episodes: bool = True
) -> Score:
    """Score the firing alerts among ``transitions`` (resolved ones count only for flaps)."""
    every = sorted(transitions, key=lambda alert: alert.at)
    alerts = list(firing(every, episodes))
    result = Score(alerts=len(alerts), target_months=labels.target_months)
    result.flapped = flaps(every)
    first: dict[str, datetime] = {}
    claimed: set[tuple[str, str | None]] = set()
    for alert in alerts:
        verdict = _slo_verdict(labels, alert, claimed) if not any_kind else None
        hits = [e for e in labels.events if not e.slo and detects(e, alert, any_kind)]
        if any_kind:
            hits += [e for e in labels.events if e.slo and detects(e, alert, any_kind)]
        if verdict is not None:
            hits = [verdict] if isinstance(verdict, Event) else []
        for event in hits:
            if not event.optional:
                first.setdefault(event.group, alert.at)
        if hits:
            continue
        if verdict == "allowed":
            result.tolerated += 1
            continue
        if verdict is None and not any_kind and any(tolerated(e, alert) for e in labels.events):
            result.tolerated += 1
        else:
            result.false_alarms += 1
            result.false.append(alert)
            why = SLO_REFIRE if verdict == SLO_REFIRE else cause(labels, alert)
            result.causes[why] += 1
            result.false_why.append(why)
    _recall(labels, first, result)
    return result


def _slo_verdict(
    labels: Labels, alert: Alert, claimed: set[tuple[str, str | None]]
) -> Event | str | None:
    """An SLO alert inside an episode: the episode it detects, "allowed" (its first of
    that severity, outside the window or in a grey zone), or a re-fire. None: no episode."""
    if alert.kind not in {e.kind for e in labels.events if e.slo}:
        return None
    inside = [
        e
        for e in labels.events
        if e.slo and _same_place(e, alert) and e.extent[0] <= alert.at <= e.extent[1]
    ]
    if not inside:
        return None
    episode = inside[0]
    if (episode.id, alert.severity) in claimed:
        return SLO_REFIRE
    claimed.add((episode.id, alert.severity))
    in_window = episode.window[0] <= alert.at <= episode.window[1]
    return episode if in_window and not episode.optional else "allowed"


def _recall(labels: Labels, first: dict[str, datetime], result: Score) -> None:
    for group, events in _groups(labels.events).items():
        result.groups += 1
        if group not in first:
            result.missed.append(group)
            continue
        result.detected += 1
        if events[0].abrupt:
            elapsed = (first[group] - events[0].start).total_seconds()
            result.delays.append(int(elapsed // labels.interval_s) + 1)


def flaps(transitions: Sequence[Alert]) -> list[Alert]:
    """Firings of a key within FLAP_WITHIN after the same key resolved (time order in)."""
    resolved: dict[AlertKey, datetime] = {}
    seen: set[str] = set()
    found: list[Alert] = []
    for alert in transitions:
        if alert.state == "resolved":
            resolved[alert.key] = alert.at
            continue
        if alert.alert_id is not None:
            if alert.alert_id in seen:
                continue
            seen.add(alert.alert_id)
        last = resolved.get(alert.key)
        if last is not None and alert.at - last <= FLAP_WITHIN:
            found.append(alert)
    return found


def cause(labels: Labels, alert: Alert) -> str:
    """Why a false alarm probably fired (see the module docstring)."""
    if alert.at < labels.start + WARM_UP:
        return "warm-up"
    if any(e.target == alert.target and e.start <= alert.at for e in labels.events):
        return "after a change"
    return "other"


def _groups(events: Sequence[Event]) -> dict[str, list[Event]]:
    """Required events by group (optional ones are not counted in recall)."""
    groups: dict[str, list[Event]] = {}
    for event in events:
        if event.optional:
            continue
        groups.setdefault(event.group, []).append(event)
    return groups


def first_detections(
    labels: Labels, alerts: Iterable[Alert], any_kind: bool = False
) -> dict[str, Alert]:
    """The first alert detecting each group: what detected it, and when."""
    found: dict[str, Alert] = {}
    for alert in sorted(alerts, key=lambda alert: alert.at):
        for event in labels.events:
            if not event.optional and detects(event, alert, any_kind):
                found.setdefault(event.group, alert)
    return found


def fmt(value: float | None, digits: int = 2) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("labels", type=Path)
    parser.add_argument("alerts", type=Path, help="JSONL: backtest or baseline output")
    parser.add_argument("--any-kind", action="store_true", help="score as a baseline")
    parser.add_argument(
        "--every-firing-line",
        action="store_true",
        help="count firing → recovering → firing again as two alerts",
    )
    args = parser.parse_args()
    labels = read_labels(args.labels)
    with args.alerts.open() as lines:
        found = list(transitions_from_jsonl(lines))
    result = score(labels, found, args.any_kind, episodes=not args.every_firing_line)
    print(
        f"{labels.scenario}: recall {fmt(result.recall)} ({result.detected}/{result.groups}), "
        f"false alarms {result.false_alarms} ({fmt(result.false_per_target_month)}/target-month), "
        f"median delay {fmt(result.median_delay, 1)} runs, precision {fmt(result.precision)}, "
        f"F1 {fmt(result.f1)}, tolerated {result.tolerated}, flaps {result.flaps}"
    )
    for group in result.missed:
        print(f"  missed {group}")
    for alert in result.false:
        where = f"{alert.target}@{alert.vantage}"
        print(f"  false {alert.kind} {where} {alert.at:%m-%d %H:%M}: {alert.summary}")
    for alert in result.flapped:
        where = f"{alert.target}@{alert.vantage}"
        print(f"  flap {alert.kind} {where} {alert.at:%m-%d %H:%M}: {alert.summary}")


if __name__ == "__main__":
    main()
