"""``<metric>_slo`` — each objective of ``alerts.objectives`` as an SLO with an error budget,
alerted on burn rate exactly as ``deadline_miss`` is (app.analysis.detectors.deadline):
the same page and ticket pairs of windows (``alerts.slo``), the same test beyond chance,
the same budget window; only the objective and what counts as bad differ
(app.analysis.objectives). One detector per metric of the registry, so an alert's kind
names its objective (``availability_slo``, ``ttft_ms_slo``); a target without that
objective gets nothing from it.

``availability_slo`` is what ``probe_failing`` is not: 11–30 % of requests failing for
40 minutes is a fast burn of a 99.5 % objective (22–60×), and pages from the 5-minute and
1-hour windows once two runs' failures say so beyond chance.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from app.analysis.detectors.base import Detector, Finding, Inputs, Named
from app.analysis.detectors.deadline import Budget, burn_findings
from app.analysis.objectives import AVAILABILITY, METRICS

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams, SloParams


def kind_of(metric: str) -> str:
    return f"{metric}_slo"


def _judge(metric: str, inputs: Inputs) -> list[Finding]:
    params = inputs.params.objectives.get(metric)
    ledger = inputs.objectives.get(metric)
    if params is None or ledger is None:
        return []
    slo = _with_objective(inputs.params.slo, params.objective(metric).target)
    found = burn_findings(inputs, Budget(kind_of(metric), ledger, slo))
    said = {"objective": metric, "below_ms": params.below}
    return [replace(f, numbers={**f.numbers, **said}) if f.numbers else f for f in found]


@functools.cache
def _with_objective(slo: SloParams, objective: float) -> SloParams:
    return slo.model_copy(update={"objective": objective})


def _bad(n: dict[str, Any]) -> str:
    if n.get("objective") == AVAILABILITY:
        return "failed (no ok answer)"
    return f"took over {n.get('below_ms') or 0:g} ms"


def sentence(identity: Named, n: dict[str, Any]) -> str:
    burn = n["burn_rates"].get(n["window"])
    return (
        f"{n.get('objective')} SLO burning on {identity.target}: {n['rate_pct']:g} % of "
        f"{n['samples']} requests over {n['window']} {_bad(n)} (burn {burn or 0:g}× the "
        f"budget, alert at {n['factor']:g}×; objective {n['objective_pct']:g} %, "
        f"{n['budget_left_pct']:g} % of the {n['budget_window']} budget left)"
    )


def current(identity: Named, n: dict[str, Any]) -> str:
    burn = n["burn_rates"].get(n["window"])
    return f"{n['rate_pct']:g} % {_bad(n)} over {n['window']} (burn {burn or 0:g}×)"


def _once(_params: DetectorParams) -> int:
    return 1


def _detector(metric: str) -> Detector:
    return Detector(
        name=kind_of(metric),
        summary=f"the {metric} objective's error budget burns: a page when fast, a ticket"
        " when slow (only with that objective)",
        sentence=sentence,
        judge=functools.partial(_judge, metric),
        excludes_runs=False,  # as deadline_miss: a budget's burn is not a new normal
        # Its own confirmation: a hit needs both windows burning and bad samples from two
        # runs at least (``slo.min_runs_missing``); a second hit in a row would let an
        # incident of two runs end before it pages.
        confirm=_once,
        current=current,
    )


DETECTORS = tuple(_detector(metric) for metric in METRICS)
