"""Alert transitions into rows, and the evaluator's memory kept in the database.

    evaluate_after(run) ─▶ Evaluator.evaluate ─▶ transitions ─▶ one transaction:
        alerts (upserted) · alert_transitions (changes of state) ·
        deliveries (the outbox the sender drains) · detector_state (the memories that
        changed: app.alerts.memorysaves; alone if no alert moved)

Notified: transitions into ``firing``, refreshes of a firing alert (which keep
Alertmanager's ``endsAt`` ahead), and ``resolved`` for an alert that fired. A delivery
whose alert matches an active silence, or whose target is in an open maintenance window,
is written ``silenced`` and never sent.

The evaluator's memory (open alerts, each vantage's CUSUM, exclusions, re-bases) is read
back on the first use after a start, so a restart neither re-fires nor forgets an alert.
Should a transaction fail, the evaluator's memory of that target is put back as it was
before that evaluation (``Evaluator.snapshot``/``restore``): memory and database never
disagree about an alert.

Errors: ``AlertError`` ─┬─ ``AlertNotFound``  no alert has that id
                        └─ ``AlertNotOpen``   it exists, but its episode is over
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from app.alerts import rows, silences, silent
from app.alerts.evaluate import Evaluator
from app.alerts.identity import Alert, Identity, Transition
from app.alerts.maintenance import Maintenance
from app.alerts.memorysaves import MemorySaves
from app.alerts.state import Rules, State
from app.analysis.detectors import Finding
from app.clock import utcnow
from app.store import alertwrites
from app.store.alertwrites import DetectorState
from app.store.db import Session, Sessions, write_transaction
from app.store.reads.alertreads import alert_by_id
from app.store.records import RunRecord, RunStatus
from app.store.silencerows import SilenceRecord

log = logging.getLogger(__name__)

# Resolved alerts this recent are read back as held back (longer holds: cut by a restart).
COOLING_LOOKBACK = timedelta(days=2)


class AlertError(Exception):
    pass


class AlertNotFound(AlertError):
    pass


class AlertNotOpen(AlertError):
    pass


class AlertEngine:
    def __init__(
        self,
        sessions: Sessions,
        evaluator: Evaluator,
        notifiers_for: Callable[[str], list[str]],
        clock: Callable[[], datetime] = utcnow,
        wants_refresh: Callable[[str], bool] = lambda _notifier: True,
        maintenance: Maintenance | None = None,
        queued: Callable[[], None] = lambda: None,
    ) -> None:
        self.sessions = sessions
        self.queued = queued  # told once notifications are committed (the sender's doorbell)
        self.evaluator = evaluator
        self.notifiers_for = notifiers_for
        # Only some notifiers hear "still firing" (Alertmanager, whose endsAt it moves on);
        # a chat message on every run would be noise.
        self.wants_refresh = wants_refresh
        self.clock = clock
        # Scheduled windows hold notifications like a silence (and more: app.alerts.maintenance).
        self.maintenance = maintenance
        # One evaluation at a time: the evaluator is not thread-safe, and the order of
        # transitions must be the order of their rows.
        self._lock = threading.Lock()
        self._restored = False
        self._saves = MemorySaves()  # only memories that changed are written

    # Evaluation ----------------------------------------------------------------------------

    def evaluate_after(self, run: RunRecord) -> list[Transition]:
        """Evaluate ``run``'s target and vantage now that ``run`` is stored; persist it all."""
        if run.status != RunStatus.COMPLETE:
            return []
        return self.evaluate(run.target, run.vantage)

    def evaluate(self, target: str, vantage: str) -> list[Transition]:
        """Evaluate ``target`` after a new run at ``vantage``; persist it all."""
        with self._lock:
            self._restore()
            now = self.clock()
            with self._undo_on_error(target) as alerts:
                transitions = self.evaluator.evaluate(target, vantage, now)
                states = self._changed(target, now)
                if transitions or not rows.save_states_alone(self.sessions, states):
                    # On SQLite: in turn with the runs being stored, never polling for the lock.
                    with write_transaction(self.sessions) as session:
                        self._persist(session, target, transitions, alerts, states, now)
                self._saves.written(states)
        self._announced(transitions)
        return transitions

    def adopt(self, target: str) -> None:
        """``target``'s memory read back from the database, as the replica that evaluated
        it until this one took it over left it (app.replicas.evaluation)."""
        with self._lock:
            self._restore()
            since = self.clock() - COOLING_LOOKBACK
            with self.sessions() as session:
                saved = rows.snapshot_of(session, target, since)
            self.evaluator.restore(saved)
            self._saves.forget(target)

    def judge_vantages(
        self, heard: Iterable[silent.Heard], since: datetime, after: int
    ) -> list[Transition]:
        """``vantage_silent`` for each vantage ``heard`` of (and a clear for one whose alert
        is open but which is no longer listed); persisted like any evaluation."""
        with self._lock:
            self._restore()
            now = self.clock()
            with self._undo_on_error(silent.TARGET) as alerts:
                transitions = self._settle_silences(list(heard), since, now, after)
                states = self._changed(silent.TARGET, now)
                if transitions or states:  # most checks: nothing to write, no transaction
                    with write_transaction(self.sessions) as session:
                        self._persist(session, silent.TARGET, transitions, alerts, states, now)
                self._saves.written(states)
        self._announced(transitions)
        return transitions

    def _settle_silences(
        self, heard: list[silent.Heard], since: datetime, now: datetime, after: int
    ) -> list[Transition]:
        """One ``Heard`` per vantage: each judged, in the order given, then those whose
        alert is open but which are no longer listed."""
        listed = {h.vantage for h in heard}
        gone = [
            silent.Heard(i.vantage, None, None)
            for i in self.evaluator.alerts
            if i.kind == silent.KIND and i.vantage is not None and i.vantage not in listed
        ]
        signals: dict[Identity, Finding] = {}
        rules: dict[Identity, Rules] = {}
        for one in heard + gone:
            for identity, finding in silent.findings(one, since, now, after).items():
                signals[identity] = finding
                rules[identity] = silent.rules(one, after)
        return self.evaluator.apply(signals, now, rules.__getitem__)

    def acknowledge(self, alert_id: str, by: str, now: datetime) -> Transition | None:
        """A person accepts the new normal: the alert resolves and the reference re-bases."""
        with self._lock:
            self._restore()
            alert = self._open(alert_id)
            with self._undo_on_error(alert.identity.target) as alerts:
                transition = self.evaluator.acknowledge(alert.id, now)
                if transition is None:
                    raise AlertNotOpen(f"alert {alert_id} is not open")
                target = alert.identity.target
                states = self._changed(target, now)
                with write_transaction(self.sessions) as session:
                    self._persist(session, target, [transition], alerts, states, now)
                    alertwrites.mark_acknowledged(session, uuid.UUID(alert.id), now, by)
                self._saves.written(states)
        self._announced([transition])
        return transition

    def restore(self) -> None:
        """Read the evaluator's state back from the database (done once, on first use)."""
        with self._lock:
            self._restore()

    # Silences ------------------------------------------------------------------------------

    def create_silence(
        self,
        matchers: Iterable[silences.Matcher | Mapping[str, Any]],
        starts_at: datetime,
        ends_at: datetime,
        created_by: str,
        comment: str = "",
    ) -> SilenceRecord:
        """``ValueError`` for no matchers, an invalid regex, or an end not after the start."""
        with self.sessions.begin() as session:
            return silences.add_silence(
                session, matchers, starts_at, ends_at, created_by, comment, self.clock()
            )

    def list_silences(self, active_only: bool = False) -> list[SilenceRecord]:
        with self.sessions() as session:
            return silences.silence_rows(session, self.clock(), active_only)

    def expire_silence(self, silence_id: uuid.UUID | str, now: datetime) -> SilenceRecord:
        """``SilenceNotFound`` for an unknown id."""
        with self.sessions.begin() as session:
            return silences.expire(session, silence_id, now)

    # Persisting ----------------------------------------------------------------------------

    def _persist(
        self,
        session: Session,
        target: str,
        transitions: list[Transition],
        alerts: dict[str, Alert],
        states: list[DetectorState],
        now: datetime,
    ) -> None:
        alerts = alerts | {alert.id: alert for alert in self.evaluator.alerts.values()}
        held = silences.active_silences(session, now) if transitions else []
        for transition in transitions:
            alert = alerts[transition.alert_id]
            rows.save_alert(session, alert, transition, now)
            step = None
            if transition.before is not transition.after:
                step = rows.save_transition(session, transition)
            if rows.notified(transition):
                silenced = any(s.matches(transition.identity.labels()) for s in held)
                silenced = silenced or self._in_window(transition.identity, now)
                payload = rows.payload(transition, alert, rows.ends_at(session, transition, now))
                for notifier in dict.fromkeys(self.notifiers_for(target)):
                    if transition.refresh and not self.wants_refresh(notifier):
                        continue
                    rows.add_delivery(session, alert, step, notifier, payload, silenced, now)
        rows.save_states(session, states)

    def _changed(self, target: str, now: datetime) -> list[DetectorState]:
        return self._saves.changed(target, self.evaluator.memories(target), now)

    def _announced(self, transitions: list[Transition]) -> None:
        rows.log_announced(transitions)
        if any(rows.notified(t) for t in transitions):
            self.queued()

    def _in_window(self, identity: Identity, now: datetime) -> bool:
        if self.maintenance is None:
            return False
        return self.maintenance.covers(identity.target, identity.vantage, now)

    # Restoring -----------------------------------------------------------------------------

    def _restore(self) -> None:
        if self._restored:
            return
        with self.sessions() as session:
            open_rows = alertwrites.alerts_opened_in(session, rows.OPEN_STATES)
            states = alertwrites.detector_states(session)
            since = self.clock() - COOLING_LOOKBACK
            resolved = alertwrites.resolved_since(session, State.RESOLVED.value, since)
            alerts = [rows.alert_of(row) for row in open_rows]
            cooling = {rows.identity_of(row): rows.cooling_of(row) for row in resolved}
            memories = {(row.target, row.vantage): rows.memory_of(row) for row in states}
        self.evaluator.load(alerts, cooling, memories)
        self._restored = True
        if alerts:
            log.info("%d open alert(s) restored", len(alerts))

    def _open(self, alert_id: str) -> Alert:
        for alert in self.evaluator.alerts.values():
            if alert.id == alert_id:
                return alert
        try:
            key = uuid.UUID(alert_id)
        except ValueError:
            raise AlertNotFound(f"no alert {alert_id!r}") from None
        with self.sessions() as session:
            row = alert_by_id(session, key)
        if row is None:
            raise AlertNotFound(f"no alert {alert_id!r}")
        raise AlertNotOpen(f"alert {alert_id} is {row.state}, not open")

    @contextmanager
    def _undo_on_error(self, target: str) -> Iterator[dict[str, Alert]]:
        """Yields ``target``'s open alerts by id (they leave the evaluator when they
        close); on an error, puts the evaluator's memory of ``target`` back as it was."""
        saved = self.evaluator.snapshot(target)
        alerts = {a.id: a for i, a in self.evaluator.alerts.items() if i.target == target}
        try:
            yield alerts
        except BaseException:
            self.evaluator.restore(saved)
            raise
