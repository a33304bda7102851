"""What the background loops set aside: one item that fails (a run the rollups cannot
digest, a delivery the sender cannot read, a target whose evaluation raises) is held here,
logged once with its id, and passed over, so the loop goes on with every other item.

Kept in memory, on purpose: the item itself stays in the database as it was (the evidence),
and the next start tries it once again (a fixed version, or an operator's repair of the
row, then takes it without any further step; an item still bad costs one attempt and one
log line per start). A table would have to be cleared by hand after every repair, and
would need replicas to agree on whose verdict it holds. /healthz lists what is held
(``problems``), /metrics counts it by loop (``phasewatch_quarantined``).

Loops pass over what is held (``holds``) until the process ends; those whose items come
back by themselves (the evaluation of a target, with its next run; a prune step, with the
next hour) try again then and ``release`` an item that passed.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from app.store.db import describe, is_transient
from app.store.records import RunRecord

log = logging.getLogger(__name__)

LOOPS = ("rollups", "evaluation", "outbox", "prune")
NAMED = 3  # items named in one /healthz problem; the rest counted


class SetAside(Protocol):
    """One loop's view of the quarantine: what it passes over, and where it puts an item."""

    def holds(self, item: str) -> bool: ...

    def hold(self, item: str, reason: str, about: str = "") -> bool: ...

    def release(self, item: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Held:
    loop: str
    item: str  # what it is, by id: "run 3f0c…", "delivery 12", "target api at eu"
    reason: str
    about: str = ""  # what else helps the operator find it: "of target api"

    def __str__(self) -> str:
        about = f" {self.about}" if self.about else ""
        return f"{self.item}{about}: {self.reason}"


class Quarantine:
    """Every loop's held items, keyed by (loop, item); thread-safe (loops run on threads)."""

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], Held] = {}
        self._lock = threading.Lock()

    def loop(self, name: str) -> LoopQuarantine:
        return LoopQuarantine(self, name)

    def holds(self, loop: str, item: str) -> bool:
        with self._lock:
            return (loop, item) in self._held

    def hold(self, loop: str, item: str, reason: str, about: str = "") -> bool:
        """Set ``item`` aside; True (and one log line) the first time only."""
        held = Held(loop, item, _one_line(reason), about)
        with self._lock:
            if (loop, item) in self._held:
                return False
            self._held[(loop, item)] = held
        log.error("%s: %s; set aside, the loop goes on without it", loop, held)
        return True

    def release(self, loop: str, item: str) -> bool:
        """``item`` passed: no longer held; True (and one log line) if it was."""
        with self._lock:
            held = self._held.pop((loop, item), None)
        if held is not None:
            log.info("%s: %s passed again, no longer set aside", loop, item)
        return held is not None

    def held(self) -> list[Held]:
        with self._lock:
            return list(self._held.values())

    def counts(self) -> dict[str, int]:
        """Items held by loop, every loop of ``LOOPS`` named (0: nothing held)."""
        found = dict.fromkeys(LOOPS, 0)
        for held in self.held():
            found[held.loop] = found.get(held.loop, 0) + 1
        return found

    def problems(self) -> list[str]:
        """One /healthz problem per loop holding something: how many, the first named."""
        by_loop: dict[str, list[Held]] = {}
        for held in self.held():
            by_loop.setdefault(held.loop, []).append(held)
        return [_problem(loop, items) for loop, items in sorted(by_loop.items())]


@dataclass(frozen=True, slots=True)
class LoopQuarantine:
    """``Quarantine`` as one loop sees it (a ``SetAside``)."""

    quarantine: Quarantine
    name: str

    def holds(self, item: str) -> bool:
        return self.quarantine.holds(self.name, item)

    def hold(self, item: str, reason: str, about: str = "") -> bool:
        return self.quarantine.hold(self.name, item, reason, about)

    def release(self, item: str) -> bool:
        return self.quarantine.release(self.name, item)


def isolated(
    evaluate: Callable[[RunRecord], object], aside: SetAside
) -> Callable[[RunRecord], object]:
    """``evaluate`` (what follows a stored run), a failure held as its target's at its
    vantage: logged once, not with every run; tried again with each run, released once it
    passes. A database that is away is not the target's fault: that error goes up."""

    @functools.wraps(evaluate)
    def run(record: RunRecord) -> object:
        item = f"target {record.target} at {record.vantage}"
        try:
            found = evaluate(record)
        except Exception as exc:
            if is_transient(exc):
                raise
            aside.hold(item, describe(exc))
            return None
        aside.release(item)
        return found

    return run


def _problem(loop: str, items: list[Held]) -> str:
    kind = items[0].item.split(" ")[0]
    count = f"{len(items)} {kind}{'' if len(items) == 1 else 's'}"
    if any(item.item.split(" ")[0] != kind for item in items):
        count = f"{len(items)} items"
    named = "; ".join(str(item) for item in items[:NAMED])
    more = f"; and {len(items) - NAMED} more" if len(items) > NAMED else ""
    return f"{loop}: {count} quarantined: {named}{more}"


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else "failed"
