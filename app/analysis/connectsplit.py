"""Where a target's ``connect`` time goes — DNS, TCP or TLS — and a note when it moves.

Pure: the ``connect_split`` and ``address_family`` of stored samples' details in
(``app.probe.connection`` wrote them; a sample on a reused connection has none), plain
values out. ``connect_moved`` compares a recent window with the one before it: ``connect``
alone hides a resolver gone slow behind a TLS handshake that got faster, or a route that
now reaches the target over IPv6.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from app.analysis.notes import Note

PARTS = ("dns", "tcp", "tls")
# Fresh connections a window needs before its medians say anything.
MIN_CONNECTIONS = 3
# A part that took over must have grown by this much (ms) and this share of the connect
# time before: a loopback's jitter of tenths of a millisecond is no move.
MOVE_MS = 5.0
MOVE_RATIO = 0.5


@dataclass(frozen=True, slots=True)
class ConnectSplit:
    """A window's fresh connections: how many, each part's median (ms), the families."""

    n: int
    medians: dict[str, float]
    families: dict[str, int]

    @property
    def largest(self) -> str:
        return max(PARTS, key=lambda part: self.medians[part])

    @property
    def family(self) -> str | None:
        """The family most of its connections reached."""
        return max(self.families, key=lambda f: self.families[f]) if self.families else None

    def to_json(self) -> dict[str, Any]:
        medians = {part: round(ms, 3) for part, ms in self.medians.items()}
        return {"n": self.n, "medians": medians, "families": self.families}


def split_of(details: Iterable[Mapping[str, Any]]) -> ConnectSplit | None:
    """The split of the samples whose ``details`` these are; None without a fresh one."""
    splits, families = [], Counter[str]()
    for detail in details:
        split = detail.get("connect_split")
        if isinstance(split, Mapping) and all(part in split for part in PARTS):
            splits.append(split)
            family = detail.get("address_family")
            if isinstance(family, str):
                families[family] += 1
    if not splits:
        return None
    medians = {part: float(statistics.median(s[part] for s in splits)) for part in PARTS}
    return ConnectSplit(len(splits), medians, dict(families))


def connect_moved(before: ConnectSplit | None, after: ConnectSplit | None) -> Note | None:
    """A note when ``after``'s connect time sits in another part than ``before``'s and that
    part grew past noise, or its connections reached another address family."""
    if before is None or after is None or min(before.n, after.n) < MIN_CONNECTIONS:
        return None
    texts = []
    part = after.largest
    grown = after.medians[part] - before.medians[part]
    was = sum(before.medians.values())
    if part != before.largest and grown >= max(MOVE_MS, MOVE_RATIO * was):
        old = before.largest
        texts.append(
            f"connect moved from {old} to {part}: {part} {before.medians[part]:.1f} →"
            f" {after.medians[part]:.1f} ms median, {old} {before.medians[old]:.1f} →"
            f" {after.medians[old]:.1f} ms ({after.n} new connections against {before.n})"
        )
    if before.family is not None and after.family not in (None, before.family):
        texts.append(f"new connections now reach {after.family}, before {before.family}")
    return Note("connect_moved", "; ".join(texts)) if texts else None
