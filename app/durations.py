"""Durations as people write them in a targets file: ``"500ms"``, ``"15m"``, ``"3d"``."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: Any) -> float:
    """``"15m"``, ``"1.5s"``, ``"500ms"``, ``"2h"``, ``"1d"`` or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or a string like '15m'")
    if isinstance(value, int | float):
        return float(value)
    match = _DURATION.match(str(value))
    if match is None:
        raise ValueError(f"{value!r} is not a duration like '500ms', '30s', '15m', '2h' or '1d'")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def format_duration(seconds: float) -> str:
    """The largest unit that says it whole, as a targets file would: 1800 → ``"30m"``,
    90 → ``"90s"``, 0.5 → ``"500ms"``, 86400 → ``"1d"``; parse_duration reads it back."""
    for unit in ("d", "h", "m", "s"):
        count = seconds / _UNIT_SECONDS[unit]
        if count >= 1 and abs(count - round(count)) < 1e-9:
            return f"{round(count)}{unit}"
    return f"{seconds * 1000:g}ms" if seconds < 1 else f"{seconds:g}s"


Seconds = Annotated[float, BeforeValidator(parse_duration), Field(ge=0)]
