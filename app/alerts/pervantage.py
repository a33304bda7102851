"""Each vantage judged alone, after a new run there: the run added to the vantage's
``DetectorMemory`` (tail CUSUM, deadline-miss ledger), its reference brought up to date
(app.alerts.references), then every enabled detector's findings by alert identity
(scope ``vantage``). app.alerts.crossvantage judges the vantages together.

The evaluator is read through ``EvaluatorView``, handed in with each call.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from app.alerts.combine import Alerts, Found
from app.alerts.crossvantage import open_at
from app.alerts.history import History
from app.alerts.identity import Identity
from app.alerts.levelpool import PooledLevel, service_level_active
from app.alerts.memory import DetectorMemory, EvaluatorView
from app.alerts.objectiveledgers import build as built
from app.alerts.references import REBUILD_EVERY, current_reference
from app.analysis import detectors as d
from app.analysis.runs import RunData
from app.analysis.slo import MissLedger

MAX_AT = datetime.max.replace(tzinfo=UTC)
LEVEL = "level_shift"


# A target's maintenance spans at a vantage over [a, b]: UTC, half-open, sorted, disjoint.
MaintenanceSpans = Callable[[str, str, datetime, datetime], Sequence[tuple[datetime, datetime]]]


def no_maintenance(
    _target: str, _vantage: str, _a: datetime, _b: datetime
) -> Sequence[tuple[datetime, datetime]]:
    return ()


def _lazy_inside(
    read: Callable[[], Sequence[tuple[datetime, datetime]]],
) -> Callable[[datetime], bool]:
    """Whether an instant is inside a span; the spans read on the first ask only, once per
    evaluation (a target no window covers costs a glance at the windows' globs)."""
    found: list[Sequence[tuple[datetime, datetime]]] = []

    def inside(at: datetime) -> bool:
        if not found:
            found.append(read())
        spans = found[0]
        i = bisect.bisect_right(spans, (at, MAX_AT)) - 1
        return i >= 0 and at < spans[i][1]

    return inside


class PerVantage:
    def __init__(
        self,
        history: History,
        maintenance: MaintenanceSpans = no_maintenance,
    ) -> None:
        self.history = history
        self.maintenance = maintenance
        self._identities: dict[tuple[str, str, str | None, str], Identity] = {}
        self._pooled = PooledLevel(history)

    def signals(
        self,
        view: EvaluatorView,
        target: str,
        vantage: str,
        now: datetime,
        params: d.DetectorParams,
    ) -> Found | None:
        """The findings after ``vantage``'s newest run; None: it has no run since the last
        evaluation (nothing was judged, nothing remembered)."""
        memory = view.memory(target, vantage)
        recent = self.history.last(target, vantage, max(params.recent_runs, params.failing_runs))
        if not recent or recent[-1].run_id == memory.last_run:
            return None
        window = recent[-params.recent_runs :]
        reach = max(timedelta(days=params.reference_days), params.slo.budget_window)
        kept_out = _lazy_inside(lambda: self.maintenance(target, vantage, now - reach, now))

        reference = current_reference(
            self.history, memory, target, vantage, now, params, window, kept_out
        )
        siblings = [
            view.memory(target, other)
            for other in self.history.vantages(target, now)
            if other != vantage
        ]
        self._advance(memory, siblings, recent[-1], reference, params, now, kept_out)
        memory.last_run = recent[-1].run_id
        assert memory.misses is not None
        inputs = d.Inputs(
            window=window,
            recent=recent,
            reference=reference,
            params=params,
            rng=view.rng(target),
            now=now,
            tail=memory.tail,
            onset=lambda count: self.history.last(target, vantage, count),
            misses=memory.misses,
            dominant_open=open_at(view.alerts, target, vantage) is not None,
            active=active_at(view.alerts, target, vantage),
            cusums=memory.cusums,
            rebase_at=memory.rebase_at,
            objectives=memory.objectives.ledgers if memory.objectives else {},
        )
        found = self._judge(inputs, target, vantage)
        return found | self._pooled_level(view, found, target, vantage, inputs)

    def _pooled_level(
        self, view: EvaluatorView, found: Found, target: str, vantage: str, inputs: d.Inputs
    ) -> Found:
        """The service's ``level_shift`` (app.alerts.levelpool); while it is active, this
        vantage's own does not open beside it (one level story at a time), nor on a server
        phase's slowdown no other vantage sees, unless it is large (``PooledLevel.unseen``)."""
        severity = d.DETECTORS[LEVEL].severity
        service = self._identity(LEVEL, target, None, severity)
        pooled = self._pooled.signals(
            view, service, vantage, inputs.recent[-1], inputs.window, inputs.params
        )
        own = self._identity(LEVEL, target, vantage, severity)
        opened = own in view.alerts and view.alerts[own].position.active
        finding = found.get(own)
        if finding is not None and finding.signal is d.Signal.HIT and not opened:
            service_hit = service in pooled and pooled[service].signal is d.Signal.HIT
            if (
                service_hit
                or service_level_active(view.alerts, target)
                or self._pooled.unseen(
                    view, vantage, inputs.recent[-1], finding.numbers, inputs.params
                )
            ):
                pooled[own] = d.Finding(d.Signal.HOLD, finding.numbers)
        return pooled

    def _judge(self, inputs: d.Inputs, target: str, vantage: str) -> Found:
        found: Found = {}
        for name in inputs.params.enabled:
            detector = d.DETECTORS[name]
            for finding in detector.judge(inputs) if detector.judge else ():
                severity = finding.severity or detector.severity
                where = None if finding.scope == "service" else vantage
                found[self._identity(name, target, where, severity)] = finding
        return found

    def _identity(self, kind: str, target: str, vantage: str | None, severity: str) -> Identity:
        """An alert's identity, made once (several are asked for every run): a vantage's,
        or with no vantage the service's (judged on the vantages pooled)."""
        key = (kind, target, vantage, severity)
        identity = self._identities.get(key)
        if identity is None:
            scope = "vantage" if vantage is not None else "service"
            identity = Identity(kind, target, vantage, scope, severity=severity)
            self._identities[key] = identity
        return identity

    def _advance(
        self,
        memory: DetectorMemory,
        siblings: list[DetectorMemory],
        run: RunData,
        reference: d.Reference | None,
        params: d.DetectorParams,
        now: datetime,
        kept_out: Callable[[datetime], bool],
    ) -> None:
        """What the newest run adds to the detectors' memory, before they judge."""
        if reference is not None:
            others = [sibling.cusums for sibling in siblings]
            state = d.advance_tail(memory.cusums, others, run, reference, params)
            memory.tail = state or memory.tail
        built = memory.misses_built_at
        if memory.misses is None or built is None or now - built >= REBUILD_EVERY:
            start = now - params.slo.budget_window
            counts = self.history.counts(run.target, run.vantage, start, now)
            rows = [(c.at, c.timed, c.censored) for c in counts if not kept_out(c.at)]
            memory.misses, memory.misses_built_at = MissLedger.of(rows, now), now
        if not kept_out(run.at):
            memory.misses.add(run.at, run.timed, run.censored)
        memory.misses.prune(now - params.slo.budget_window)
        self._advance_objectives(memory, run, params, now, kept_out)

    def _advance_objectives(
        self,
        memory: DetectorMemory,
        run: RunData,
        params: d.DetectorParams,
        now: datetime,
        kept_out: Callable[[datetime], bool],
    ) -> None:
        objectives = params.objective_list()
        held = memory.objectives
        if not objectives:
            memory.objectives = None
            return
        start = now - params.slo.budget_window
        if held is None or held.objectives != objectives or now - held.built_at >= REBUILD_EVERY:
            key = (run.target, run.vantage)
            held = memory.objectives = built(self.history, key, objectives, (start, now), kept_out)
        if not kept_out(run.at):
            held.add(run)  # a run the rebuild already holds is not taken twice
        held.prune(start)


def active_at(alerts: Alerts, target: str, vantage: str) -> frozenset[tuple[str, str]]:
    """(kind, severity) of the alerts firing at ``vantage``: its own and the service's (no
    vantage: a pooled tail or leader change covers every vantage)."""
    return frozenset(
        (i.kind, i.severity)
        for i, alert in alerts.items()
        if i.target == target and i.vantage in (vantage, None) and alert.position.active
    )
