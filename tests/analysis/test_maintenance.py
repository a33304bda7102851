"""Maintenance windows as pure logic: weekly spans and cron on a zone's wall clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from app.analysis.maintenance import MaintenanceWindow, active, in_any, spans_between


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def window(**fields: Any) -> MaintenanceWindow:
    return MaintenanceWindow.model_validate({"name": "w", "targets": ["*"], **fields})


SAT_NIGHT = {"weekly": [{"days": ["sat"], "from": "02:00", "to": "04:00"}]}
BERLIN_SUN_NIGHT = {
    "time_zone": "Europe/Berlin",
    "weekly": [{"days": ["sun"], "from": "01:00", "to": "04:00"}],
}
ACROSS_MIDNIGHT = {"weekly": [{"days": ["fri"], "from": "23:00", "to": "01:00"}]}
CRON_MONDAY = {"time_zone": "America/New_York", "cron": "30 1 * * mon", "duration": "1h"}


@pytest.mark.parametrize(
    ("spec", "now", "expected"),
    [
        # 2026-12-05 is a Saturday.
        (SAT_NIGHT, "2026-12-05T02:00:00+00:00", True),
        (SAT_NIGHT, "2026-12-05T03:59:59+00:00", True),
        (SAT_NIGHT, "2026-12-05T04:00:00+00:00", False),  # half-open
        (SAT_NIGHT, "2026-12-05T01:59:59+00:00", False),
        (SAT_NIGHT, "2026-12-06T02:30:00+00:00", False),  # Sunday
        # A span from Friday 23:00 to Saturday 01:00.
        (ACROSS_MIDNIGHT, "2026-12-04T23:30:00+00:00", True),
        (ACROSS_MIDNIGHT, "2026-12-05T00:30:00+00:00", True),
        (ACROSS_MIDNIGHT, "2026-12-05T01:00:00+00:00", False),
        (ACROSS_MIDNIGHT, "2026-12-03T23:30:00+00:00", False),  # Thursday
        # Berlin's wall clock: 01:00–04:00 local is 00:00–03:00 UTC in winter (CET) …
        (BERLIN_SUN_NIGHT, "2026-12-06T00:00:00+00:00", True),
        (BERLIN_SUN_NIGHT, "2026-12-06T03:00:00+00:00", False),
        # … and 23:00–02:00 UTC on a summer Sunday (CEST).
        (BERLIN_SUN_NIGHT, "2026-07-04T23:30:00+00:00", True),
        (BERLIN_SUN_NIGHT, "2026-07-05T02:00:00+00:00", False),
        # The night clocks go back (2026-10-25, 03:00 CEST → 02:00 CET): 01:00 CEST is
        # 23:00 UTC, 04:00 CET is 03:00 UTC — four real hours.
        (BERLIN_SUN_NIGHT, "2026-10-24T23:00:00+00:00", True),
        (BERLIN_SUN_NIGHT, "2026-10-25T02:59:00+00:00", True),
        (BERLIN_SUN_NIGHT, "2026-10-25T03:00:00+00:00", False),
        # Cron at 01:30 New York for an hour: 06:30 UTC in winter (EST), 05:30 in summer.
        (CRON_MONDAY, "2026-12-07T06:30:00+00:00", True),
        (CRON_MONDAY, "2026-12-07T07:29:00+00:00", True),
        (CRON_MONDAY, "2026-12-07T05:45:00+00:00", False),
        (CRON_MONDAY, "2026-07-06T05:45:00+00:00", True),
        (CRON_MONDAY, "2026-12-08T06:45:00+00:00", False),  # Tuesday
        # crontab's weekdays: 0 and 7 are Sunday, 1-5 Monday to Friday.
        ({"cron": "0 3 * * 0", "duration": "1h"}, "2026-12-06T03:30:00+00:00", True),
        ({"cron": "0 3 * * 7", "duration": "1h"}, "2026-12-06T03:30:00+00:00", True),
        ({"cron": "0 3 * * 1-5", "duration": "1h"}, "2026-12-07T03:30:00+00:00", True),
        ({"cron": "0 3 * * 1-5", "duration": "1h"}, "2026-12-05T03:30:00+00:00", False),
        ({"cron": "0 3 * * */2", "duration": "1h"}, "2026-12-05T03:30:00+00:00", True),
        # One-off.
        (
            {"start": "2026-12-05T10:00:00Z", "end": "2026-12-05T11:00:00Z"},
            "2026-12-05T10:30:00+00:00",
            True,
        ),
        (
            {"start": "2026-12-05T10:00:00Z", "end": "2026-12-05T11:00:00Z"},
            "2026-12-05T11:00:00+00:00",
            False,
        ),
        # Weekly spans bounded by start: none before it.
        ({**SAT_NIGHT, "start": "2026-12-10T00:00:00Z"}, "2026-12-05T02:30:00+00:00", False),
        ({**SAT_NIGHT, "start": "2026-12-10T00:00:00Z"}, "2026-12-12T02:30:00+00:00", True),
    ],
)
def test_active(spec: dict[str, Any], now: str, expected: bool) -> None:
    assert active(window(**spec), at(now)) is expected


def test_spans_between_lists_each_span_in_utc_across_a_dst_change() -> None:
    spans = spans_between(
        window(**BERLIN_SUN_NIGHT), at("2026-10-17T00:00:00+00:00"), at("2026-11-02T00:00:00+00:00")
    )
    assert spans == [
        (at("2026-10-17T23:00:00+00:00"), at("2026-10-18T02:00:00+00:00")),  # CEST, 3 h
        (at("2026-10-24T23:00:00+00:00"), at("2026-10-25T03:00:00+00:00")),  # the change, 4 h
        (at("2026-11-01T00:00:00+00:00"), at("2026-11-01T03:00:00+00:00")),  # CET, 3 h
    ]


def test_spans_that_touch_are_merged() -> None:
    spec = {"weekly": [{"days": ["mon", "tue"], "from": "00:00", "to": "24:00"}]}
    spans = spans_between(
        window(**spec), at("2026-12-07T12:00:00+00:00"), at("2026-12-08T12:00:00+00:00")
    )
    assert spans == [(at("2026-12-07T00:00:00+00:00"), at("2026-12-09T00:00:00+00:00"))]


def test_scope_by_target_glob_and_vantage() -> None:
    w = window(**SAT_NIGHT, targets=["chat-*", "search"], vantages=["eu-*"])
    now = at("2026-12-05T02:30:00+00:00")
    assert in_any([w], "chat-1", "eu-west", now)
    assert not in_any([w], "chat-1", "us-east", now)
    assert not in_any([w], "other", "eu-west", now)
    assert w.covers("search", None)


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"cron": "nonsense", "duration": "1h"}, "5 fields"),
        ({"cron": "61 * * * *", "duration": "1h"}, "cron"),
        ({"cron": "0 3 * * *"}, "needs a duration"),
        ({"cron": "0 3 30 2 *", "duration": "1h"}, "never fires"),
        ({**SAT_NIGHT, "end": "2300-01-01T00:00:00Z"}, "1970, 2200"),
        ({"cron": "0 3 * * 8", "duration": "1h"}, "not 0-7"),
        ({"cron": "0 3 * * 5-1", "duration": "1h"}, "backwards"),
        ({"cron": "0 3 * * 1/0", "duration": "1h"}, "cron"),
        ({"cron": "0 3 * * *", "duration": "8d"}, "at most 7 days"),
        ({**SAT_NIGHT, "time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"weekly": [{"days": ["sat"], "from": "25:00", "to": "04:00"}]}, "pattern"),
        ({"weekly": [{"days": ["caturday"], "from": "02:00", "to": "04:00"}]}, "sat"),
        ({"start": "2026-12-05T10:00:00Z"}, "give weekly spans"),
        ({"start": "2026-12-05T10:00:00Z", "end": "2026-12-05T09:00:00Z"}, "after start"),
        ({**SAT_NIGHT, "duration": "1h"}, "duration goes with cron"),
    ],
)
def test_a_window_that_is_not_one_says_why(spec: dict[str, Any], said: str) -> None:
    with pytest.raises(ValidationError, match=said):
        window(**spec)


def test_a_cron_every_minute_keeps_the_newest_spans_when_there_are_too_many() -> None:
    w = window(cron="* * * * *", duration="30s")
    b = at("2026-12-05T00:00:00+00:00")
    spans = spans_between(w, b - timedelta(days=30), b)
    assert len(spans) == 10_000 and spans[-1] == (b, b + timedelta(seconds=30))
    assert active(w, b - timedelta(seconds=40)) and not active(w, b - timedelta(seconds=10))


def test_a_cron_every_minute_is_bounded() -> None:
    w = window(cron="* * * * *", duration="30s")
    a = at("2026-12-05T00:00:00+00:00")
    spans = spans_between(w, a, a + timedelta(minutes=10))
    assert len(spans) == 11 and spans[0][0] == a
