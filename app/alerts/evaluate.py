"""After every run: detectors → signals → alert transitions. The same code runs in
production (runs from the database) and in backtests (runs from a CSV, simulated clock).

The evaluator keeps what detection needs between runs: open alerts, each vantage's tail
CUSUM, and the references (rebuilt once a day, or when a change is acknowledged, from the
previous ``reference_days`` minus the runs inside alerts that fired).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from app.alerts.history import History
from app.alerts.identity import Alert, Identity, Transition
from app.alerts.state import Position, Rules, Signal, State, step
from app.alerts.summary import summarize_alert
from app.analysis import detectors as d
from app.analysis.dominance import Mix, phase_mix
from app.analysis.runs import RunData
from app.analysis.tail import TailReference, tail_reference

REBUILD_EVERY = timedelta(days=1)
STALE_AFTER_RUNS = 3  # a vantage whose last run is older than this many intervals is away


@dataclass
class Reference:
    built_at: datetime
    runs: int
    mix: Mix
    tail: TailReference | None
    composition: d.CompositionReference


@dataclass
class VantageState:
    tail_scores: tuple[float, ...] = (0.0,)  # the CUSUM above the reference p95
    tail_runs: int = 0  # runs since the CUSUMs were last both at 0
    last_run: str | None = None
    reference: Reference | None = None
    rebase_at: datetime | None = None
    # Periods inside alerts that fired: kept out of the reference.
    excluded: list[tuple[datetime, datetime | None]] = field(default_factory=list)


class Evaluator:
    def __init__(
        self,
        history: History,
        params_for: Callable[[str], d.DetectorParams],
        seed: int = 0,
    ) -> None:
        self.history = history
        self.params_for = params_for
        self.rng = np.random.default_rng(seed)
        self.alerts: dict[Identity, Alert] = {}
        self.vantages: dict[tuple[str, str], VantageState] = {}
        self._rounds: dict[str, dict[str, str]] = {}

    # Entry points ----------------------------------------------------------------

    def evaluate(self, target: str, vantage: str, now: datetime) -> list[Transition]:
        """Evaluate ``target`` after a new run at ``vantage``."""
        params = self.params_for(target)
        state = self._state(target, vantage)
        recent = self.history.last(target, vantage, max(params.recent_runs, params.failing_runs))
        if not recent or recent[-1].run_id == state.last_run:
            return []
        reference = self._reference(target, vantage, now, params, recent[-params.recent_runs :])
        self._advance_tail(state, recent, reference, params)
        state.last_run = recent[-1].run_id
        window = recent[-params.recent_runs :]
        signals = self._vantage_signals(target, vantage, window, recent, reference, params)
        signals |= self._dominant_signals(target, vantage, now, params)
        return self._apply(signals, now, params)

    def acknowledge(self, alert_id: str, now: datetime) -> Transition | None:
        """A person accepts the new normal: resolved, and the reference re-bases."""
        for identity, alert in list(self.alerts.items()):
            if alert.id == alert_id:
                for vantage in self._covered(identity, now):
                    state = self._state(identity.target, vantage)
                    state.rebase_at, state.reference = alert.opened_at, None
                    state.excluded = [span for span in state.excluded if span[1] is not None]
                params = self.params_for(identity.target)
                return self._move(identity, Signal.ACK, now, {}, rules_for(identity.kind, params))
        return None

    # Per-vantage detectors ---------------------------------------------------------

    def _vantage_signals(
        self,
        target: str,
        vantage: str,
        window: list[RunData],
        recent: list[RunData],
        reference: Reference | None,
        params: d.DetectorParams,
    ) -> dict[Identity, d.Finding]:
        found: dict[Identity, d.Finding] = {}
        enabled = set(params.enabled)

        def key(kind: str) -> Identity:
            return Identity(kind, target, vantage, "vantage")

        if "probe_failing" in enabled:
            found[key("probe_failing")] = d.failing_finding(recent, params)
        if "deadline_miss" in enabled:
            found[key("deadline_miss")] = d.deadline_finding(window, params)
        if reference is None or len(window) < params.recent_runs:
            return found
        state = self._state(target, vantage)
        if "tail_shift" in enabled and reference.tail is not None:
            since = min(max(state.tail_runs, params.recent_runs), 4 * params.recent_runs)
            onset = self.history.last(target, vantage, since)
            found[key("tail_shift")] = d.tail_finding(
                state.tail_scores, onset, reference.tail, params, self.rng
            )
        if "composition_shift" in enabled and not self._dominant_open(target, vantage):
            found[key("composition_shift")] = d.composition_finding(
                window, reference.composition, params, self.rng
            )
        return found

    def _advance_tail(
        self,
        state: VantageState,
        recent: list[RunData],
        reference: Reference | None,
        params: d.DetectorParams,
    ) -> None:
        if reference is None or reference.tail is None:
            return
        scores = d.next_tail_scores(state.tail_scores, recent[-1], reference.tail, params)
        state.tail_scores = scores
        state.tail_runs = state.tail_runs + 1 if max(scores) > 0 else 0

    # dominant_shift, across vantages -------------------------------------------------

    def _dominant_signals(
        self, target: str, vantage: str, now: datetime, params: d.DetectorParams
    ) -> dict[Identity, d.Finding]:
        if "dominant_shift" not in params.enabled:
            return {}
        present = self._present_vantages(target, now, params)
        if len(present) <= 1:
            return self._dominant_at(target, vantage, "vantage", params)
        if not self._new_round(target, present):
            return {}
        per_vantage = {v: self._dominant_at(target, v, "path", params) for v in present}
        return self._combine(target, present, per_vantage, params)

    def _dominant_at(
        self, target: str, vantage: str, scope: str, params: d.DetectorParams
    ) -> dict[Identity, d.Finding]:
        state = self._state(target, vantage)
        if state.reference is None:
            return {}
        window = self.history.last(target, vantage, min(params.dominant_runs, params.recent_runs))
        if len(window) < min(params.dominant_runs, params.recent_runs):
            return {}
        found: dict[Identity, d.Finding] = {}
        leader: str | None = state.reference.mix.dominant
        open_shift = self._open_dominant(target, vantage)
        if open_shift is not None and open_shift.position.active:
            old, new = open_shift.identity.from_phase, open_shift.identity.to_phase
            assert old is not None
            found[replace(open_shift.identity, vantage=vantage, scope=scope)] = (
                d.dominant_resolution(
                    window, old, new, state.reference.mix.dominant, params, self.rng
                )
            )
            leader = new or phase_mix(window).dominant
        if leader is None:
            return found
        candidate = d.challenger(phase_mix(window), leader, params)
        # The old leader coming back is the open shift's resolution, not a new shift.
        reverting = open_shift is not None and candidate == open_shift.identity.from_phase
        if candidate is not None and not reverting:
            identity = Identity("dominant_shift", target, vantage, scope, leader, candidate)
            if identity not in found:
                finding = d.dominant_finding(window, leader, candidate, params, self.rng)
                before = state.reference.mix.shares.get(leader, 0.0)
                finding.numbers["from_share_before_pct"] = round(100 * before, 1)
                found[identity] = finding
        return found

    def _combine(
        self,
        target: str,
        present: list[str],
        per_vantage: dict[str, dict[Identity, d.Finding]],
        params: d.DetectorParams,
    ) -> dict[Identity, d.Finding]:
        """Grouped by the phase that lost the lead. Two or more vantages agreeing: a
        service change (the new leader may differ by vantage: queue at one, network at
        another). One vantage alone: a path change, unless the new leader is a server
        phase, which needs a second vantage to agree."""
        by_loser: dict[str | None, dict[str, tuple[Identity, d.Finding]]] = {}
        for vantage, found in per_vantage.items():
            for identity, finding in found.items():
                by_loser.setdefault(identity.from_phase, {})[vantage] = (identity, finding)
        combined: dict[Identity, d.Finding] = {}
        for old, at in by_loser.items():
            hits = [v for v, (_, finding) in at.items() if finding.signal is Signal.HIT]
            findings = {v: finding for v, (_, finding) in at.items()}
            service = self._open_service(target, old)
            if service is not None or len(hits) >= 2:
                winners = {at[v][0].to_phase for v in hits}
                only = winners.pop() if len(winners) == 1 else None
                service = service or Identity("dominant_shift", target, None, "service", old, only)
                combined[service] = self._agreement(at, hits, present)
            elif len(hits) == 1 and at[hits[0]][0].to_phase not in d.SERVER_SIDE:
                combined[at[hits[0]][0]] = findings[hits[0]]
            for identity, finding in at.values():
                alert = self.alerts.get(identity)
                if alert is None or identity in combined:
                    continue
                if service is not None and alert.position.state is State.PENDING:
                    # The change reached a second vantage: the service alert is the one.
                    finding = d.Finding(Signal.HOLD, finding.numbers)
                combined[identity] = finding
        return combined

    def _open_service(self, target: str, old: str | None) -> Identity | None:
        for identity, alert in self.alerts.items():
            same = (identity.kind, identity.target, identity.vantage, identity.from_phase)
            if same == ("dominant_shift", target, None, old) and alert.position.open:
                return identity
        return None

    @staticmethod
    def _agreement(
        at: dict[str, tuple[Identity, d.Finding]], hits: list[str], present: list[str]
    ) -> d.Finding:
        leaders = {
            v: [identity.to_phase, finding.numbers.get("to_share_pct")]
            for v, (identity, finding) in at.items()
        }
        agreement = {"vantages_agreeing": len(hits), "vantages": len(present), "leaders": leaders}
        signals = [finding.signal for _, finding in at.values()]
        if len(hits) >= 2:
            return d.Finding(Signal.HIT, at[hits[0]][1].numbers | agreement)
        numbers = next(iter(at.values()))[1].numbers | agreement
        if signals and all(signal is Signal.CLEAR for signal in signals):
            return d.Finding(Signal.CLEAR, numbers)
        return d.Finding(Signal.HOLD, numbers)

    def _new_round(self, target: str, present: list[str]) -> bool:
        """Every present vantage has a new run since the last combined evaluation."""
        ids = {v: run.run_id for v in present for run in self.history.last(target, v, 1)}
        previous = self._rounds.get(target, {})
        if any(previous.get(v) == run_id for v, run_id in ids.items()):
            return False
        self._rounds[target] = ids
        return True

    def _present_vantages(self, target: str, now: datetime, params: d.DetectorParams) -> list[str]:
        present = []
        for vantage in self.history.vantages(target, now):
            last = self.history.last(target, vantage, 2)
            if not last:
                continue
            spacing = (last[-1].at - last[0].at) if len(last) == 2 else timedelta(hours=1)
            if now - last[-1].at <= STALE_AFTER_RUNS * max(spacing, timedelta(seconds=1)):
                present.append(vantage)
        return sorted(present)

    # Alerts --------------------------------------------------------------------------

    def _apply(
        self, signals: dict[Identity, d.Finding], now: datetime, params: d.DetectorParams
    ) -> list[Transition]:
        evaluated = {(i.kind, i.target, i.vantage) for i in signals}
        for identity, alert in list(self.alerts.items()):
            unsignalled = identity not in signals and alert.position.state is State.PENDING
            if unsignalled and (identity.kind, identity.target, identity.vantage) in evaluated:
                signals[identity] = d.Finding(Signal.HOLD)  # a pending shift that moved on
        moved = [
            self._move(i, f.signal, now, f.numbers, rules_for(i.kind, params))
            for i, f in signals.items()
        ]
        return [transition for transition in moved if transition is not None]

    def _move(
        self,
        identity: Identity,
        signal: Signal,
        now: datetime,
        numbers: dict[str, Any],
        rules: Rules,
    ) -> Transition | None:
        alert = self.alerts.get(identity)
        before = alert.position if alert else Position()
        after = step(before, signal, rules)
        refresh = before.state is after.state is State.FIRING
        if after == before and not refresh:
            return None
        if alert is None:
            alert = Alert(str(uuid.uuid4()), identity, before, opened_at=now)
        alert.numbers = numbers or alert.numbers
        alert.summary = summarize_alert(identity, alert.numbers)
        alert.position = after
        self._record(alert, before, now)
        acknowledged = signal is Signal.ACK
        return Transition(
            alert.id,
            identity,
            now,
            before.state,
            after.state,
            alert.summary,
            dict(alert.numbers),
            acknowledged,
        )

    def _record(self, alert: Alert, before: Position, now: datetime) -> None:
        state = alert.position.state
        if state is State.FIRING and not before.active:
            alert.fired_at = now
            if alert.identity.severity == "critical":
                # A warning is a hint, not a known change: its runs stay in the reference.
                for vantage in self._covered(alert.identity, now):
                    self._state(alert.identity.target, vantage).excluded.append((now, None))
        if state in (State.INACTIVE, State.RESOLVED):
            self.alerts.pop(alert.identity, None)
            if before.active:
                self._close(alert, now)
        else:
            self.alerts[alert.identity] = alert

    def _close(self, alert: Alert, now: datetime) -> None:
        alert.resolved_at = now
        for vantage in self._covered(alert.identity, now):
            state = self._state(alert.identity.target, vantage)
            state.excluded = [(start, end or now) for start, end in state.excluded]
            if alert.identity.kind == "tail_shift":
                state.tail_scores, state.tail_runs = (0.0,), 0

    # Helpers ----------------------------------------------------------------------------

    def _state(self, target: str, vantage: str) -> VantageState:
        return self.vantages.setdefault((target, vantage), VantageState())

    def _covered(self, identity: Identity, now: datetime) -> list[str]:
        if identity.vantage is not None:
            return [identity.vantage]
        return self.history.vantages(identity.target, now)

    def _open_dominant(self, target: str, vantage: str) -> Alert | None:
        for identity, alert in self.alerts.items():
            if identity.kind == "dominant_shift" and identity.target == target:
                if identity.vantage in (vantage, None) and alert.position.active:
                    return alert
        return None

    def _dominant_open(self, target: str, vantage: str) -> bool:
        return self._open_dominant(target, vantage) is not None

    def _reference(
        self,
        target: str,
        vantage: str,
        now: datetime,
        params: d.DetectorParams,
        window: list[RunData],
    ) -> Reference | None:
        state = self._state(target, vantage)
        if state.reference is not None and now - state.reference.built_at < REBUILD_EVERY:
            return state.reference
        start = now - timedelta(days=params.reference_days)
        if state.rebase_at is not None:
            start = max(start, state.rebase_at)
        end = window[0].at if window else now
        runs = [
            run
            for run in self.history.window(target, vantage, start, end)
            if not _inside(run.at, state.excluded)
        ]
        span = runs[-1].at - runs[0].at if runs else timedelta(0)
        too_short = span < timedelta(days=params.min_reference_days)
        if len(runs) < params.min_reference_runs or too_short:
            state.reference = None
            return None
        state.reference = Reference(
            built_at=now,
            runs=len(runs),
            mix=phase_mix(runs),
            tail=tail_reference(runs),
            composition=d.CompositionReference.build(runs, params.recent_runs),
        )
        return state.reference


def rules_for(kind: str, params: d.DetectorParams) -> Rules:
    """A slow mix change persists for hours: a warning waits for more confirmations."""
    confirm = params.composition_confirm if kind == "composition_shift" else params.confirm
    return Rules(confirm, params.recover)


def _inside(at: datetime, spans: list[tuple[datetime, datetime | None]]) -> bool:
    return any(start <= at and (end is None or at <= end) for start, end in spans)
