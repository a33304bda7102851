"""Which targets' rollups this replica keeps: those it owns now (``app.replicas.assign``).

Each replica's rollup loop (``app.runtime.upkeep``) catches up the runs of the targets it
owns and folds their closed periods, as it probes and evaluates them: the runs it catches
up are mostly the ones it stored, whose samples it still holds (``InHand``), and no replica
does the fleet's. Every target the database knows has one owner among the live replicas
(its name weighed as for probing), those no longer in the targets file included: their
runs (an import, a push before a reload) are still counted.

A target new to this process (at its start, or taken over from a replica that died or
left) is caught up over the whole raw retention once, and its closed periods folded back
``FOLD_LOOKBACK`` (``fresh``): the previous owner's pending runs, and a fold it missed, are
this replica's now. No run is counted twice: its digest row is the marker
(``app.store.rollups.digests``), so two replicas that both take a target for their own a
moment (their leases read a renewal apart) count each of its runs once, whichever first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.store.models import TargetRow

# ``Replicas.share``: the names of those given this replica owns now.
Owned = Callable[[Iterable[str]], list[str]]


# Read at every pass of the rollup loop: built once, run on the Core connection.
_IDS = select(TargetRow.id, TargetRow.name)


@dataclass(frozen=True, slots=True)
class Share:
    """The target ids whose rollups this replica keeps now; ``fresh``: of those, the ones
    it had not kept before."""

    mine: frozenset[int]
    fresh: frozenset[int]

    @property
    def kept(self) -> frozenset[int]:
        """Those it kept before too."""
        return self.mine - self.fresh


def share_of(ids: Mapping[str, int], owned: Iterable[str], kept: Iterable[int]) -> Share:
    """The share of the targets ``ids`` (name: id) whose names are ``owned``, ``kept``
    being the ids kept before."""
    mine = frozenset(ids[name] for name in owned if name in ids)
    return Share(mine, mine - frozenset(kept))


@dataclass
class RollupShare:
    sessions: sessionmaker[Session]
    owned: Owned = list  # one process: every target
    kept: set[int] = field(default_factory=set)  # ids caught up over the retention once

    def now(self) -> Share:
        """The targets this replica keeps the rollups of now, as the database names them."""
        with self.sessions() as session:
            ids = {name: id_ for id_, name in session.connection().execute(_IDS)}
        return share_of(ids, self.owned(list(ids)), self.kept)

    def reached(self, share: Share) -> None:
        """``share``'s fresh targets caught up in full: from now on, as the others."""
        self.kept |= share.fresh
