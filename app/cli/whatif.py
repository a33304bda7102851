"""`phasewatch whatif TARGET CHANGE...`: what end-to-end, its tail and the deadline misses
would be after a change, predicted from the target's measured samples (docs/whatif.md)."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.common import (
    ConfigPath,
    DatabaseUrl,
    fail,
    resolve_database_url,
    store_engine,
    time_option,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from app.analysis.objectives import Objective
    from app.analysis.whatif import Change, SampleSet

DEFAULT_DAYS = 7


def whatif(
    target: Annotated[str, typer.Argument(help="The target whose samples are changed.")],
    changes: Annotated[
        list[str] | None,
        typer.Argument(
            help="Changes: network=15ms (set), generation*1.5 (scale), queue=0 (remove),"
            " generation=@other-target[/vantage] (another's distribution),"
            " cold=12%:800-2500ms (cold starts), deadline=1500ms. None: levers only.",
            show_default=False,
        ),
    ] = None,
    vantage: Annotated[
        str | None, typer.Option(help="Only this vantage's runs; default every vantage.")
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="Runs started at or after this time (ISO-8601; UTC if no"
            " offset); default 7 days before --to.",
        ),
    ] = None,
    end: Annotated[
        str | None, typer.Option("--to", help="Runs started before this time; default now.")
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="One JSON object: before, after, objectives, levers, notes."),
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the resampling's random numbers.")] = 0,
    database_url: DatabaseUrl = None,
    config: ConfigPath = None,
) -> None:
    """Predict end-to-end p50/p90/p99 and the deadline-miss rate after CHANGES, with 95 %
    intervals, from the target's measured samples resampled run by run; and the levers now."""
    from app.analysis.whatif import ChangeError, levers, objective_levers, parse_changes, predict
    from app.cli.whatifshow import print_prediction, to_json

    try:
        parsed = parse_changes(changes or [])
    except ChangeError as exc:
        raise typer.BadParameter(str(exc), param_hint="CHANGES") from None
    since, until = _window(start, end)
    with store_engine(resolve_database_url(database_url, config)) as engine:
        objectives = _objectives(engine, target)
        samples = _samples_or_fail(engine, target, vantage, (since, until), objectives)
        donors = _donors(engine, parsed, since, until)
    try:
        prediction = predict(samples, parsed, donors=donors, seed=seed, objectives=objectives)
    except ChangeError as exc:
        raise typer.BadParameter(str(exc), param_hint="CHANGES") from None
    deadline_ms = prediction.after.deadline_ms
    found = levers(samples, deadline_ms=deadline_ms, objectives=objectives)
    by_objective = objective_levers(samples, found, objectives, deadline_ms=deadline_ms)
    if as_json:
        answer = to_json(target, vantage, prediction, found, by_objective)
        sys.stdout.write(json.dumps(answer) + "\n")
    else:
        print_prediction(target, vantage, (since, until), prediction, (found, by_objective))


def _window(start: str | None, end: str | None) -> tuple[datetime, datetime]:
    from app.clock import utcnow

    until = time_option(end, "--to") or utcnow()
    since = time_option(start, "--from") or until - timedelta(days=DEFAULT_DAYS)
    if since >= until:
        raise typer.BadParameter("--from must be earlier than --to")
    return since, until


def _samples_or_fail(
    engine: Engine,
    target: str,
    vantage: str | None,
    window: tuple[datetime, datetime],
    objectives: tuple[Objective, ...],
) -> SampleSet:
    from app.analysis.whatif.rhythm import rhythm_of
    from app.store.reads.whatifsamples import load_sample_set

    since, until = window
    samples = load_sample_set(engine, target, vantage, since, until, rhythm_of(objectives))
    where = "" if vantage is None else f" at vantage {vantage}"
    if samples is None:
        fail(f"no target {target!r} in the database")
    if samples.n == 0:
        fail(
            f"{target}{where} has no timed samples from {since:%Y-%m-%d %H:%M} to "
            f"{until:%Y-%m-%d %H:%M} UTC (see --from, --to, --vantage)"
        )
    return samples


def _objectives(engine: Engine, target: str) -> tuple[Objective, ...]:
    from sqlalchemy.orm import Session

    from app.store.reads.objectives import target_objective_list

    with Session(engine) as session:
        return target_objective_list(session, target)


def _donors(
    engine: Engine, changes: list[Change], since: datetime, until: datetime
) -> dict[str, SampleSet]:
    from app.analysis.whatif import TakePhase
    from app.store.reads.whatifsamples import load_sample_set

    donors = {}
    for change in changes:
        if isinstance(change, TakePhase) and change.source not in donors:
            found = load_sample_set(engine, change.target, change.vantage, since, until)
            if found is None:
                raise typer.BadParameter(
                    f"{change.token()!r}: no target {change.target!r} in the database",
                    param_hint="CHANGES",
                )
            donors[change.source] = found
    return donors
