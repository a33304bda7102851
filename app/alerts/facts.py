"""An alert's facts are those of its firing.

While an alert is pending, each evaluation's numbers replace the last (the streak is not
yet news). Once it fires, its numbers are what a person was told: the old leader's share
before, the reference it was judged against, the lead, the tail's excess. Later
evaluations do not rewrite them; they go under ``now`` beside them, and the sentence
says both ("generation 48.5 % → network 62 % …; now generation 7.9 %, network 70.1 %").
"""

from __future__ import annotations

from typing import Any

NOW = "now"


def kept(numbers: dict[str, Any], fresh: dict[str, Any], fired: bool) -> dict[str, Any]:
    """An alert's numbers after an evaluation gave ``fresh`` ones (empty: none given).
    ``fired``: the alert was firing or recovering before it (its facts are set)."""
    if not fired:
        return fresh or numbers
    facts, now = split(numbers)
    current = fresh or now
    return facts | {NOW: current} if current else facts


def split(numbers: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The facts at firing, and the numbers now (None: none since it fired)."""
    now = numbers.get(NOW)
    facts = {name: value for name, value in numbers.items() if name != NOW}
    return facts, now if isinstance(now, dict) else None
