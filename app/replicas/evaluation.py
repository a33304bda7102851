"""Alert evaluation by the owner of a run's target, whoever stored the run.

A run probed here was probed by the owner of its slot; a run an agent pushed may reach any
replica. Either way it is evaluated here only if this replica owns its target now; else the
owner is asked, through the database (``app.store.replicarows.request``), and evaluates
it at once: the request is announced (``app.store.wakeups``), and the owner's listener
rings ``requested``, its claim's doorbell. A claim also follows each renewal that gave this
replica targets (requests its last owner left), and one looks at least every
``SAFETY_POLL_S``; while requests for other replicas' targets wait (an owner dead, its lease
not over yet), every ``CLAIM_EVERY_S``. A run finished just after its target moved is
thus evaluated by the new owner, never by two.

The evaluator keeps each target's memory (open alerts, the detectors' state) in the process
that evaluates it. A replica that takes a target over reads that memory back from the
database first (``AlertEngine.adopt``): another replica evaluated the target until then.
An acknowledgement may reach any replica: it reads the alert's target back first, and
then asks the owner (an evaluation request with no vantage) to read it back in turn.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from app.alerts.engine import AlertEngine
from app.alerts.identity import Transition
from app.clock import utcnow
from app.replicas.membership import Replicas, now_ms
from app.store import replicarows
from app.store.db import autocommit, is_transient
from app.store.reads.alertreads import alert_by_id
from app.store.records import RunRecord, RunStatus
from app.store.wakeups import Doorbell

log = logging.getLogger(__name__)

CLAIM_EVERY_S = 1.0  # while requests for other replicas' targets wait
SAFETY_POLL_S = 30.0  # a claim at least this often, woken or not
READ_BACK = ""  # a request's vantage when the owner is only to read its memory back


class OwnerEvaluation:
    def __init__(
        self, alerts: AlertEngine, replicas: Replicas, targets: Callable[[], Iterable[str]]
    ) -> None:
        self.alerts = alerts
        self.replicas = replicas
        self.targets = targets  # every target's name, as the targets file says now
        self.asked = 0  # runs whose evaluation was asked of another replica
        self.claimed = 0  # evaluations other replicas asked of this one, done
        self._adopted: set[str] = set()  # targets whose memory was read since taken
        self._owned: set[str] = set()  # this replica's share at the last renewal
        self.requested = Doorbell()  # rung when a replica asks this one for an evaluation
        self.others_waiting = False  # the last claim left requests for other replicas
        self._lock = threading.Lock()

    def evaluate_after(self, run: RunRecord) -> list[Transition]:
        """``run``'s target evaluated here if this replica owns it, else its owner asked."""
        if run.status != RunStatus.COMPLETE:
            return []
        if not self.replicas.contested:
            return self.alerts.evaluate_after(run)
        if self.replicas.waiting:  # stored before the service's first renewal (a push at start)
            self.replicas.renew()
        if not self.replicas.owns(run.target, now_ms()):
            with self.replicas.sessions.begin() as session:
                replicarows.request(session, run.target, run.vantage, utcnow())
            self.asked += 1
            return []
        return self._evaluate(run.target, run.vantage)

    def _evaluate(self, target: str, vantage: str) -> list[Transition]:
        with self._lock:
            adopt = target not in self._adopted
            self._adopted.add(target)
        if adopt:
            try:
                self.alerts.adopt(target)
            except BaseException:
                with self._lock:
                    self._adopted.discard(target)
                raise
        return self.alerts.evaluate(target, vantage)

    def acknowledge(self, alert_id: str, by: str, now: datetime) -> Transition | None:
        """``AlertEngine.acknowledge``, on the alert's target as the database holds it."""
        if not self.replicas.contested:
            return self.alerts.acknowledge(alert_id, by, now)
        target = self._target_of(alert_id)
        if target is not None:
            self.alerts.adopt(target)
        transition = self.alerts.acknowledge(alert_id, by, now)
        if target is not None and not self.replicas.owns(target, now_ms()):
            with self.replicas.sessions.begin() as session:
                replicarows.request(session, target, READ_BACK, utcnow())
        return transition

    def _target_of(self, alert_id: str) -> str | None:
        try:
            key = uuid.UUID(alert_id)
        except ValueError:
            return None  # the engine says it is not found
        with self.replicas.sessions() as session:
            row = alert_by_id(session, key)
        return None if row is None else row.target

    def forget_lost(self) -> None:
        """After each renewal: targets owned no more are read back if taken again, and
        targets taken have their waiting requests claimed now."""
        owned = set(self.replicas.share(self.targets()))
        with self._lock:
            self._adopted &= owned
            taken, self._owned = bool(owned - self._owned), owned
        if taken and self.replicas.contested:
            self.requested.ring()

    def claim_once(self) -> int:
        """Evaluate what other replicas asked of this one; how many were evaluated."""
        engine = self.replicas.sessions.kw["bind"]
        with autocommit(engine) as connection:
            if not replicarows.any_requested(connection):  # one round trip, no BEGIN
                self.others_waiting = False
                return 0
        mine = self.replicas.share(self.targets())
        with self.replicas.sessions.begin() as session:
            asked = replicarows.claim(session, mine)
            self.others_waiting = replicarows.any_requested(session.connection())
        for target, vantage in asked:
            if vantage == READ_BACK:
                with self._lock:
                    self._adopted.discard(target)  # read back at its next evaluation
                continue
            try:
                self._evaluate(target, vantage)
            except Exception:
                log.exception("evaluation of %s at %s asked by a replica failed", target, vantage)
        self.claimed += len(asked)
        return len(asked)

    async def claim_loop(self) -> None:
        """For ever, on PostgreSQL: a claim when ``requested`` rings, else every
        ``SAFETY_POLL_S`` (``CLAIM_EVERY_S`` while other replicas' requests wait)."""
        while True:
            await self.requested.wait(CLAIM_EVERY_S if self.others_waiting else SAFETY_POLL_S)
            try:
                await asyncio.to_thread(self.claim_once)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                log.warning("evaluations asked by replicas not claimed: %s", exc)
