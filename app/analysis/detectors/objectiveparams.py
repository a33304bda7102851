"""``alerts.objectives`` in the targets file: objectives beside the deadline, validated
against the metric registry (app.analysis.objectives.METRICS).

``ttft_ms: {p: 99, below: 500}`` — 99 % of requests see their first token within 500 ms;
``availability: {target: 99.5}`` — 99.5 % of requests answered with status ok. A problem
is reported at the objective's own field (its line in the file)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.analysis.objectives import AVAILABILITY, METRICS, Objective


class ObjectiveParams(BaseModel):
    """One objective: ``p`` and ``below`` for a latency metric, ``target`` for availability."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    p: float | None = Field(
        None, gt=0, lt=100, description="Latency: this percentage of requests …"
    )
    below: float | None = Field(None, gt=0, description="… take at most this many ms.")
    target: float | None = Field(
        None, gt=0, lt=100, description="Availability: percentage of requests answered ok."
    )

    def objective(self, metric: str) -> Objective:
        if metric == AVAILABILITY:
            return Objective(metric, (self.target or 0.0) / 100)
        return Objective(metric, (self.p or 0.0) / 100, self.below)


def measured() -> str:
    return ", ".join(name for name, metric in METRICS.items() if _usable(name, metric.read))


def _usable(name: str, read: Any) -> bool:
    return name == AVAILABILITY or read is not None


def problems(objectives: dict[str, ObjectiveParams]) -> list[InitErrorDetails]:
    """Each objective's problem at its own location (relative to ``alerts``)."""
    found: list[InitErrorDetails] = []
    for name, params in objectives.items():
        found += _problems(name, params)
    return found


def _problems(name: str, params: ObjectiveParams) -> list[InitErrorDetails]:
    metric = METRICS.get(name)
    if metric is None:
        return [
            _problem((name,), "unknown objective; objectives: {known}", known=", ".join(METRICS))
        ]
    if not _usable(name, metric.read):
        why = "not measured by this version yet ({why}); objectives measured now: {known}"
        return [_problem((name,), why, why=metric.pending, known=measured())]
    if name == AVAILABILITY:
        wrong = [key for key in ("p", "below") if getattr(params, key) is not None]
        needed = ["target"] if params.target is None else []
    else:
        wrong = ["target"] if params.target is not None else []
        needed = [key for key in ("p", "below") if getattr(params, key) is None]
    shape = "{target: 99.5}" if name == AVAILABILITY else "{p: 99, below: 500}"
    found = [
        _problem((name, key), "not for {name} (it takes {shape})", name=name, shape=shape)
        for key in wrong
    ]
    found += [
        _problem((name, key), "missing: {name} takes {shape}", name=name, shape=shape)
        for key in needed
    ]
    return found


def _problem(loc: tuple[str, ...], template: str, **values: str) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError("objective", template, values),
        loc=("objectives", *loc),
        input=loc[0],
    )


def check(objectives: dict[str, ObjectiveParams], title: str) -> None:
    found = problems(objectives)
    if found:
        raise ValidationError.from_exception_data(title, found)


def tokens_objectives(objectives: dict[str, ObjectiveParams]) -> list[str]:
    """The objectives that need a token stream (not for ``kind: http``)."""
    return [name for name in objectives if name in METRICS and METRICS[name].tokens]
