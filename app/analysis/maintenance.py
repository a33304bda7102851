"""Maintenance windows: when planned work is under way on some targets.

A window is weekly spans (``days: [sat], from: "02:00", to: "04:00"``; a ``to`` at or
before ``from`` ends the next day), and/or a 5-field cron expression with a ``duration``
(each firing opens a span that long), read on the wall clock of ``time_zone`` — so a
02:00 window stays at 02:00 across a DST change, and lasts an hour more or less on the
night of the change. ``start``/``end`` bound it; with neither spans nor cron, it is one
span from ``start`` to ``end``.

During a window its targets' alerts do not notify, and — unlike under a silence — their
runs are kept out of the detectors' references and the error budgets.

Pure: a window and instants in, spans and answers out. Cron fire times come from
APScheduler's ``CronTrigger`` (already a dependency).
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time, timedelta
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from app.durations import Seconds

Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
DAYS: tuple[Day, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$|^24:00$"
UTC = ZoneInfo("UTC")
MAX_SPAN = timedelta(days=7)  # no span is longer: how far back a lookup must reach
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)
MAX_SPANS = 10_000  # spans_between stops there (a cron every minute over a week)
Glob = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$")]


class WeeklySpan(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    days: list[Day] = Field(min_length=1, max_length=7, description="mon … sun")
    start: str = Field(alias="from", pattern=CLOCK, description="HH:MM, local time")
    end: str = Field(alias="to", pattern=CLOCK, description="HH:MM; at or before from: next day")


class MaintenanceWindow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        min_length=1, max_length=200, pattern=r"^[^\x00-\x1f]+$", description="Unique in the file."
    )
    targets: list[Glob] = Field(min_length=1, max_length=100, description="Names or globs.")
    vantages: list[Glob] | None = Field(None, max_length=100, description="None: all.")
    time_zone: str = Field("UTC", max_length=100, description="IANA name, e.g. Europe/Berlin.")
    weekly: list[WeeklySpan] = Field(
        default_factory=list, max_length=50, description="Spans on days of the week."
    )
    cron: str | None = Field(None, max_length=200, description="5 fields, local time.")
    duration: Seconds | None = Field(None, description="How long after each cron firing.")
    start: AwareDatetime | None = Field(None, description="Not before this.")
    end: AwareDatetime | None = Field(None, description="Not after this.")
    comment: str | None = Field(None, max_length=2000, pattern=r"^[^\x00]*$", description="Why.")

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        zone_of(name)
        return name

    @field_validator("start", "end")
    @classmethod
    def _in_range(cls, moment: datetime | None) -> datetime | None:
        # Spans are computed a week either side: far from year 1 and 9999.
        if moment is not None and not EARLIEST <= moment < LATEST:
            raise ValueError("must be in [1970, 2200)")
        return moment

    @model_validator(mode="after")
    def _whole(self) -> MaintenanceWindow:
        if self.cron is not None:
            cron = trigger(self.cron, zone_of(self.time_zone))
            if not self.duration or not math.isfinite(self.duration):
                raise ValueError("cron needs a duration (how long each window lasts)")
            if self.duration > MAX_SPAN.total_seconds():
                raise ValueError("duration must be at most 7 days")
            # One that never fires (February 30th) would be searched for up to year 9999
            # at every ask.
            if cron.get_next_fire_time(None, EARLIEST) is None:
                raise ValueError(f"cron {self.cron!r} never fires")
        elif self.duration is not None:
            raise ValueError("duration goes with cron")
        if self.start is not None and self.end is not None and self.end <= self.start:
            raise ValueError("end must be after start")
        if not self.weekly and self.cron is None and (self.start is None or self.end is None):
            raise ValueError("give weekly spans, a cron with a duration, or both start and end")
        return self

    def covers(self, target: str, vantage: str | None) -> bool:
        """Whether ``target`` (at ``vantage``; None: any) is in this window's scope."""
        if not any(fnmatch.fnmatchcase(target, glob) for glob in self.targets):
            return False
        if self.vantages is None or vantage is None:
            return True
        return any(fnmatch.fnmatchcase(vantage, glob) for glob in self.vantages)


def zone_of(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}") from None


def trigger(expression: str, zone: ZoneInfo) -> CronTrigger:
    fields = expression.split()
    if len(fields) != 5:
        raise ValueError(f"cron {expression!r}: needs 5 fields (minute hour day month weekday)")
    try:
        # crontab counts weekdays from Sunday (0 and 7), APScheduler from Monday: each
        # weekday the field means is named here.
        fields[4] = _weekdays(fields[4])
        return CronTrigger.from_crontab(" ".join(fields), timezone=zone)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"cron {expression!r}: {exc}") from None


