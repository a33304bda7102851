"""The database seam: engine and sessions. SQLite (WAL) by default, PostgreSQL in production."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

# A database that stops answering without closing its connections (paused, partitioned)
# must not hang a store for minutes: give up connecting after 5 s, and let the kernel
# drop a connection whose data goes unacknowledged for 15 s or that idles without answer.
POSTGRES_TIMEOUTS: dict[str, Any] = {
    "connect_timeout": 5,
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 2,
    "tcp_user_timeout": 15_000,
}


def normalize_url(url: str) -> str:
    """``postgresql://`` means psycopg 3 here, not SQLAlchemy's default psycopg2."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def make_engine(url: str, **options: Any) -> Engine:
    url = normalize_url(url)
    given = options.pop("connect_args", {})
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": 30} | given, **options)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    connect_args = POSTGRES_TIMEOUTS | given
    return create_engine(url, pool_pre_ping=True, connect_args=connect_args, **options)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    # WAL lets the dashboard read while a run is written; NORMAL is durable across
    # application crashes in WAL mode, which is what a probe needs.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_sessions(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """One session, one transaction: committed on success, rolled back on any error."""
    with sessions.begin() as session:
        yield session
