"""After every run: detectors → signals → alert transitions. The same code runs in
production (runs from the database) and in backtests (runs from a CSV, simulated clock).

The evaluator keeps what detection needs between runs: open alerts, recently resolved
ones held back from firing again (``Cooling``), each vantage's tail CUSUM and deadline-miss
ledger, and the references (rebuilt once a day, or when a change is acknowledged, from the
previous ``reference_days`` minus the runs inside alerts that fired). Which detectors run,
and everything about each, comes from the registry (app/analysis/detectors/).
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from app.alerts import silent
from app.alerts.crossvantage import CrossVantage
from app.alerts.history import History
from app.alerts.identity import Alert, Identity, Transition
from app.alerts.references import REBUILD_EVERY, current_reference
from app.alerts.state import Cooling, Position, Rules, State, step
from app.alerts.summary import summarize_alert
from app.analysis import detectors as d
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger
from app.analysis.tail import TailState


@dataclass
class VantageState:
    tail: TailState = field(default_factory=TailState)
    last_run: str | None = None
    reference: d.Reference | None = None
    rebase_at: datetime | None = None
    # Periods inside alerts that fired: kept out of the reference.
    excluded: list[tuple[datetime, datetime | None]] = field(default_factory=list)
    # Derived from the history's run counts, rebuilt with the reference (so a run flushed
    # late from a spool counts from the next rebuild on), never stored.
    misses: MissLedger | None = None
    misses_built_at: datetime | None = None


class Evaluator:
    def __init__(
        self,
        history: History,
        params_for: Callable[[str], d.DetectorParams],
        seed: int = 0,
    ) -> None:
        self.history = history
        self.params_for = params_for
        self.seed = seed
        self._rngs: dict[str, np.random.Generator] = {}
        self.alerts: dict[Identity, Alert] = {}
        self.cooling: dict[Identity, Cooling] = {}
        self.vantages: dict[tuple[str, str], VantageState] = {}
        self._rounds: dict[str, dict[str, str]] = {}
        self._identities: dict[tuple[str, str, str, str], Identity] = {}
        self.cross = CrossVantage(self)

    # Entry points ----------------------------------------------------------------

    def evaluate(self, target: str, vantage: str, now: datetime) -> list[Transition]:
        """Evaluate ``target`` after a new run at ``vantage``."""
        params = self.params_for(target)
        state = self.state(target, vantage)
        recent = self.history.last(target, vantage, max(params.recent_runs, params.failing_runs))
        if not recent or recent[-1].run_id == state.last_run:
            return []
        window = recent[-params.recent_runs :]
        reference = self._reference(target, vantage, now, params, window)
        self._advance(state, recent[-1], reference, params, now)
        state.last_run = recent[-1].run_id
        signals = self._vantage_signals(target, vantage, window, recent, reference, params, now)
        signals |= self.cross.signals(target, vantage, now, params)
        return self._apply(signals, now, params)

    def acknowledge(self, alert_id: str, now: datetime) -> Transition | None:
        """A person accepts the new normal: resolved, and the reference re-bases."""
        for identity, alert in list(self.alerts.items()):
            if alert.id == alert_id:
                for vantage in self._covered(identity, now):
                    state = self.state(identity.target, vantage)
                    state.rebase_at, state.reference = alert.opened_at, None
                    state.excluded = [span for span in state.excluded if span[1] is not None]
                params = self.params_for(identity.target)
                return self._move(identity, d.Signal.ACK, now, {}, rules_for(identity.kind, params))
        return None

    def state(self, target: str, vantage: str) -> VantageState:
        # Asked for several times a run: a new VantageState only for a new key.
        state = self.vantages.get((target, vantage))
        if state is None:
            state = self.vantages[(target, vantage)] = VantageState()
        return state

    def rng(self, target: str) -> np.random.Generator:
        """``target``'s own random numbers: its bootstrap draws, so its alerts, depend on
        the seed and its name, not on which targets were evaluated before it."""
        rng = self._rngs.get(target)
        if rng is None:
            rng = self._rngs[target] = np.random.default_rng([self.seed, _name_key(target)])
        return rng

    # Per-vantage detectors ---------------------------------------------------------

    def _vantage_signals(
        self,
        target: str,
        vantage: str,
        window: list[RunData],
        recent: list[RunData],
        reference: d.Reference | None,
        params: d.DetectorParams,
        now: datetime,
    ) -> dict[Identity, d.Finding]:
        state = self.state(target, vantage)
        assert state.misses is not None
        inputs = d.Inputs(
            window=window,
            recent=recent,
            reference=reference,
            params=params,
            rng=self.rng(target),
            now=now,
            tail=state.tail,
            onset=lambda count: self.history.last(target, vantage, count),
            misses=state.misses,
            dominant_open=self.cross.open_at(target, vantage) is not None,
            active=frozenset(
                (i.kind, i.severity)
                for i, alert in self.alerts.items()
                if i.target == target and i.vantage == vantage and alert.position.active
            ),
        )
        found: dict[Identity, d.Finding] = {}
        for name in params.enabled:
            detector = d.DETECTORS[name]
            for finding in detector.judge(inputs) if detector.judge else ():
                severity = finding.severity or detector.severity
                found[self._identity(name, target, vantage, severity)] = finding
        return found

    def _identity(self, kind: str, target: str, vantage: str, severity: str) -> Identity:
        """A per-vantage alert's identity, made once (several are asked for every run)."""
        key = (kind, target, vantage, severity)
        identity = self._identities.get(key)
        if identity is None:
            identity = Identity(kind, target, vantage, "vantage", severity=severity)
            self._identities[key] = identity
        return identity

    def _advance(
        self,
        state: VantageState,
        run: RunData,
        reference: d.Reference | None,
        params: d.DetectorParams,
        now: datetime,
    ) -> None:
        """What the newest run adds to the detectors' memory, before they judge."""
        if reference is not None and reference.tail is not None:
            d.advance_tail(state.tail, run, reference.tail, params)
        built = state.misses_built_at
        if state.misses is None or built is None or now - built >= REBUILD_EVERY:
            start = now - params.slo.budget_window
            counts = self.history.counts(run.target, run.vantage, start, now)
            state.misses, state.misses_built_at = MissLedger.of(counts, now), now
        state.misses.add(run.at, run.timed, run.censored)
        state.misses.prune(now - params.slo.budget_window)

    # Alerts --------------------------------------------------------------------------

    def _apply(
        self, signals: dict[Identity, d.Finding], now: datetime, params: d.DetectorParams
    ) -> list[Transition]:
        evaluated = {(i.kind, i.target, i.vantage) for i in signals}
        for identity, alert in list(self.alerts.items()):
            unsignalled = identity not in signals and alert.position.state is State.PENDING
            if unsignalled and (identity.kind, identity.target, identity.vantage) in evaluated:
                signals[identity] = d.Finding(d.Signal.HOLD)  # a pending shift that moved on
        moved = [
            self._move(i, f.signal, now, f.numbers, rules_for(i.kind, params))
            for i, f in signals.items()
            if self._may_move(i, f.signal)
            and not self._held_back(i, f.signal, now, timedelta(seconds=params.refire_hold))
        ]
        return [transition for transition in moved if transition is not None]

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
        alert.numbers = numbers or alert.numbers
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
                    self.state(alert.identity.target, vantage).excluded.append((now, None))
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
            state = self.state(alert.identity.target, vantage)
            state.excluded = [(start, end or now) for start, end in state.excluded]
            if detector is not None and detector.on_resolve is not None:
                detector.on_resolve(state.tail)

    # References -------------------------------------------------------------------------

    def _covered(self, identity: Identity, now: datetime) -> list[str]:
        if identity.target == silent.TARGET:
            return []  # a vantage's silence covers no run
        if identity.vantage is not None:
            return [identity.vantage]
        return self.history.vantages(identity.target, now)

    def _reference(
        self,
        target: str,
        vantage: str,
        now: datetime,
        params: d.DetectorParams,
        window: list[RunData],
    ) -> d.Reference | None:
        state = self.state(target, vantage)
        return current_reference(self.history, state, target, vantage, now, params, window)


def rules_for(kind: str, params: d.DetectorParams) -> Rules:
    detector = d.DETECTORS.get(kind)
    confirm = detector.confirm(params) if detector is not None else params.confirm
    return Rules(confirm, params.recover, timedelta(seconds=params.keep_firing_for))


def _name_key(target: str) -> int:
    return zlib.crc32(target.encode())  # stable across processes, unlike hash()
