"""The what-if engine (app.analysis.whatif) as the API and the target page ask it: the
samples of a window loaded, the changes' donors with them, the work bounded per request.

Bounds: at most ``MAX_CHANGES`` changes and ``MAX_RESAMPLES`` resamples (default
``DEFAULT_RESAMPLES``), and the newest ``max_samples`` samples of the window (whole runs; a
note says when a window held more; the setting ``whatif_max_samples``, ``MAX_SAMPLES`` by
default). A window without one timed sample of the target is ``NoSamples`` (the API's 409);
a donor without samples is a ``ChangeError`` naming its change.

The API runs them in a worker process (``what_if_job``, ``levers_job``: app.runtime.workers),
on a connection of the worker's own.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from app.analysis.objectives import Objective
from app.analysis.whatif import (
    Change,
    ChangeError,
    EndToEnd,
    Lever,
    ObjectiveLevers,
    SampleSet,
    TakePhase,
    changes_from_json,
    levers,
    objective_levers,
    parse_changes,
    predict,
)
from app.analysis.whatif.apply import apply, settle
from app.analysis.whatif.changes import check_changes
from app.analysis.whatif.rhythm import rhythm_of
from app.store.db import Session, Sessions, unpooled_sessions
from app.store.reads.newestruns import newest_start
from app.store.reads.objectives import target_objective_list
from app.store.reads.whatifsamples import load_sample_set
from app.store.targets import target_key

DEFAULT_SPAN = timedelta(days=7)
MAX_CHANGES = 20
DEFAULT_RESAMPLES = 200
MAX_RESAMPLES = 1000
MAX_SAMPLES = 100_000
SEED = 16
CURVE_PERCENTILES = [*range(1, 100), 99.5, 99.9]

__all__ = ["ChangeError", "Lever", "NoSamples", "Scope", "levers_now", "what_if"]

_sessions_of: dict[str, Sessions] = {}  # a worker process's, one per database URL


class NoSamples(Exception):
    """The window holds no timed sample of the target."""


@dataclass(frozen=True)
class Scope:
    target: str
    vantage: str | None
    start: datetime
    end: datetime


@dataclass(frozen=True)
class LeversNow:
    """The levers, best first, and the end-to-end as measured that they improve on."""

    now: EndToEnd
    levers: list[Lever]
    samples: int
    by_objective: list[ObjectiveLevers] = field(default_factory=list)


def parsed(items: list[str | dict[str, Any]]) -> list[Change]:
    """The changes as the CLI writes them (``"network=15ms"``) or as JSON objects, in order;
    ChangeError names the first that is not valid."""
    changes = [_one(item) for item in items]
    return check_changes(changes, [_token(item) for item in items])


def _one(item: str | dict[str, Any]) -> Change:
    return (parse_changes([item]) if isinstance(item, str) else changes_from_json([item]))[0]


def _token(item: str | dict[str, Any]) -> str:
    return item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))


def samples_of(session: Session, scope: Scope, rhythm: tuple[str, ...] = ()) -> SampleSet:
    """The window's samples (with ``rhythm``'s values); NoSamples when it holds none."""
    found = load_sample_set(session, scope.target, scope.vantage, scope.start, scope.end, rhythm)
    if found is None or found.n == 0:
        where = f" from vantage {scope.vantage!r}" if scope.vantage else ""
        raise NoSamples(
            f"target {scope.target!r} has no timed samples{where} from"
            f" {scope.start.isoformat()} to {scope.end.isoformat()}"
        )
    return found


def bounded(session: Session, scope: Scope, max_samples: int = MAX_SAMPLES) -> Scope:
    """The scope from the oldest of its newest runs that together hold ``max_samples``."""
    key = target_key(session, scope.target)
    if key is None:
        return scope
    start = newest_start(session, key, scope.vantage, scope.start, scope.end, max_samples)
    return replace(scope, start=start)


def _load(session: Session, scope: Scope, max_samples: int) -> SampleSet | None:
    kept = bounded(session, scope, max_samples)
    return load_sample_set(session, kept.target, kept.vantage, kept.start, kept.end)


def donors_of(
    session: Session, scope: Scope, changes: list[Change], max_samples: int = MAX_SAMPLES
) -> dict[str, SampleSet]:
    """Each donor the changes name, over the same window; one unknown, or without samples,
    is a ChangeError naming its change (the engine's "no measured samples of …")."""
    donors: dict[str, SampleSet] = {}
    for change in changes:
        if not isinstance(change, TakePhase) or change.source in donors:
            continue
        if "\x00" in change.source:  # no name holds one, and PostgreSQL refuses it in text
            raise ChangeError(change.token(), "a target or vantage name holds no NUL")
        donor = Scope(change.target, change.vantage, scope.start, scope.end)
        found = _load(session, donor, max_samples)
        if found is None:
            raise ChangeError(change.token(), f"no target {change.target!r}")
        donors[change.source] = found
    return donors


def what_if(
    session: Session,
    scope: Scope,
    items: list[str | dict[str, Any]],
    resamples: int,
    max_samples: int = MAX_SAMPLES,
) -> dict[str, Any]:
    changes = parsed(items)
    kept = bounded(session, scope, max_samples)
    objectives = target_objective_list(session, scope.target)
    samples = samples_of(session, kept, rhythm_of(objectives))
    donors = donors_of(session, scope, changes, max_samples)
    prediction = predict(
        samples, changes, donors=donors, seed=SEED, resamples=resamples, objectives=objectives
    )
    answer = prediction.to_json() | {
        "notes": [*prediction.notes, *_cut_note(scope, kept, max_samples)],
        "window": {"from": kept.start, "to": kept.end, "vantage": kept.vantage},
        "resamples": resamples,
        "curves": curves(samples, changes, donors),
        **_levers_json(samples, objectives),
    }
    if not finite(answer):
        raise ChangeError(" ".join(c.token() for c in changes), "gives times too large to compute")
    return answer


def _levers_json(samples: SampleSet, objectives: tuple[Objective, ...]) -> dict[str, Any]:
    found = levers(samples, objectives=objectives)
    return {
        "levers": [lever.to_json() for lever in found],
        "objective_levers": [o.to_json() for o in objective_levers(samples, found, objectives)],
    }


def _cut_note(asked: Scope, kept: Scope, max_samples: int) -> list[str]:
    if kept.start == asked.start:
        return []
    return [
        f"the window held more than {max_samples:,} samples: only the newest runs, from"
        f" {kept.start.isoformat()}, were read"
    ]


def curves(
    samples: SampleSet, changes: list[Change], donors: dict[str, SampleSet]
) -> dict[str, list[float]]:
    """End-to-end at each of ``CURVE_PERCENTILES`` before and after, from every sample (the
    point estimates' distributions, as the page draws them)."""
    applied = apply(samples, changes, donors, np.random.default_rng(SEED))
    before = settle(samples.ms, samples.censored, samples.deadline_ms).values
    after = settle(applied.ms, applied.censored, applied.deadline_ms).values
    return {
        "percentiles": [float(p) for p in CURVE_PERCENTILES],
        "before_ms": _at_percentiles(before),
        "after_ms": _at_percentiles(after),
    }


def _at_percentiles(values: Any) -> list[float]:
    found = np.percentile(values, CURVE_PERCENTILES, method="inverted_cdf")
    return [float(v) for v in found]


def finite(value: Any) -> bool:
    """No inf or NaN anywhere: JSON holds neither."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return all(finite(v) for v in value)
    return True


def levers_now(session: Session, scope: Scope, max_samples: int = MAX_SAMPLES) -> LeversNow:
    """The window's levers (within ``max_samples``), ranked by the engine; NoSamples when
    it holds no timed sample."""
    objectives = target_objective_list(session, scope.target)
    samples = samples_of(session, bounded(session, scope, max_samples), rhythm_of(objectives))
    now = predict(samples, [], seed=SEED, resamples=0).before
    found = levers(samples, objectives=objectives)
    return LeversNow(now, found, samples.n, objective_levers(samples, found, objectives))


def what_if_job(
    url: str, scope: Scope, items: list[str | dict[str, Any]], resamples: int, max_samples: int
) -> dict[str, Any]:
    """``what_if`` in a worker process, on the database at ``url``."""
    with _sessions(url)() as session:
        return what_if(session, scope, items, resamples, max_samples)


def levers_job(url: str, scope: Scope, max_samples: int) -> LeversNow:
    """``levers_now`` in a worker process, on the database at ``url``."""
    with _sessions(url)() as session:
        return levers_now(session, scope, max_samples)


def _sessions(url: str) -> Sessions:
    """The worker's sessions of ``url``, made at its first call."""
    if url not in _sessions_of:
        _sessions_of[url] = unpooled_sessions(url)
    return _sessions_of[url]
