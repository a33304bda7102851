"""`phasewatch export` and `import`: samples as CSV, in the layout of app.csvio.layout."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, TextIO

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn

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

    from app.csvio.layout import CsvImportError, ImportResult


def export_csv(
    target: Annotated[str | None, typer.Option(help="Only this target's samples.")] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from", help="Samples started at or after this time (ISO-8601; UTC if no offset)."
        ),
    ] = None,
    end: Annotated[
        str | None, typer.Option("--to", help="Samples started before this time.")
    ] = None,
    database_url: DatabaseUrl = None,
    config: ConfigPath = None,
) -> None:
    """Write stored samples as CSV to standard output, oldest first."""
    from app.csvio.export import export_samples
    from app.csvio.layout import CsvExportError

    since, until = time_option(start, "--from"), time_option(end, "--to")
    if since is not None and until is not None and since >= until:
        raise typer.BadParameter("--from must be earlier than --to")
    with store_engine(resolve_database_url(database_url, config)) as engine:
        try:
            export_samples(engine, sys.stdout, target=target, start=since, end=until)
        except CsvExportError as exc:
            fail(str(exc))


def import_csv(
    file: Annotated[
        Path,
        typer.Argument(help="CSV as `export` writes it; - reads standard input."),
    ],
    database_url: DatabaseUrl = None,
    config: ConfigPath = None,
    migrate: Annotated[
        bool,
        typer.Option(
            help="Create or migrate the database first, as serve does; --no-migrate refuses"
            " one that is not initialised."
        ),
    ] = True,
) -> None:
    """Store the runs in a CSV of samples: all of them, or none if any row is malformed."""
    from app.csvio.layout import CsvImportError

    with (
        _csv_source(file) as (rows, bytes_read, size),
        store_engine(resolve_database_url(database_url, config), migrate) as engine,
    ):
        try:
            result = _import_with_progress(engine, rows, bytes_read, size)
        except CsvImportError as exc:
            _report_import_problems(str(file), exc)
    sys.stdout.write(
        f"imported {result.runs_stored} runs ({result.samples_stored} samples); "
        f"{result.runs_already_present} runs were already present\n"
    )


@contextmanager
def _csv_source(file: Path) -> Iterator[tuple[TextIO, Callable[[], int], int | None]]:
    """The file as text, how many of its bytes were read so far, and its size."""
    if str(file) == "-":
        yield sys.stdin, lambda: 0, None  # a pipe: neither a size nor a position
        return
    try:
        raw = file.open("rb")
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {file}: {exc.strerror}", param_hint="FILE") from exc
    # utf-8-sig: a spreadsheet's byte order mark is not part of the first column's name.
    with raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as rows:
        yield rows, raw.tell, os.fstat(raw.fileno()).st_size


def _import_with_progress(
    engine: Engine, rows: TextIO, bytes_read: Callable[[], int], size: int | None
) -> ImportResult:
    from app.csvio.importer import import_samples

    columns = (
        TextColumn("reading"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[rows]} rows"),
    )
    stderr = Console(stderr=True)
    # Off when stderr is not a terminal: rich would still leave a blank line there.
    with Progress(
        *columns, console=stderr, transient=True, disable=not stderr.is_terminal
    ) as progress:
        task = progress.add_task("import", total=size, rows=0)

        def advance(parsed: int) -> None:
            progress.update(task, completed=bytes_read() if size else None, rows=parsed)

        return import_samples(engine, rows, progress=advance)


def _report_import_problems(name: str, error: CsvImportError) -> NoReturn:
    for problem in error.problems:
        sys.stderr.write(f"{name}:{problem}\n")
    more = f" ({error.unlisted} more not listed)" if error.unlisted else ""
    problems = "1 problem" if error.count == 1 else f"{error.count} problems"
    fail(f"nothing imported: {problems} in {name}{more}")
