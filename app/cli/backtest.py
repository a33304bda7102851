"""`phasewatch backtest`: replay exported samples through the production detectors."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, TextColumn

from app.cli.common import fail

if TYPE_CHECKING:
    from app.alerts.backtest.coverage import Coverage
    from app.alerts.backtest.jobs import ParamsTable
    from app.alerts.identity import Transition


class Format(StrEnum):
    TABLE = "table"
    JSONL = "jsonl"


def backtest(
    file: Annotated[
        Path,
        typer.Argument(
            help="Samples CSV, as `phasewatch export` writes it; rows in any order (a file"
            " not in time order is read from a sorted copy)."
        ),
    ],
    config: Annotated[
        Path | None, typer.Option("--config", help="Targets file whose `alerts:` settings apply.")
    ] = None,
    output: Annotated[
        Format,
        typer.Option("--format", help="A table for people, or a JSON object a line for scripts."),
    ] = Format.TABLE,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap's random numbers.")] = 0,
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            show_default=False,
            help="Worker processes, each replaying a share of the targets (the same"
            " transitions, in the same order, as one process); default 1 for a file under"
            " 200 MiB (about a million samples: a second process would cost more CPU than"
            " the seconds it saves), else one per core, at most 2. Each reads the whole"
            " file, so memory grows with N. 1 replays in this process.",
        ),
    ] = None,
) -> None:
    """Print every alert transition the detectors would have made on these samples."""
    from app.alerts.backtest.coverage import Coverage
    from app.alerts.backtest.csvruns import MAX_SPAN, BacktestError
    from app.alerts.backtest.jobs import collecting_rarely, default_jobs, keep_freed_memory
    from app.csvio.ordering import describe, time_ordered

    keep_freed_memory()
    params_for = _params(config)
    coverage = Coverage()
    try:
        file.open(newline="").close()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}", param_hint="FILE") from exc
    transitions: list[Transition] = []
    with tempfile.TemporaryDirectory(prefix="phasewatch-backtest-") as scratch:
        # Files from other tools come grouped by target or run: read a time-sorted copy.
        slack = MAX_SPAN.total_seconds()  # how far from time order the reader reads
        ordered, out_of_order = time_ordered(file, Path(scratch), slack)
        named = str(file)
        if out_of_order:
            sys.stderr.write(f"note: {describe(out_of_order, ordered)}\n")
            named = f"{file} (its copy sorted by time)"
        size = ordered.stat().st_size
        workers = jobs if jobs is not None else default_jobs(size, os.cpu_count())
        try:
            with collecting_rarely():
                for transition in _moved(ordered, params_for, seed, workers, coverage):
                    if output is Format.JSONL:
                        sys.stdout.write(json.dumps(transition.to_json()) + "\n")
                    else:
                        transitions.append(transition)
        except BacktestError as exc:
            fail(f"{named}: {exc}")
    if output is Format.TABLE:
        _table(transitions)
    _say_what_was_never_judged(coverage, params_for, config)


def _say_what_was_never_judged(
    coverage: Coverage, params_for: ParamsTable, config: Path | None
) -> None:
    """On stderr (stdout may be JSON lines): a short file judged by defaults that need a
    day of reference gives no dominant or tail alert at all, which must not read as calm."""
    from app.alerts.backtest.coverage import unjudged

    for line in unjudged(coverage, params_for):
        target = line.split(":", 1)[0]
        sys.stderr.write(f"note: {line}; settings: {_settings_of(target, params_for, config)}\n")


def _settings_of(target: str, params_for: ParamsTable, config: Path | None) -> str:
    if config is None:
        return "the defaults (no --config): set these under the target's alerts: in a targets file"
    if target not in params_for.by_target:
        return f"the defaults ({target} is not in {config})"
    return f"{target}'s alerts: in {config}"


def _moved(
    file: Path, params_for: ParamsTable, seed: int, jobs: int, coverage: Coverage
) -> Iterator[Transition]:
    """The transitions that change a state: in this process (with a progress bar on a
    terminal) for one job, else from ``jobs`` workers."""
    from app.alerts.backtest.csvruns import read_runs
    from app.alerts.backtest.jobs import prepare_worker, replay_file
    from app.alerts.backtest.replay import replay

    if jobs > 1:
        yield from replay_file(
            file,
            params_for,
            seed=seed,
            jobs=jobs,
            initializer=prepare_worker,
            coverage=coverage,
        )
        return
    stderr = Console(stderr=True)
    columns = (TextColumn("replaying"), MofNCompleteColumn(), TextColumn("runs"))
    with (
        file.open(newline="") as rows,
        Progress(*columns, console=stderr, disable=not stderr.is_terminal) as shown,
    ):
        task = shown.add_task("runs", total=None)
        for transition in replay(
            read_runs(rows),
            params_for,
            seed=seed,
            progress=(lambda n: shown.update(task, completed=n)) if stderr.is_terminal else None,
            coverage=coverage,
        ):
            if transition.moved:
                yield transition


def _params(config: Path | None) -> ParamsTable:
    from app.alerts.backtest.jobs import ParamsTable
    from app.cli.service import load_targets_or_exit

    if config is None:
        return ParamsTable()
    # Only the alert settings are read: header and notifier variables need not be set.
    targets = load_targets_or_exit(config, require_env=False).targets
    return ParamsTable(by_target={t.name: t.alerts for t in targets})


def _table(transitions: list[Transition]) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for heading in ("at", "alert", "state", "target", "vantage", "summary"):
        table.add_column(heading)
    for t in transitions:
        table.add_row(
            t.at.strftime("%Y-%m-%d %H:%M"),
            t.identity.kind,
            f"{t.before.value} → {t.after.value}",
            t.identity.target,
            t.identity.vantage or f"({t.identity.scope})",
            t.summary,
        )
    Console(width=200).print(table)
    sys.stdout.write(f"{len(transitions)} transition(s)\n")
