"""After every run: detectors → signals → alert transitions. The same code runs in
production (runs from the database) and in backtests (runs from a CSV, simulated clock).

    evaluate(target, vantage, now) ─▶ PerVantage.signals ───┬─▶ apply ─▶ transitions
                                      CrossVantage.signals ─┘

The evaluator keeps what detection needs between runs: open alerts, recently resolved
ones held back from firing again (``Cooling``), each vantage's ``DetectorMemory`` (tail
CUSUM, deadline-miss ledger, and the reference: rebuilt once a day, or when a change is
acknowledged, from the previous ``reference_days`` minus the runs inside alerts that
fired), and each target's last round of vantages combined. Which detectors run, and
everything about each, comes from the registry (app/analysis/detectors/).

Its boundary: ``evaluate`` and ``acknowledge`` (a run, a person); ``apply`` (signals judged
elsewhere: ``vantage_silent``); ``snapshot``/``restore`` (one target's memory, to undo an
evaluation that failed to commit); ``load`` (memory read back after a start); ``alerts``,
``cooling``, ``memory``/``memories`` and ``rng`` to read it.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, TypeVar

import numpy as np

from app.alerts import facts, silent
from app.alerts.crossvantage import CrossVantage
from app.alerts.history import History
from app.alerts.identity import Alert, Identity, Transition
from app.alerts.memory import DetectorMemory, Snapshot
from app.alerts.pervantage import MaintenanceSpans, PerVantage, no_maintenance
from app.alerts.state import Cooling, Position, Rules, State, step
from app.alerts.summary import summarize_alert
from app.analysis import detectors as d

T = TypeVar("T")


class Evaluator:
    def __init__(
        self,
        history: History,
        params_for: Callable[[str], d.DetectorParams],
        seed: int = 0,
        maintenance: MaintenanceSpans = no_maintenance,
    ) -> None:
        self.history = history
        self.params_for = params_for
        self.seed = seed
        self._rngs: dict[str, np.random.Generator] = {}
        self.alerts: dict[Identity, Alert] = {}
        self.cooling: dict[Identity, Cooling] = {}
        self._memories: dict[str, dict[str, DetectorMemory]] = {}  # by target, then vantage
        # A run during a maintenance window enters neither a reference nor an error budget.
        self._per_vantage = PerVantage(history, maintenance)
        self._cross = CrossVantage(history)

    # Entry points ----------------------------------------------------------------

    def evaluate(self, target: str, vantage: str, now: datetime) -> list[Transition]:
        """Evaluate ``target`` after a new run at ``vantage``."""
        params = self.params_for(target)
        with self.history.evaluation():
            signals = self._per_vantage.signals(self, target, vantage, now, params)
            if signals is None:
                return []
            signals |= self._cross.signals(self, target, vantage, now, params)
        self._hold_moved_on(signals)
        return self.apply(signals, now, lambda identity: rules_for(identity.kind, params))

    def acknowledge(self, alert_id: str, now: datetime) -> Transition | None:
        """A person accepts the new normal: resolved, and the reference re-bases."""
        for identity, alert in list(self.alerts.items()):
            if alert.id == alert_id:
                for vantage in self._covered(identity, now):
                    memory = self.memory(identity.target, vantage)
                    memory.rebase_at, memory.reference = alert.opened_at, None
                    memory.reference_wait = None  # the window starts elsewhere now
                    memory.excluded = [span for span in memory.excluded if span[1] is not None]
                params = self.params_for(identity.target)
                return self._move(identity, d.Signal.ACK, now, {}, rules_for(identity.kind, params))
        return None

    def apply(
        self,
        signals: Mapping[Identity, d.Finding],
        now: datetime,
        rules: Callable[[Identity], Rules],
    ) -> list[Transition]:
        """Each signal moves its alert by the state table under ``rules(identity)``; the
        changes, in the order of ``signals``. Only a hit opens an alert, and a hit for one
        that resolved lately is held back for ``Rules.refire_hold`` (no flapping)."""
        moved = []
        for identity, finding in signals.items():
            if not self._may_move(identity, finding.signal):
                continue
            rule = rules(identity)
            if finding.confirmed:
                rule = replace(rule, confirm=1)
            if not self._held_back(identity, finding.signal, now, rule.refire_hold):
                moved.append(self._move(identity, finding.signal, now, finding.numbers, rule))
        return [transition for transition in moved if transition is not None]

    # Memory -------------------------------------------------------------------------

    def memory(self, target: str, vantage: str) -> DetectorMemory:
        """The detectors' memory of ``target`` at ``vantage``, made on first ask."""
        # Asked for several times a run: a new DetectorMemory only for a new key.
        by_vantage = self._memories.get(target)
        if by_vantage is None:
            by_vantage = self._memories[target] = {}
        memory = by_vantage.get(vantage)
        if memory is None:
            memory = by_vantage[vantage] = DetectorMemory()
        return memory

    def memories(self, target: str) -> Mapping[str, DetectorMemory]:
        """The detectors' memory of ``target`` at each vantage, by vantage."""
        return self._memories.get(target, {})

    def rng(self, target: str) -> np.random.Generator:
        """``target``'s own random numbers: its bootstrap draws, so its alerts, depend on
        the seed and its name, not on which targets were evaluated before it."""
        rng = self._rngs.get(target)
        if rng is None:
            rng = self._rngs[target] = np.random.default_rng([self.seed, _name_key(target)])
        return rng

    def load(
        self,
        alerts: Iterable[Alert],
        cooling: Mapping[Identity, Cooling],
        memories: Mapping[tuple[str, str], DetectorMemory],
    ) -> None:
        """Memory read back after a start: open alerts, resolved ones held back, and the
        detectors' memory by (target, vantage)."""
        self.alerts.update({alert.identity: alert for alert in alerts})
        self.cooling.update(cooling)
        for (target, vantage), memory in memories.items():
            self._memories.setdefault(target, {})[vantage] = memory
            # The last combined round is not stored: take it to have seen every vantage's
            # last run, so a round after a restart needs a new run at each (never an
            # early confirm).
            if memory.last_run is not None:
                self._cross.rounds.setdefault(target, {})[vantage] = memory.last_run

    def snapshot(self, target: str) -> Snapshot:
        """A copy of all that an evaluation of ``target`` (or an acknowledgement of one of
        its alerts) can change: alerts, holds and rounds are keyed by their target, and it
        covers only its own vantages' memory. ``restore`` puts it back."""
        rounds = self._cross.rounds.get(target)
        return Snapshot.of(target, self.alerts, self.cooling, self.memories(target), rounds)

    def restore(self, saved: Snapshot) -> None:
        """``saved.target``'s memory as it was when ``saved`` was taken; every other
        target's as it is (the target's alerts keep their order among themselves)."""
        fresh = saved.copy()
        _put_back(self.alerts, fresh.alerts, fresh.target)
        _put_back(self.cooling, fresh.cooling, fresh.target)
        self._memories[fresh.target] = fresh.memories
        if fresh.last_round is None:
            self._cross.rounds.pop(fresh.target, None)
        else:
            self._cross.rounds[fresh.target] = fresh.last_round

    # Alerts --------------------------------------------------------------------------

    def _hold_moved_on(self, signals: dict[Identity, d.Finding]) -> None:
        """A pending alert of a detector that judged again but named another key (a
        pending shift that moved on) hears a hold."""
        evaluated = {(i.kind, i.target, i.vantage) for i in signals}
        for identity, alert in list(self.alerts.items()):
            unsignalled = identity not in signals and alert.position.state is State.PENDING
            if unsignalled and (identity.kind, identity.target, identity.vantage) in evaluated:
                signals[identity] = d.Finding(d.Signal.HOLD)

    def _may_move(self, identity: Identity, signal: d.Signal) -> bool:
        """Only a hit moves an alert that is not open (and no hold is counting)."""
        return signal is d.Signal.HIT or identity in self.alerts or identity in self.cooling

    def _held_back(
        self, identity: Identity, signal: d.Signal, now: datetime, hold: timedelta
    ) -> bool:
        """A hit for a key that resolved lately is held back (no flapping)."""
        cooling = self.cooling.get(identity)
        if cooling is None or identity in self.alerts:
            return False
        cooling.saw(signal, now)
        if cooling.over(hold, now):
            del self.cooling[identity]
            return False
        return signal is d.Signal.HIT

    def _move(
        self,
        identity: Identity,
        signal: d.Signal,
        now: datetime,
        numbers: dict[str, Any],
        rules: Rules,
    ) -> Transition | None:
        alert = self.alerts.get(identity)
        before = alert.position if alert else Position()
        after = step(before, signal, rules, now)
        refresh = before.state is after.state is State.FIRING
        if after == before and not refresh:
            return None
        if alert is None:
            alert = Alert(str(uuid.uuid4()), identity, before, opened_at=now)
        alert.numbers = facts.kept(alert.numbers, numbers, fired=before.active)
        alert.summary = summarize_alert(identity, alert.numbers)
        alert.position = after
        self._record(alert, before, now)
        return Transition(
            alert.id,
            identity,
            now,
            before.state,
            after.state,
            alert.summary,
            dict(alert.numbers),
            signal is d.Signal.ACK,
        )

    def _record(self, alert: Alert, before: Position, now: datetime) -> None:
        state = alert.position.state
        detector = d.DETECTORS.get(alert.identity.kind)
        if state is State.FIRING and not before.active:
            alert.fired_at = now
            if detector is None or detector.excludes_runs:
                for vantage in self._covered(alert.identity, now):
                    self.memory(alert.identity.target, vantage).excluded.append((now, None))
        if state in (State.INACTIVE, State.RESOLVED):
            self.alerts.pop(alert.identity, None)
            if before.active:
                self._close(alert, now)
        else:
            self.alerts[alert.identity] = alert

    def _close(self, alert: Alert, now: datetime) -> None:
        alert.resolved_at = now
        self.cooling[alert.identity] = Cooling(quiet_since=now)
        detector = d.DETECTORS.get(alert.identity.kind)
        for vantage in self._covered(alert.identity, now):
            memory = self.memory(alert.identity.target, vantage)
            memory.excluded = [(start, end or now) for start, end in memory.excluded]
            if detector is not None and detector.on_resolve is not None:
                detector.on_resolve(memory)
            if (
                detector is not None
                and detector.rebases
                and _lasted(alert, now, detector.rebase_after)
            ):
                # Told and over: runs from before it would only tell it again, by another
                # detector (its own runs stay out: the reference is what came after).
                since = [at for at in (memory.rebase_at, alert.opened_at) if at is not None]
                memory.rebase_at, memory.reference = max(since), None

    # Vantages -----------------------------------------------------------------------------

    def _covered(self, identity: Identity, now: datetime) -> list[str]:
        if identity.target == silent.TARGET:
            return []  # a vantage's silence covers no run
        if identity.vantage is not None:
            return [identity.vantage]
        return self.history.vantages(identity.target, now)


def rules_for(kind: str, params: d.DetectorParams) -> Rules:
    detector = d.DETECTORS.get(kind)
    confirm = detector.confirm(params) if detector is not None else params.confirm
    return Rules(
        confirm,
        params.recover,
        timedelta(seconds=params.keep_firing_for),
        timedelta(seconds=params.refire_hold),
    )


def _put_back(table: dict[Identity, T], kept: dict[Identity, T], target: str) -> None:
    """``target``'s entries of ``table`` replaced by ``kept`` (the others left in place)."""
    for identity in [i for i in table if i.target == target]:
        del table[identity]
    table.update(kept)


def _name_key(target: str) -> int:
    return zlib.crc32(target.encode())  # stable across processes, unlike hash()


def _lasted(alert: Alert, now: datetime, least: timedelta) -> bool:
    """The alert fired, and stayed told ``least`` or longer."""
    return alert.fired_at is not None and now - alert.fired_at >= least