CRON_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _weekdays(field: str) -> str:
    if field == "*":
        return field
    days: set[int] = set()
    for item in field.lower().split(","):
        span, _, step = item.partition("/")
        if span == "*":
            first, last = 0, 6
        else:
            low, _, high = span.partition("-")
            first = _weekday(low)
            last = _weekday(high) if high else (6 if step else first)
        if last < first:
            raise ValueError(f"weekdays {span!r} run backwards")
        days |= {day % 7 for day in range(first, last + 1, int(step) if step else 1)}
    return ",".join(CRON_DAYS[day] for day in sorted(days))


def _weekday(text: str) -> int:
    if text in CRON_DAYS:
        return CRON_DAYS.index(text)
    if not text.isdigit() or int(text) > 7:
        raise ValueError(f"weekday {text!r} is not 0-7 nor sun-sat")
    return int(text)


def active(window: MaintenanceWindow, now: datetime) -> bool:
    return any(start <= now < end for start, end in spans_between(window, now, now))


def spans_between(
    window: MaintenanceWindow, a: datetime, b: datetime
) -> list[tuple[datetime, datetime]]:
    """The window's spans (UTC, half-open) that overlap [a, b], oldest first, merged where
    they touch, clipped to ``start``/``end``; at most ``MAX_SPANS``, the newest."""
    lo = a if window.start is None else max(a, window.start)
    hi = b if window.end is None else min(b, window.end)
    if hi < lo:
        return []
    if not window.weekly and window.cron is None:
        assert window.start is not None and window.end is not None
        return [(window.start, window.end)] if window.start <= hi and window.end > lo else []
    found = sorted(_raw_spans(window, lo, hi))
    clipped = [
        (max(s, window.start) if window.start else s, min(e, window.end) if window.end else e)
        for s, e in found
    ]
    return merged([(s, e) for s, e in clipped if s <= hi and e > lo and s < e])[-MAX_SPANS:]


def in_any(
    windows: Iterable[MaintenanceWindow], target: str, vantage: str | None, at: datetime
) -> bool:
    """Whether a window of ``target`` at ``vantage`` (None: a service-wide alert, any
    vantage) is open at ``at``."""
    return any(w.covers(target, vantage) and active(w, at) for w in windows)


def _raw_spans(
    window: MaintenanceWindow, a: datetime, b: datetime
) -> Iterator[tuple[datetime, datetime]]:
    zone = zone_of(window.time_zone)
    first = (a - MAX_SPAN).astimezone(zone).date()
    last = b.astimezone(zone).date()
    for spec in window.weekly:
        for day in _days(first, last):
            if DAYS[day.weekday()] in spec.days:
                yield _local_span(day, spec, zone)
    if window.cron is not None and window.duration:
        length = timedelta(seconds=window.duration)
        yield from _cron_spans(trigger(window.cron, zone), length, a - length, b)


def _cron_spans(
    cron: CronTrigger, length: timedelta, a: datetime, b: datetime
) -> list[tuple[datetime, datetime]]:
    """The spans of the firings in [a, b], a day at a time from the newest back, so that a
    cron firing more than ``MAX_SPANS`` times keeps the newest (those evaluation asks of)."""
    days: list[list[tuple[datetime, datetime]]] = []
    end, count = b, 0
    while end > a and count < MAX_SPANS:
        start = max(a, end - timedelta(days=1))
        found = []
        fire = cron.get_next_fire_time(None, start)
        while fire is not None and (fire < end or (fire == b and end == b)):
            found.append((fire.astimezone(UTC), fire.astimezone(UTC) + length))
            fire = cron.get_next_fire_time(fire, fire + timedelta(seconds=1))
        days.append(found)
        end, count = start, count + len(found)
    return [span for day in reversed(days) for span in day]


def _days(first: date, last: date) -> Iterator[date]:
    day = first
    while day <= last:
        yield day
        day += timedelta(days=1)


def _local_span(day: date, spec: WeeklySpan, zone: ZoneInfo) -> tuple[datetime, datetime]:
    start_at, end_at = _clock(spec.start), _clock(spec.end)
    start = _at(day, start_at, zone)
    end_day = day + timedelta(days=1) if end_at <= start_at else day
    end = _at(end_day, end_at, zone)
    return start, end


def _clock(text: str) -> timedelta:
    hours, minutes = text.split(":")
    return timedelta(hours=int(hours), minutes=int(minutes))


def _at(day: date, offset: timedelta, zone: ZoneInfo) -> datetime:
    """``day`` at ``offset`` past midnight on ``zone``'s wall clock, in UTC (24:00: the next
    midnight; a time skipped by a DST change: read with the offset before it)."""
    local = datetime.combine(day + timedelta(days=offset.days), time(), tzinfo=zone)
    local = local.replace(hour=offset.seconds // 3600, minute=offset.seconds % 3600 // 60)
    return local.astimezone(UTC)


def merged(spans: list[tuple[datetime, datetime]]) -> list[tuple[datetime, datetime]]:
    joined: list[tuple[datetime, datetime]] = []
    for start, end in spans:
        if joined and start <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined
