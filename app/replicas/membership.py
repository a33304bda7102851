"""This process among the ``serve`` replicas of one PostgreSQL database: its lease, renewed
every third of ``lease_s``, and the leases of all, by which it decides what it owns
(``app.replicas.assign``). The database is the only coordinator: no replica talks to another.

Bounds, with ``lease_s`` (``PHASEWATCH_REPLICA_LEASE_S``): a replica killed outright has
its targets taken over at the end of its lease, within ``lease_s`` of its death, each from
the first slot after; one stopped with SIGTERM ends its lease as it goes, and the others
take over at their next renewal (within ``lease_s / 3``). A replica that joins takes its
share ``settle_s`` (two renewals) after its first, at a slot boundary every replica agrees
on, so no slot is probed twice. Joining, it ends the lease of a dead process of its own
host first (``predecessor_dead``: itself before a crash), whose share would otherwise wait
for that lease to run out, and which would make a lone restarted replica wait to count.
Expiries are believed only while the leases were read less than ``lease_s / 2`` ago
(``View.current``): a replica that cannot reach the database keeps its own share and takes
nobody's.

While the database has no lease table (a ``serve --no-migrate`` whose schema is behind),
the leader (``app.store.leader``) owns every target and the others none (``fallback``):
it probes into its spool, as one process did before leases.

SQLite serves one process (``app.store.sqlitelock``): it owns every target, always.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace

from sqlalchemy import Connection
from sqlalchemy.exc import ProgrammingError

from app import clock
from app.replicas.assign import Member, View
from app.runs.slots import epoch_ms
from app.store import replicarows
from app.store.db import Sessions, autocommit, describe

log = logging.getLogger(__name__)


def replica_id() -> str:
    """Unique to this process: host, pid, and a random tail (a pid is reused)."""
    return f"{socket.gethostname()[:120]}-{os.getpid()}-{secrets.token_hex(3)}"


def predecessor_dead(
    lease_id: str, me: str, running: Callable[[int], bool] = lambda pid: _running(pid)
) -> bool:
    """Whether ``lease_id`` names a process of this host that is gone (``replica_id``'s
    host and pid): one this process restarts after a crash (``kill -9``, OOM), whose lease
    would otherwise hold its share, and make this one wait, until it ran out. Its pid is
    this one's (a container's restart: pid 1 again) or no running process's. Another
    host's, or an id not made by ``replica_id``, is never known dead."""
    host, pid = _host_pid(lease_id)
    mine = _host_pid(me)
    if lease_id == me or pid is None or mine[1] is None or host != mine[0]:
        return False
    return pid == mine[1] or not running(pid)


def _host_pid(replica: str) -> tuple[str, int | None]:
    parts = replica.rsplit("-", 2)
    if len(parts) != 3 or not parts[1].isdigit() or len(parts[2]) != 6:
        return replica, None
    return parts[0], int(parts[1])


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def now_ms() -> int:
    return epoch_ms(clock.wall())


