"""Alembic's environment for phasewatch: which database, and the models to compare against.

The URL is the ``sqlalchemy.url`` our code puts in the config (``app.store.migrate``), else
``PHASEWATCH_DATABASE_URL``, else the SQLite default.
"""

from __future__ import annotations

from typing import Any

from alembic import context
from sqlalchemy import Connection, pool
from sqlalchemy.engine import make_url

from app.config import DEFAULT_DATABASE_URL, Settings
from app.store.db import make_engine, normalize_url
from app.store.migrate import objects_of
from app.store.models import Base

MIGRATION_LOCK_KEY = 0x7068_6173_6D69_6772  # "phasmigr"


def database_url() -> str:
    url = context.config.get_main_option("sqlalchemy.url")
    if not url:
        # Settings' positional Field defaults are invisible to mypy without pydantic's plugin.
        url = Settings().database_url or DEFAULT_DATABASE_URL
    return normalize_url(url)


def configure(is_sqlite: bool, **options: Any) -> None:
    context.configure(
        target_metadata=Base.metadata,
        # SQLite can alter little in place: batch mode rebuilds the table instead.
        render_as_batch=is_sqlite,
        compare_type=True,
        include_object=objects_of("sqlite" if is_sqlite else "postgresql"),
        **options,
    )


def run_offline(url: str) -> None:
    """``--sql``: print the migration as SQL for a DBA instead of running it."""
    is_sqlite = make_url(url).get_backend_name() == "sqlite"
    configure(is_sqlite, url=url, literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_online(url: str) -> None:
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            run_on(connection)
    finally:
        engine.dispose()


def run_on(connection: Connection) -> None:
    is_sqlite = connection.dialect.name == "sqlite"
    if is_sqlite:
        # A batch migration drops and recreates tables; with foreign keys enforced, dropping
        # `runs` would cascade into `samples`. The pragma only works outside a transaction.
        connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
        connection.commit()
    configure(is_sqlite, connection=connection)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":
            # Replicas starting together on a new database: one migrates, the rest wait
            # and then find nothing left to do. Released when the transaction ends.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
        context.run_migrations()


if context.is_offline_mode():
    run_offline(database_url())
else:
    run_online(database_url())
