"""Durations said as a targets file says them, and read back."""

from __future__ import annotations

import pytest

from app.durations import format_duration, parse_duration


@pytest.mark.parametrize(
    ("seconds", "said"),
    [(1800, "30m"), (900, "15m"), (90, "90s"), (3600, "1h"), (5400, "90m"), (86400, "1d"),
     (172800, "2d"), (1, "1s"), (0.5, "500ms"), (0.25, "250ms"), (1.5, "1.5s"), (61.5, "61.5s")],
)  # fmt: skip
def test_a_duration_is_said_in_the_largest_whole_unit_and_reads_back(
    seconds: float, said: str
) -> None:
    assert format_duration(seconds) == said
    assert parse_duration(said) == pytest.approx(seconds)
