from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import pytest
import trustme
from sqlalchemy import Engine, pool
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.store.db import make_engine, make_sessions, normalize_url
from app.store.migrate import upgrade
from tests.helpers import FAST_SIM, ThreadLag


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def tls_ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="session")
def server_tls(tls_ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls_ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.fixture(scope="session")
def ca_file(tls_ca: trustme.CA, tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    tls_ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(scope="session")
def refused_port() -> Iterator[int]:
    """A loopback port that refuses every connection for the whole session: bound and never
    listened on, so no other process can take it. A port that is merely free when a test
    picks it can be taken by another worker's server before the test connects (it once
    answered 404 where a refusal was expected)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


# --- The simulated endpoint ------------------------------------------------------------------
# `sim` is the simulator on a loopback port (its own thread) for the test; a module that wants
# other delays overrides `sim_config`.


@pytest.fixture
def sim_config() -> SimConfig:
    return FAST_SIM


@pytest.fixture
def sim(sim_config: SimConfig) -> Iterator[SimServer]:
    with SimServer(sim_config) as server:
        yield server


# --- Databases ------------------------------------------------------------------------------
# The contract for tests that need a database:
#   db_url        an empty database migrated to head; every test using it runs twice, with
#                 the ids [sqlite] and [postgresql] (the latter marked `postgres`)
#   engine        make_engine(db_url), disposed after the test
#   sessions      make_sessions(engine)
#   postgres_url  the same as db_url[postgresql], for PostgreSQL-only tests
#   empty_db_url  like db_url but never migrated: for migration and `db upgrade` tests
#   module_db_url like db_url, but one database for the whole module: for read-only data
#                 a module-scoped fixture builds once
# PostgreSQL is PHASEWATCH_TEST_POSTGRES_URL. Each pytest session gets a database of its own
# (created, migrated once, dropped at the end) whose tables are emptied before every test.
# When the server cannot be reached its tests skip, or fail if PHASEWATCH_REQUIRE_POSTGRES=1.

DEFAULT_TEST_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DATABASES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="session")
def postgres_server() -> str:
    """The URL of the PostgreSQL server's maintenance database, once it answers."""
    url = normalize_url(os.environ.get("PHASEWATCH_TEST_POSTGRES_URL", DEFAULT_TEST_POSTGRES_URL))
    problem = _unreachable(url)
    if problem is None:
        return url
    shown = make_url(url).render_as_string(hide_password=True)
    message = f"PostgreSQL at {shown} (PHASEWATCH_TEST_POSTGRES_URL) is unreachable: {problem}"
    if os.environ.get("PHASEWATCH_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"{message}; PHASEWATCH_REQUIRE_POSTGRES=1 forbids skipping", pytrace=False)
    pytest.skip(message)


def _unreachable(url: str) -> str | None:
    engine = make_engine(url, poolclass=pool.NullPool, connect_args={"connect_timeout": 5})
    try:
        with engine.connect():
            return None
    except DBAPIError as exc:
        return str(exc.orig).strip().splitlines()[0]
    finally:
        engine.dispose()


@contextmanager
def _postgres_database(server: str, encoding: str | None = None) -> Iterator[str]:
    """A new, empty database on the server (in ``encoding``, else the server's default),
    dropped afterwards."""
    name = f"pw_{secrets.token_hex(6)}"
    admin = make_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    create = f'CREATE DATABASE "{name}"'
    if encoding is not None:
        create += f" ENCODING '{encoding}' TEMPLATE template0 LC_COLLATE 'C' LC_CTYPE 'C'"
    with admin.connect() as connection:
        connection.exec_driver_sql(create)
    try:
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            # FORCE: a connection a test leaked must not keep the database alive.
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.fixture(scope="session")
def _migrated_postgres(postgres_server: str) -> Iterator[Engine]:
    with _postgres_database(postgres_server) as url:
        upgrade(url)
        engine = make_engine(url, poolclass=pool.NullPool)
        yield engine
        engine.dispose()


@pytest.fixture(params=["SQL_ASCII", "LATIN1"])
def non_utf8_postgres_url(request: pytest.FixtureRequest, postgres_server: str) -> Iterator[str]:
    """An empty PostgreSQL database in an encoding phasewatch refuses."""
    with _postgres_database(postgres_server, request.param) as url:
        yield url


@pytest.fixture
def postgres_url(_migrated_postgres: Engine) -> str:
    """The session's PostgreSQL database, at head, every table emptied."""
    with _migrated_postgres.begin() as connection:
        # A transaction some earlier test left open would make TRUNCATE wait forever.
        connection.exec_driver_sql("SET LOCAL lock_timeout = '10s'")
        tables = connection.exec_driver_sql(
            "SELECT quote_ident(tablename) FROM pg_tables"
            " WHERE schemaname = current_schema() AND tablename <> 'alembic_version'"
        ).scalars()
        connection.exec_driver_sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    return _migrated_postgres.url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def _migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at head, migrated once and copied for each test (faster than Alembic)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "phasewatch.db"
    upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture(params=DATABASES)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return cast(str, request.getfixturevalue("postgres_url"))
    path = tmp_path / "phasewatch.db"
    shutil.copyfile(request.getfixturevalue("_migrated_sqlite"), path)
    return f"sqlite:///{path}"


@pytest.fixture(scope="module", params=DATABASES)
def module_db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A database at head of the module's own, for data built once and only read by its
    tests (the per-test ``db_url`` empties PostgreSQL's shared database, so not that one)."""
    if request.param == "sqlite":
        path = tmp_path_factory.mktemp("module-db") / "phasewatch.db"
        shutil.copyfile(request.getfixturevalue("_migrated_sqlite"), path)
        yield f"sqlite:///{path}"
        return
    with _postgres_database(request.getfixturevalue("postgres_server")) as url:
        upgrade(url)
        yield url


@pytest.fixture(params=DATABASES)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with _postgres_database(request.getfixturevalue("postgres_server")) as url:
        yield url


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return make_sessions(engine)


@pytest.fixture
def lag() -> Iterator[ThreadLag]:
    """How late this process's threads woke while the test ran: a probe reads what the
    kernel already holds that much late at most, so timing bounds add it."""
    with ThreadLag() as measured:
        yield measured


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Never quiet about a real part not tested here: a clone without ``../shared`` beside
    it, no Docker, no Chromium. One line per reason, after the run (CI fails instead:
    ``PHASEWATCH_REQUIRE_*``)."""
    skipped = terminalreporter.stats.get("skipped", [])
    reasons: dict[str, int] = {}
    for report in skipped:
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        reasons[reason] = reasons.get(reason, 0) + 1
    if not reasons:
        return
    terminalreporter.section("not tested here: real parts missing")
    for reason, count in sorted(reasons.items()):
        terminalreporter.line(f"{count} test(s): {reason}")
    terminalreporter.line(
        "docs/development.md says how to give each one (CI fails instead of skipping)."
    )
