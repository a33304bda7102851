"""The SLO arithmetic: burn rates as the SRE workbook tabulates them, and the miss ledger
against a plain sum over every run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analysis.detectors import SloParams
from app.analysis.slo import BurnWindow, Counts, MissLedger, budget_left, reaches, window_burn

T0 = datetime(2026, 3, 2, tzinfo=UTC)
HOUR, DAY = timedelta(hours=1), timedelta(days=1)
MONTH = 30 * DAY


@pytest.mark.parametrize(
    ("long", "short", "factor", "spent"),
    [
        # The workbook's table (ch. 5, "Multiwindow, multi-burn-rate alerts").
        (HOUR, timedelta(minutes=5), 14.4, 0.02),
        (6 * HOUR, timedelta(minutes=30), 6.0, 0.05),
        (3 * DAY, 6 * HOUR, 1.0, 0.10),
    ],
)
def test_a_burn_factor_spends_the_share_of_the_budget_the_workbook_says(
    long: timedelta, short: timedelta, factor: float, spent: float
) -> None:
    assert BurnWindow(long, short, factor).budget_share(MONTH) == pytest.approx(spent)


def test_the_default_windows_are_the_workbooks() -> None:
    slo = SloParams()
    pairs = [(p.window(), "page") for p in slo.page] + [(p.window(), "ticket") for p in slo.ticket]
    shares = [(round(w.budget_share(slo.budget_window), 3), kind) for w, kind in pairs]
    assert shares == [(0.02, "page"), (0.05, "page"), (0.1, "ticket")]
    assert slo.objective == 0.99 and slo.budget_window == MONTH


@pytest.mark.parametrize(
    ("timed", "censored", "objective", "burn"),
    [(100, 1, 0.99, 1.0), (80, 12, 0.99, 15.0), (1000, 0, 0.99, 0.0), (200, 10, 0.95, 1.0)],
)
def test_burn_is_the_miss_rate_over_the_budget_rate(
    timed: int, censored: int, objective: float, burn: float
) -> None:
    assert Counts(timed, censored).burn(objective) == pytest.approx(burn)


def test_a_window_without_requests_has_no_burn_rate() -> None:
    assert Counts().burn(0.99) is None


def runs(seed: int, days: float, every: timedelta) -> list[tuple[datetime, int, int]]:
    rng = np.random.default_rng(seed)
    count, jitter = int(days * DAY / every), every / 3  # late starts, still in order
    return [
        (T0 + i * every + jitter * float(rng.random()), 20, int(rng.poisson(0.4)))
        for i in range(count)
    ]


def plain(entries: list[tuple[datetime, int, int]], start: datetime) -> Counts:
    inside = [(timed, censored) for at, timed, censored in entries if at >= start]
    return Counts(
        sum(t for t, _ in inside),
        sum(c for _, c in inside),
        len(inside),
        sum(c > 0 for _, c in inside),
    )


@pytest.mark.parametrize("every", [timedelta(seconds=10), timedelta(minutes=15)])
def test_the_ledger_sums_every_window_up_to_six_hours_exactly(every: timedelta) -> None:
    entries = runs(1, 2, every)
    ledger = MissLedger()
    for at, timed, censored in entries:
        ledger.add(at, timed, censored)
    now = entries[-1][0] + timedelta(seconds=1)
    for span in (timedelta(minutes=5), timedelta(minutes=30), HOUR, 6 * HOUR):
        assert ledger.since(now - span) == plain(entries, now - span)


def test_older_runs_fold_into_hours_the_ledger_stays_small_and_sums_to_the_hour() -> None:
    entries = runs(2, 10, timedelta(seconds=10))  # 86,400 runs
    ledger = MissLedger()
    for at, timed, censored in entries:
        ledger.add(at, timed, censored)
    assert len(ledger._times) <= 10 * 24 + 9 * 360  # hourly buckets + at most 9 h of runs
    now = entries[-1][0] + timedelta(seconds=1)
    assert ledger.since(T0) == plain(entries, T0)  # everything
    three_days = now - 3 * DAY
    edge = three_days.replace(minute=0, second=0, microsecond=0) + HOUR
    # An hour bucket counts once its start is in the window: the window starts on the hour.
    assert ledger.since(three_days) == plain(entries, edge)


def test_a_short_window_with_no_run_in_it_holds_the_newest_run() -> None:
    ledger = MissLedger()
    ledger.add(T0, 20, 3)
    ledger.add(T0 + timedelta(minutes=15), 20, 5)
    now = T0 + timedelta(minutes=24)  # 9 minutes after the last run: none in the last 5
    assert ledger.since(now - timedelta(minutes=5)) == Counts()
    assert ledger.since(now - timedelta(minutes=5), at_least_one=True) == Counts(20, 5, 1, 1)


def test_a_late_run_older_than_the_newest_is_not_taken_twice() -> None:
    ledger = MissLedger()
    ledger.add(T0 + HOUR, 20, 1)
    ledger.add(T0, 20, 9)
    assert ledger.since(T0) == Counts(20, 1, 1, 1)


def test_prune_forgets_what_is_older_than_the_budget() -> None:
    ledger = MissLedger()
    for at, timed, censored in runs(3, 40, timedelta(minutes=15)):
        ledger.add(at, timed, censored)
        ledger.prune(at - MONTH)
    assert ledger._times[0] >= T0 + 10 * DAY - HOUR


def test_window_burn_and_budget_left() -> None:
    ledger = MissLedger()
    for i in range(96):  # a day of 15-minute runs, 1 miss in 20 (5 %, 5× the budget rate)
        ledger.add(T0 + i * timedelta(minutes=15), 20, 1)
    now = T0 + DAY
    burn = window_burn(ledger, BurnWindow(6 * HOUR, timedelta(minutes=30), 6.0), now, 0.99)
    assert burn.long_burn == pytest.approx(5.0) and burn.short_burn == pytest.approx(5.0)
    assert burn.burning is False and burn.triggered is False
    slow = window_burn(ledger, BurnWindow(3 * DAY, 6 * HOUR, 1.0), now, 0.99)
    assert slow.burning and slow.triggered
    assert budget_left(ledger, now, MONTH, 0.99) == pytest.approx(1 - 96 / (0.01 * 96 * 20))


def test_a_ledger_built_in_one_pass_sums_as_one_built_run_by_run() -> None:
    entries = runs(4, 5, timedelta(minutes=15))
    one_by_one = MissLedger()
    for at, timed, censored in entries:
        one_by_one.add(at, timed, censored)
    now = entries[-1][0] + timedelta(seconds=1)
    at_once = MissLedger.of(entries, now)
    for span in (timedelta(minutes=5), HOUR, 6 * HOUR, 3 * DAY, MONTH):
        start = (now - span).replace(minute=0, second=0, microsecond=0)  # on the hour
        assert at_once.since(start) == one_by_one.since(start) == plain(entries, start)
        assert at_once.since(now - span) == plain(entries, now - span) or span > 6 * HOUR
    assert MissLedger.of([], now).since(T0) == Counts()


def test_burns_says_what_since_and_burn_say_for_every_window() -> None:
    ledger = MissLedger()
    entries = runs(5, 4, timedelta(minutes=15))
    for at, timed, censored in entries:
        ledger.add(at, timed, censored)
    now = entries[-1][0] + timedelta(minutes=20)  # the shortest windows hold no run
    for span in (timedelta(minutes=5), HOUR, 6 * HOUR, 3 * DAY, MONTH):
        counts = ledger.since(now - span, at_least_one=True)
        for factor in (0.5, 1.0, 2.0, 6.0, 14.4):
            expected = reaches(counts.burn(0.99), factor)
            assert ledger.burns(now - span, 0.99, factor) is expected
    assert MissLedger().burns(now, 0.99, 1.0) is False
