"""The database seam: engine and sessions. SQLite (WAL) by default, PostgreSQL in production."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeAlias
from weakref import WeakKeyDictionary

import orjson
from sqlalchemy import Connection, Engine, create_engine, event, pool
from sqlalchemy.engine import make_url
from sqlalchemy.exc import (
    DBAPIError,
    InterfaceError,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.orm import Session, sessionmaker

from app.store.pooled import close_late_returns, replace_if_dropped, stamp_checkin
from app.store.samplepack import json_text

log = logging.getLogger(__name__)

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
# Text arrives as UTF-8 whatever the database's encoding: on a SQL_ASCII database the
# driver would otherwise hand over bytes, and the first connect fails on them.
POSTGRES_CONNECT_ARGS: dict[str, Any] = POSTGRES_TIMEOUTS | {"client_encoding": "utf8"}


class UnsupportedDatabase(SQLAlchemyError):
    """A database phasewatch cannot store into as it is; the message says how to fix it."""


def is_transient(exc: Exception) -> bool:
    """The database is away (down, restarting, unreachable), not refusing this write."""
    if isinstance(exc, OperationalError | InterfaceError):
        return True
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


# What a database error is, for the layers above the store that must not import SQLAlchemy.
StoreError = SQLAlchemyError


def is_unavailable(exc: Exception) -> bool:
    """The database is away, or every pooled connection is held (by reads it leaves hanging)."""
    return is_transient(exc) or isinstance(exc, PoolTimeout)


def describe(exc: Exception) -> str:
    """A database error on one line: the driver's own words, without SQLAlchemy's wrapping."""
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# The drivers phasewatch ships and is tested on; every spelling of PostgreSQL means psycopg 3.
DRIVERS = {
    "sqlite": "sqlite",
    "sqlite+pysqlite": "sqlite",
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "postgresql+psycopg": "postgresql+psycopg",
    "postgresql+psycopg2": "postgresql+psycopg",
}


def normalize_url(url: str) -> str:
    """The URL with the driver phasewatch uses; any database but these two is refused in a
    sentence (SQLAlchemy would fail on importing a driver that is not installed)."""
    parsed = make_url(url)
    driver = DRIVERS.get(parsed.drivername)
    if driver is None:
        raise UnsupportedDatabase(
            f"{parsed.drivername}:// is not supported: phasewatch stores into SQLite"
            " (sqlite:///path/to/file.db) or PostgreSQL (postgresql://user@host/db)"
        )
    return parsed.set(drivername=driver).render_as_string(hide_password=False)


def sqlite_file(url: str) -> str | None:
    """The file of a SQLite URL's database; None for another database or an in-memory one."""
    parsed = make_url(url)
    database = parsed.database
    if not parsed.drivername.startswith("sqlite") or not database or database == ":memory:":
        return None
    return database


def sqlite_folder_problem(url: str) -> str | None:
    """What keeps SQLite from opening a file URL's database, which SQLite itself says only as
    "unable to open database file": the file and its folder, named."""
    database = sqlite_file(url)
    if database is None:
        return None
    folder = Path(database).resolve().parent
    if not folder.is_dir():
        return f"SQLite file {database}: its folder {folder} does not exist"
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"SQLite file {database}: the folder {folder} is not writable"
    return None


def make_engine(url: str, **options: Any) -> Engine:
    url = normalize_url(url)
    given = options.pop("connect_args", {})
    options.setdefault("json_deserializer", json_loads)
    if url.startswith("sqlite"):
        options.setdefault("json_serializer", json_dumps_text)
        engine = create_engine(url, connect_args={"timeout": 30} | given, **options)
        event.listen(engine, "connect", _sqlite_pragmas)
        return close_late_returns(engine)
    connect_args = POSTGRES_CONNECT_ARGS | given
    # psycopg takes the bytes as they are: no decode, no re-encode.
    options.setdefault("json_serializer", json_dumps)
    engine = create_engine(url, connect_args=connect_args, **options)
    event.listen(engine, "connect", _require_utf8)
    event.listen(engine, "checkin", stamp_checkin)
    event.listen(engine, "checkout", replace_if_dropped)
    return close_late_returns(engine)


def _require_utf8(dbapi_connection: Any, _record: Any) -> None:
    """Targets, vantages and a server's error text are any Unicode; a database in another
    encoding would store some of them as mojibake (SQL_ASCII) or refuse them (LATIN1)."""
    info = dbapi_connection.info
    encoding, name = info.parameter_status("server_encoding"), info.dbname
    if encoding not in (None, "UTF8"):
        dbapi_connection.close()
        raise UnsupportedDatabase(
            f"database {name!r} is encoded {encoding}; phasewatch needs UTF8: "
            f"CREATE DATABASE ... ENCODING 'UTF8' TEMPLATE template0"
        )


# Storing a run encodes four JSON documents per sample: orjson does it several times faster
# than the json module. Integer keys become strings, as json.dumps makes them.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def json_dumps(value: Any) -> bytes:
    return orjson.dumps(value, option=_ORJSON_OPTIONS)


