"""``dominant_shift`` across vantages: each vantage judged, then combined.

Two or more vantages agreeing make one ``service`` alert (the new leader may differ by
vantage: queue at one, network at another); one vantage alone is a ``path`` change unless
the new leader is a server-side phase: then it is a ``service`` change once the vantages'
pooled evidence says that phase grew (app.alerts.pooling), or a second vantage agrees. A target
seen from one vantage gets scope ``vantage``. Vantages are combined once every present
vantage has a new run (a round); a vantage more than ``LATE_AFTER_INTERVALS`` late is not
waited for (``lateness``).

The evaluator is read through ``EvaluatorView`` (its open alerts, each vantage's memory
for its reference, a target's random numbers), handed in with each call.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from app.alerts.combine import KIND, Alerts, Found, Round, agreement, combine
from app.alerts.history import History
from app.alerts.identity import Alert, Identity
from app.alerts.memory import EvaluatorView
from app.alerts.oneround import one_round
from app.alerts.pooling import grown, pooled_lane
from app.analysis import detectors as d
from app.analysis.dominance import Mix, phase_mix

# A round waits for a vantage's next run until it is this many of its intervals late (its
# latest run more than 1 + this many intervals old); then it is left out of the round, and
# counted as late in the verdict ("at 2/3 vantages"), so a missing vantage never stalls it.
LATE_AFTER_INTERVALS = 1.0
# A vantage silent for longer than this many intervals is away: not counted at all (its
# silence is vantage_silent's to tell).
AWAY_AFTER_INTERVALS = 10.0


class CrossVantage:
    """Judges the vantages of a target together; remembers the last round of each target
    (``rounds``: target -> each present vantage's latest run id when it was combined)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.rounds: dict[str, dict[str, str]] = {}

    def signals(
        self,
        view: EvaluatorView,
        target: str,
        vantage: str,
        now: datetime,
        params: d.DetectorParams,
    ) -> Found:
        if KIND not in params.enabled:
            return {}
        present, late = self._present_vantages(target, now)
        if len(present) + len(late) <= 1:
            return self._alone(view, target, vantage, params)
        # One vantage on time while the others are late is still one of several: its
        # change is a path change, or waits for a second to agree (never scope vantage).
        if not present or not self._new_round(target, present):
            return {}
        per_vantage = {v: self._at(view, target, v, "path", params) for v in present}
        pooled = grown(view, self.history, target, present, params)
        seen = Round(present, late)
        combined = combine(view.alerts, target, seen, per_vantage, pooled)
        quiet = all(open_at(view.alerts, target, v) is None for v in present)
        if quiet and not any(f.confirmed for f in combined.values()):
            # One round of overwhelming evidence at every vantage (app.alerts.oneround):
            # told now, in place of what the two-run lanes would confirm a round later.
            moved = one_round(view, self.history, target, seen, params)
            if moved is not None:  # it covers this round's other findings: those are dropped
                held = {i: d.Finding(d.Signal.HOLD, f.numbers) for i, f in combined.items()}
                return held | {moved[0]: moved[1]}
        if quiet and not any(f.signal is d.Signal.HIT for f in combined.values()):
            lane = pooled_lane(view, self.history, target, present, params, pooled)
            if lane is not None:  # one vantage's newest runs, the pooled growth behind them
                vantage, old, finding = lane
                identity = Identity(KIND, target, None, "service", old, finding.numbers["to_phase"])
                at = {vantage: (identity, finding)}
                combined[identity] = agreement(at, [vantage], seen, finding.numbers)
        return combined

    def _alone(
        self, view: EvaluatorView, target: str, vantage: str, params: d.DetectorParams
    ) -> Found:
        """A target seen from one vantage: its own lanes, then, while nothing is open or
        hit, the pooled lane over that one vantage (app.alerts.pooling): a server-side
        phase that leads the newest run and grew in it with its step guards is the change
        a run or two before a bootstrap of 10 samples a run confirms the lead, which may
        wait for the busy hours (bench/detection/README.md, "fleetq")."""
        found = self._at(view, target, vantage, "vantage", params)
        if open_at(view.alerts, target, vantage) is not None:
            return found
        if any(f.signal is d.Signal.HIT for f in found.values()):
            return found
        # No second vantage to see the growth too: higher bars (app.alerts.pooling).
        pooled = grown(view, self.history, target, [vantage], params, alone=True)
        lane = pooled_lane(view, self.history, target, [vantage], params, pooled, alone=True)
        if lane is None:
            return found
        _, old, finding = lane
        identity = Identity(KIND, target, vantage, "vantage", old, finding.numbers["to_phase"])
        held = {i: d.Finding(d.Signal.HOLD, f.numbers) for i, f in found.items()}
        return held | {identity: replace(finding, confirmed=True)}

    def _at(
        self, view: EvaluatorView, target: str, vantage: str, scope: str, params: d.DetectorParams
    ) -> Found:
        reference = view.memory(target, vantage).reference
        runs = min(params.dominant_runs, params.recent_runs)
        window = self.history.last(target, vantage, runs)
        if reference is None or len(window) < runs:
            return {}
        found: Found = {}
        leader: str | None = reference.mix.dominant
        shift = open_at(view.alerts, target, vantage)
        # A service shift seen as one new leader from different old ones has no old leader
        # of its own: here it is this vantage's.
        old = None if shift is None else shift.identity.from_phase or reference.mix.dominant
        if shift is not None and old is not None:
            new = shift.identity.to_phase
            found[replace(shift.identity, vantage=vantage, scope=scope)] = d.dominant_resolution(
                window, old, new, reference.mix.dominant, params, view.rng(target)
            )
            leader = new or phase_mix(window).dominant
        if leader is None:
            return found
        mix = phase_mix(window)
        candidate = d.challenger(mix, leader, params)
        if shift is None and candidate is not None:
            candidate = _kept_winner(view.alerts, target, vantage, leader, mix, params) or candidate
        # The old leader coming back is the open shift's resolution, not a new shift.
        reverting = shift is not None and candidate == old
        if candidate is not None and not reverting:
            identity = Identity(KIND, target, vantage, scope, leader, candidate)
            if identity not in found:
                finding = d.dominant_finding(
                    window, leader, candidate, params, view.rng(target), reference.spread
                )
                found[identity] = _before(finding, reference, leader)
        if shift is None and all(f.signal is not d.Signal.HIT for f in found.values()):
            # A large lead in the newest two runs: one run sooner (d.fast_dominant).
            fast = d.fast_dominant(window, leader, params, view.rng(target), reference.spread)
            if fast is not None:
                identity = Identity(KIND, target, vantage, scope, leader, fast[0])
                found = {identity: _before(fast[1], reference, leader)}
        return found

    def _new_round(self, target: str, present: list[str]) -> bool:
        """Every present vantage has a new run since the last combined evaluation."""
        ids = {v: run.run_id for v in present for run in self.history.last(target, v, 1)}
        previous = self.rounds.get(target, {})
        if any(previous.get(v) == run_id for v, run_id in ids.items()):
            return False
        self.rounds[target] = ids
        return True

    def _present_vantages(self, target: str, now: datetime) -> tuple[list[str], list[str]]:
        """The vantages a round waits for, and those late (left out, but counted)."""
        present, late = [], []
        for vantage in self.history.vantages(target, now):
            last = self.history.last(target, vantage, 2)
            if not last:
                continue
            spacing = (last[-1].at - last[0].at) if len(last) == 2 else timedelta(hours=1)
            waiting = lateness(now - last[-1].at, spacing)
            if waiting == PRESENT:
                present.append(vantage)
            elif waiting == LATE:
                late.append(vantage)
        return sorted(present), sorted(late)


def open_at(alerts: Alerts, target: str, vantage: str) -> Alert | None:
    """The active dominant_shift that covers ``vantage``, if any."""
    for identity, alert in alerts.items():
        if identity.kind == KIND and identity.target == target:
            if identity.vantage in (vantage, None) and alert.position.active:
                return alert
    return None


PRESENT, LATE, AWAY = "present", "late", "away"


def lateness(age: timedelta, spacing: timedelta) -> str:
    """A vantage whose latest run is ``age`` old, its runs ``spacing`` apart: waited for
    (``present``), left out of the round but counted (``late``), or not counted (``away``)."""
    interval = max(spacing, timedelta(seconds=1))
    if age <= (1 + LATE_AFTER_INTERVALS) * interval:
        return PRESENT
    return LATE if age <= AWAY_AFTER_INTERVALS * interval else AWAY


def _kept_winner(
    alerts: Alerts, target: str, vantage: str, leader: str, mix: Mix, params: d.DetectorParams
) -> str | None:
    """The phase a pending shift from ``leader`` at ``vantage`` names, while it still leads
    ``leader`` by δ in ``mix``: a collapse that leaves two phases near each other (the queue
    and prefill after generation's) would otherwise restart the confirmation each time they
    swap places (bench/detection/README.md, "fleetq2")."""
    for identity, alert in alerts.items():
        if identity.kind != KIND or identity.target != target or identity.from_phase != leader:
            continue
        if identity.vantage not in (vantage, None) or not alert.position.open:
            continue
        winner = identity.to_phase
        if winner is not None and d.leads_by(mix, winner, leader, params):
            return winner
    return None


def _before(finding: d.Finding, reference: d.Reference, leader: str) -> d.Finding:
    """The finding, with the old leader's share in the reference beside it."""
    finding.numbers["from_share_before_pct"] = round(100 * reference.mix.shares.get(leader, 0.0), 1)
    return finding
