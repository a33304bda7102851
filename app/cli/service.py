"""`phasewatch serve`, `check-config` and `db`: running the watch loop and preparing for it."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from app.cli.common import (
    ConfigPath,
    DatabaseUrl,
    database_problem,
    fail,
    resolve_database_url,
)

if TYPE_CHECKING:
    from app.config import Settings, TargetsFile

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def serve(
    config: ConfigPath = None,
    host: Annotated[
        str | None, typer.Option(help="Default $PHASEWATCH_HOST, else 127.0.0.1.")
    ] = None,
    port: Annotated[int | None, typer.Option(help="Default $PHASEWATCH_PORT, else 8080.")] = None,
    migrate: Annotated[
        bool, typer.Option(help="Apply migrations on start; --no-migrate refuses a stale schema.")
    ] = True,
    log_level: Annotated[str, typer.Option(help="debug, info, warning or error.")] = "info",
) -> None:
    """Probe every target on its interval, store every run, alert; serve the dashboard, the
    API, /metrics and /healthz."""
    from app.runtime.memtrim import arenas_to_set, limit_arenas

    limit_arenas(arenas_to_set(os.environ))  # first: before any thread takes an arena
    from app.cli.serving import PortTaken, bind, run_server
    from app.config import Settings
    from app.export.environment import ExportSettingsError
    from app.main import create_app
    from app.store.sqlitelock import DatabaseInUse, hold_sqlite_file

    settings = Settings(**_given(config=config, host=host, port=port))
    _refuse_open_writes(settings)
    targets = load_targets_or_exit(settings.config)
    logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT)
    quiet_chatty_loggers()
    url = settings.resolved(targets).database_url
    try:
        sock = bind(settings.host, settings.port)  # before anything is migrated or restored
        hold = hold_sqlite_file(url)  # kept until the process ends
    except (PortTaken, DatabaseInUse, OSError) as exc:
        fail(str(exc))
    _prepare_database(url, migrate)
    try:
        app = create_app(settings, targets, migrate=migrate)
    except ExportSettingsError as exc:
        fail(str(exc))
    run_server(app, sock, log_level)
    if hold is not None:
        hold.release()


def check_config(
    path: Annotated[
        Path | None, typer.Argument(help="Default $PHASEWATCH_CONFIG, else phasewatch.yaml.")
    ] = None,
) -> None:
    """Validate a targets file: every problem on a line of its own, exit 1 if any."""
    from app.config import Settings

    targets = load_targets_or_exit(path or Settings().config, starts=False)
    names = ", ".join(target.name for target in targets.targets) or "none"
    sys.stdout.write(f"ok: {len(targets.targets)} target(s): {names}\n")


def db_upgrade(database_url: DatabaseUrl = None, config: ConfigPath = None) -> None:
    """Migrate the database to the schema this phasewatch needs."""
    from app.store.migrate import head_revision

    url = resolve_database_url(database_url, config)
    _prepare_database(url, migrate=True, wait=False)
    sys.stdout.write(f"database at revision {head_revision()} (head)\n")


def db_current(database_url: DatabaseUrl = None, config: ConfigPath = None) -> None:
    """Show the database's schema revision; exit 1 if it is behind."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.store.db import make_engine
    from app.store.migrate import current_revision, head_revision

    url = resolve_database_url(database_url, config)
    try:
        engine = make_engine(url)
        try:
            current = current_revision(engine)
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        fail(f"database: {database_problem(exc, url)}")
    head = head_revision()
    sys.stdout.write(f"database at revision {current or 'none'}; head is {head}\n")
    if current != head:
        raise typer.Exit(1)


def quiet_chatty_loggers() -> None:
    # One line per probe request or job would drown what matters; and httpcore's debug
    # lines carry response headers, which may repeat a target's secret.
    for chatty in ("httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(max(logging.WARNING, logging.root.level))
    # APScheduler's warnings of skipped and missed runs are said once a streak, in the
    # targets' terms (app.runtime.scheduler); its errors (a job that raised) still show.
    for chatty in ("apscheduler.executors", "apscheduler.scheduler"):
        logging.getLogger(chatty).setLevel(max(logging.ERROR, logging.root.level))


def _refuse_open_writes(settings: Settings) -> None:
    from app.web.auth import configured_token, is_loopback

    if configured_token(settings) is None and not is_loopback(settings.host):
        fail(
            f"refusing to bind {settings.host} without PHASEWATCH_API_TOKEN: anyone who can "
            "reach it could acknowledge alerts and silence them; set a token or bind 127.0.0.1"
        )


def _given(**options: Any) -> dict[str, Any]:
    """Command-line options that were given: they win over the environment."""
    return {name: value for name, value in options.items() if value is not None}


def load_targets_or_exit(
    path: Path, *, require_env: bool = True, starts: bool = True
) -> TargetsFile:
    """The targets file, or each problem on a line and exit 1. ``require_env=False`` for
    commands that never probe or notify: ``${VAR}`` need not be set for them; ``starts``
    for commands that would have started something (the summary says nothing did)."""
    from app.config import ConfigError, load_targets

    try:
        return load_targets(path, require_env=require_env)
    except ConfigError as exc:
        for problem in exc.problems:
            sys.stderr.write(f"{problem}\n")
        fail(f"{path}: {len(exc.problems)} problem(s)" + ("; nothing started" if starts else ""))


def _prepare_database(url: str, migrate: bool, *, wait: bool = True) -> None:
    """Migrate, or check the schema. A database server that does not answer is no reason
    not to start (``wait``): ``serve`` then probes into the spool and does this once it
    answers. A SQLite file that cannot be opened is a mistake to fix, not an outage."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.store.db import is_transient, make_engine
    from app.store.migrate import current_revision, head_revision, upgrade

    try:
        if migrate:
            upgrade(url)
            return
        engine = make_engine(url)
        try:
            current = current_revision(engine)
        finally:
            engine.dispose()
    except SQLAlchemyError as exc:
        problem = database_problem(exc, url)
        if wait and is_transient(exc) and not url.startswith("sqlite"):
            logging.getLogger(__name__).warning(
                "database unreachable (%s); starting anyway, runs wait in the spool", problem
            )
            return
        fail(f"database: {problem}")
    if current != head_revision():
        fail(
            f"database schema is at {current or 'nothing'} but this phasewatch needs "
            f"{head_revision()}: run 'phasewatch db upgrade', or serve without --no-migrate"
        )