class Replicas:
    def __init__(
        self,
        sessions: Sessions,
        contested: bool,
        lease_s: float,
        me: str | None = None,
        monotonic: Callable[[], float] = clock.monotonic,
        fallback: Callable[[], bool] = lambda: False,
        leading: Callable[[], bool] = lambda: False,
    ) -> None:
        self.sessions = sessions
        self.contested = contested  # PostgreSQL: replicas may share it
        self.lease_s = lease_s
        self.me = me or replica_id()
        self.problem: str | None = None  # why the last renewal failed
        self._monotonic = monotonic
        self.fallback = fallback  # owns everything while there is no lease table (the leader)
        self.leading = leading  # holds the leader lock
        self.no_table = False  # the last renewal found no lease table
        self._view: View | None = None
        self._read_at = 0.0
        self._lock = threading.Lock()

    @property
    def renew_every_s(self) -> float:
        return self.lease_s / 3

    @property
    def next_renewal_s(self) -> float:
        """Until the next renewal: a third of the lease; within a second while the leases
        could not be read, so a database back is seen at once (not a lease's third on)."""
        return self.renew_every_s if self.problem is None else min(1.0, self.renew_every_s)

    @property
    def settle_s(self) -> float:
        return 2 * self.renew_every_s

    # Renewal (blocking: a worker thread's) --------------------------------------------

    def renew(self) -> View | None:
        """Renew this replica's lease and read everybody's; on failure, keep the last view."""
        return self._renew(self._renewed_held)

    def renew_on(self, connection: Connection) -> bool:
        """``renew``, its held lease's statement sent on ``connection`` (the leader lock's
        own: app.runtime.standing); whether that statement went through. When it did not,
        nothing is renewed nor recorded, and ``renew`` is for the caller to ask."""
        try:
            held = replicarows.renew_held(connection, self.me, self.lease_s)
        except Exception:  # any: the connection dead, or the database without the table
            return False
        self._renew(lambda: held)
        return True

    def _renew(self, held: Callable[[], replicarows.Leases | None]) -> View | None:
        if not self.contested:
            return None
        try:
            leases = held() or self._renewed()
        except Exception as exc:  # any: the database away, or without the table yet
            self.no_table = isinstance(exc, ProgrammingError)
            if self.problem is None:
                log.warning("replica lease not renewed: %s", describe(exc))
            self.problem = describe(exc)
            return self.view()
        members = tuple(
            Member(lease.id, epoch_ms(lease.effective_at), epoch_ms(lease.expires_at))
            for lease in leases.leases
        )
        with self._lock:
            self._view = View(self.me, members, epoch_ms(leases.now))
            self._read_at = self._monotonic()
        self.problem, self.no_table = None, False
        return self._view

    def _renewed_held(self) -> replicarows.Leases | None:
        """The lease this replica holds renewed in one round trip; None: not held."""
        engine = self.sessions.kw["bind"]
        with autocommit(engine) as connection:
            return replicarows.renew_held(connection, self.me, self.lease_s)

    def _renewed(self) -> replicarows.Leases:
        """Renewed or joined (the join lock, forgotten leases deleted), in a transaction."""
        with self.sessions.begin() as session:
            return replicarows.renew(
                session, self.me, self.lease_s, self.settle_s, self.leading(), self._dead
            )

    def _dead(self, lease_id: str) -> bool:
        return predecessor_dead(lease_id, self.me)

    def leave(self) -> None:
        """End this replica's lease (stopping): the others take its targets at once."""
        if self.contested and self._view is not None:
            with self.sessions.begin() as session:
                replicarows.end_lease(session, self.me)

    # What it owns ---------------------------------------------------------------------

    def view(self) -> View | None:
        """The leases as last read; not ``current`` once read ``lease_s / 2`` ago or more."""
        with self._lock:
            view, read_at = self._view, self._read_at
        if view is None:
            return None
        current = self._monotonic() - read_at < self.lease_s / 2
        return view if current else replace(view, current=False)

    @property
    def waiting(self) -> bool:
        """On PostgreSQL, no lease read yet, nor the lead: this replica owns nothing."""
        return self.contested and self._view is None and not self._falls_back()

    def _falls_back(self) -> bool:
        return self.no_table and self.fallback()

    def stale_s(self) -> float | None:
        """Seconds since the leases were last read, if that makes them not current."""
        view = self.view()
        if view is None or view.current:
            return None
        return self._monotonic() - self._read_at

    def owns(self, target: str, at_ms: int) -> bool:
        """Whether this replica probes ``target``'s slot at ``at_ms`` (or evaluates it then)."""
        if not self.contested:
            return True
        view = self.view()
        return self._falls_back() if view is None else view.owns(target, at_ms)

    def share(self, targets: Iterable[str], at_ms: int | None = None) -> list[str]:
        at = now_ms() if at_ms is None else at_ms
        if not self.contested:
            return list(targets)
        view = self.view()
        if view is None:
            return list(targets) if self._falls_back() else []
        return view.share(targets, at)

    def live(self, at_ms: int | None = None) -> int:
        """How many replicas are live now, as this one sees them (itself included)."""
        if not self.contested:
            return 1
        view = self.view()
        if view is None:
            return int(self._falls_back())
        return len(view.live(now_ms() if at_ms is None else at_ms))
