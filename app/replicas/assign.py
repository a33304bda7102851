"""Which live replica owns which target, at a given moment (pure: plain values in).

A target's owner at time ``at`` is the live replica that weighs most for it (rendezvous
hashing: a hash of the target's and the replica's names). Every replica computes the same
owner from the same leases, without talking to the others; a replica that leaves gives its
targets to the next in each target's order, and one that joins takes about 1/n of them,
from everyone, and nothing else moves.

A replica is live at ``at`` while its lease (``Member``) holds then: ``effective_ms <= at
< expires_ms``, times on the database's clock, in ms since the epoch like a slot
(``app.runs.slots``). A scheduled run is decided by its slot, so two replicas holding the
same leases never both probe one slot, nor both pass it over: a dead replica's lease says
when it ends, and the next owner takes each slot from then on, with no need to hear of the
death first.

Only while the leases were read lately (``View.current``) is an expiry believed: a replica
cut off from the database keeps every lease it last saw as live (itself too), so it keeps
probing its own share into its spool and takes nobody's (no slot twice; a replica that died
meanwhile has its share taken over once the database answers again).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Member:
    id: str
    effective_ms: int
    expires_ms: int


@dataclass(frozen=True, slots=True)
class View:
    """The leases as this replica (``me``) last read them, at ``read_ms``."""

    me: str
    members: tuple[Member, ...]
    read_ms: int
    current: bool = True  # read lately enough for expiries to be believed

    def live(self, at_ms: int) -> list[str]:
        """The replicas live at ``at_ms``: counted by then, their lease not over (or, not
        current, not over when last read)."""
        horizon = at_ms if self.current else min(at_ms, self.read_ms)
        return [m.id for m in self.members if m.effective_ms <= at_ms and horizon < m.expires_ms]

    def owner(self, target: str, at_ms: int) -> str | None:
        return owner(target, self.live(at_ms))

    def owns(self, target: str, at_ms: int) -> bool:
        return self.owner(target, at_ms) == self.me

    def share(self, targets: Iterable[str], at_ms: int) -> list[str]:
        """The targets of ``targets`` this replica owns at ``at_ms``."""
        live = self.live(at_ms)
        return [target for target in targets if owner(target, live) == self.me]


def weight(target: str, replica: str) -> int:
    digest = hashlib.blake2b(f"{target}\0{replica}".encode(), digest_size=8).digest()
    return int.from_bytes(digest)


def owner(target: str, live: Iterable[str]) -> str | None:
    """The replica of ``live`` that weighs most for ``target``; None if nobody is live."""
    return max(live, key=lambda replica: (weight(target, replica), replica), default=None)
