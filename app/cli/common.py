"""What several commands share: failing in one line, and finding the database."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine

ConfigPath = Annotated[
    Path | None,
    typer.Option(
        "--config", help="Targets file; default $PHASEWATCH_CONFIG, else phasewatch.yaml."
    ),
]
DatabaseUrl = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="SQLAlchemy URL; default $PHASEWATCH_DATABASE_URL, then the targets file's "
        "database_url, else sqlite:///./phasewatch.db.",
    ),
]


def own_command() -> str:
    """How to run phasewatch again from here, for a line that tells the user to: the script
    beside this interpreter (``.venv/bin/phasewatch`` after the Quick start's install, which
    puts nothing on PATH), else the bare name."""
    beside = Path(sys.executable).parent / "phasewatch"
    if not beside.exists():
        return "phasewatch"
    try:
        return str(beside.relative_to(Path.cwd()))
    except ValueError:
        return str(beside)


def one_line(message: str) -> str:
    return " ".join(message.split())


def database_problem(exc: BaseException, url: str | None = None) -> str:
    """What the database (its driver's error, not SQLAlchemy's wrapper) said, on one line;
    for a SQLite file that cannot be opened, which file and why."""
    from app.store.db import sqlite_folder_problem

    said = one_line(str(getattr(exc, "orig", None) or exc))
    found = sqlite_folder_problem(url) if url and "unable to open database file" in said else None
    return found or said


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"phasewatch: error: {message}\n")
    raise typer.Exit(1)


def resolve_database_url(option: str | None, config: Path | None) -> str:
    """--database-url, else the environment, else the targets file (if there is one)."""
    if option:
        return option  # settings and the targets file would not change it
    from app.config import DEFAULT_DATABASE_URL, ConfigError, Settings, load_targets

    settings = Settings() if config is None else Settings(config=config)
    url = settings.database_url
    if url is None and settings.config.exists():
        try:
            url = load_targets(settings.config, require_env=False).database_url
        except ConfigError:
            url = None  # the file's other problems are not this command's business
    return url or DEFAULT_DATABASE_URL


@contextmanager
def store_engine(url: str, migrate: bool = False) -> Iterator[Engine]:
    """The migrated database, or a one-line error (exit 1) naming what is wrong with it.

    ``migrate`` (commands that write): first bring the schema to head, creating a new SQLite
    file, as ``serve`` does; a command that only reads never creates a database.
    """
    from sqlalchemy import inspect
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from app.store.db import UnsupportedDatabase, make_engine

    try:
        engine = make_engine(url)
    except (ArgumentError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--database-url") from exc
    except UnsupportedDatabase as exc:
        fail(f"database: {exc}")
    try:
        if migrate:
            from app.store.migrate import upgrade  # alembic: only commands that write need it

            upgrade(url)
        # Checked before connecting: connecting would create an empty SQLite file.
        elif sqlite_file_missing(engine) or not inspect(engine).has_table("runs"):
            fail("database is not initialised: run 'phasewatch db upgrade'")
        yield engine
    except SQLAlchemyError as exc:
        fail(f"database: {database_problem(exc, url)}")
    finally:
        engine.dispose()


def sqlite_file_missing(engine: Engine) -> bool:
    from app.store.db import sqlite_file

    database = sqlite_file(engine.url.render_as_string(hide_password=False))
    if database is None:
        return False
    return not database.startswith("file:") and not Path(database).exists()


def excerpt(text: str, limit: int) -> str:
    """``text`` as one printable line of at most ``limit`` characters: what a server says
    can hold line breaks and control characters, which a terminal would obey."""
    printable = "".join(char if char.isprintable() else " " for char in text)
    line = one_line(printable)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def time_option(value: str | None, option: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not an ISO-8601 time", param_hint=option) from None
    # A time typed without an offset is UTC, like every time phasewatch shows.
    return parsed.replace(tzinfo=parsed.tzinfo or UTC).astimezone(UTC)


def exit_now(code: int) -> NoReturn:
    """End the process at once with ``code``, the log flushed: a thread still stuck on a
    database or a server that does not answer must not keep it alive, and everything worth
    keeping is stored or spooled (fsynced) by then (``serve``, ``agent``)."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