def json_dumps_text(value: Any) -> str:
    return orjson.dumps(value, option=_ORJSON_OPTIONS).decode()


def json_loads(text: str | bytes) -> Any:
    """orjson, except for documents only the json module reads (NaN, written by it before)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    # WAL lets the dashboard read while a run is written; NORMAL is durable across
    # application crashes in WAL mode, which is what a probe needs.
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
    connection.create_function("samplepack_json", 2, json_text, deterministic=True)


# What the layers above the store hold without knowing SQLAlchemy: a session, and what opens
# one (tests/test_layers.py keeps alerts, analysis and web free of SQLAlchemy imports).
Sessions: TypeAlias = sessionmaker[Session]
__all__ = ["Session", "Sessions"]


def make_sessions(engine: Engine) -> Sessions:
    return sessionmaker(engine, expire_on_commit=False)


def autocommit(engine: Engine) -> Connection:
    """A PostgreSQL connection whose every statement is its own transaction: one round trip
    a statement, no BEGIN or COMMIT around it (a lease's renewal, a look for requests, the
    leader's lock)."""
    return engine.connect().execution_options(isolation_level="AUTOCOMMIT")


def read_sessions(sessions: Sessions) -> Sessions:
    """``sessions`` for reads alone. On PostgreSQL each statement is a transaction of its
    own (autocommit): a read is spared its BEGIN and ROLLBACK round trips and sees the same
    rows, READ COMMITTED giving each statement a snapshot of its own either way. On SQLite
    ``sessions`` (there a read transaction holds one snapshot for all its statements)."""
    engine: Engine = sessions.kw["bind"]
    if engine.dialect.name != "postgresql":
        return sessions
    # Once for each ``sessions`` (the rollup loop asks every pass), gone with it.
    if (found := _read_sessions.get(sessions)) is None:
        autocommitted = engine.execution_options(isolation_level="AUTOCOMMIT")
        found = _read_sessions[sessions] = make_sessions(autocommitted)
    return found


_read_sessions: WeakKeyDictionary[Sessions, Sessions] = WeakKeyDictionary()


def unpooled_sessions(url: str) -> Sessions:
    """Sessions that hold no connection between uses: a worker process's (app.runtime.workers)."""
    return make_sessions(make_engine(url, poolclass=pool.NullPool))


@contextmanager
def transaction(sessions: Sessions) -> Iterator[Session]:
    """One session, one transaction: committed on success, rolled back on any error."""
    with sessions.begin() as session:
        yield session


# SQLite lets one writer in at a time, and a writer that finds the lock taken sleeps and
# polls at growing intervals, so a lock held for a few ms by another thread can cost it many
# times that (``bench.store_prune`` measures the slowest store). Writers in this process
# queue on a lock of ours instead, which is handed over the moment it is released. One per
# database file, shared by its engines.
WRITE_LOCK_WAIT_S = 30.0  # SQLite's own busy timeout (see make_engine)
_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()
# Each engine's, found once: resolving the file's path takes system calls on every store.
_engine_write_locks: WeakKeyDictionary[Engine, threading.Lock | None] = WeakKeyDictionary()


def write_lock_of(engine: Engine) -> threading.Lock | None:
    try:
        return _engine_write_locks[engine]
    except KeyError:
        found = _engine_write_locks[engine] = _find_write_lock(engine)
        return found


def _find_write_lock(engine: Engine) -> threading.Lock | None:
    if engine.dialect.name != "sqlite":
        return None  # PostgreSQL locks rows, not the database
    database = engine.url.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file:")
    key = f"engine-{id(engine)}" if in_memory else str(Path(database).resolve())
    with _write_locks_guard:
        return _write_locks.setdefault(key, threading.Lock())


@contextmanager
def write_lock(engine: Engine) -> Iterator[None]:
    """Hold around a write transaction: on SQLite, one writer of this process at a time.

    Not re-entrant: a thread holding it must not open another write transaction. Should the
    lock not come within SQLite's own busy timeout, the write goes ahead without it and
    SQLite decides (it waits, or says the database is locked), as it would without us.
    """
    lock = write_lock_of(engine)
    if lock is None:
        yield
        return
    acquired = lock.acquire(timeout=WRITE_LOCK_WAIT_S)
    if not acquired:
        log.warning(
            "waited %.0f s for the SQLite write lock; writing without it", WRITE_LOCK_WAIT_S
        )
    try:
        yield
    finally:
        if acquired:
            lock.release()


@contextmanager
def write_transaction(sessions: Sessions) -> Iterator[Session]:
    """``transaction`` for writers: under ``write_lock`` of the sessions' engine."""
    engine: Engine = sessions.kw["bind"]
    with write_lock(engine), sessions.begin() as session:
        yield session


@contextmanager
def write_connection(sessions: Sessions) -> Iterator[Connection]:
    """``write_transaction`` without the ORM: a Core connection in one transaction, for
    the run store, where a Session's own work is a large share of the write."""
    engine: Engine = sessions.kw["bind"]
    with write_lock(engine), engine.begin() as connection:
        yield connection
