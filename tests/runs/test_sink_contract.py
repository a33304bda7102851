"""The ``Sink`` contract (app/runs/sink.py), held by every sink: the database on SQLite and
on PostgreSQL, a push to a real phasewatch server (uvicorn on loopback), and memory.

A run stored again is not stored twice, nor a second run of one slot; runs reach the sink
in the order given; an away
sink raises ``SinkAway`` and says why until a store succeeds; a run refused for good raises
``SinkRefused`` and never refuses its batch mates.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import pool, select
from sqlalchemy.engine import make_url

from app.agents.remote.client import ServerClient
from app.agents.remote.pushsink import PushSink
from app.config import Settings, load_targets
from app.main import create_app
from app.runs.dbsink import DatabaseSink
from app.runs.memsink import MemorySink
from app.runs.sink import Sink, SinkAway, SinkRefused
from app.runs.slots import epoch_ms
from app.store.db import Sessions, make_engine, make_sessions
from app.store.migrate import upgrade
from app.store.models import TargetRow
from app.store.records import RunRecord
from app.web.deps import agents_of
from tests.apiapp import loopback_socket, serving
from tests.runfactory import make_run, record_of

TOKEN = "fra-token-0123456789abcdef"
VANTAGE = "fra-1"
TARGETS = [f"t{k}" for k in range(5)]
SINKS = [
    "memory",
    pytest.param("database-sqlite", id="database-sqlite"),
    pytest.param("database-postgresql", id="database-postgresql", marks=pytest.mark.postgres),
    "push",
]
_rng = np.random.default_rng(7)


def a_run(target: str = "t0") -> RunRecord:
    return record_of(make_run(_rng, datetime.now(UTC), target=target, vantage=VANTAGE, n=2))


@dataclass
class Case:
    sink: Sink
    refused: RunRecord  # a run this sink refuses for good
    order: Callable[[], list[str]]  # the targets it took runs of, in the order first taken
    back: Callable[[], None]  # the sink, built away, is there from now on


# Memory -------------------------------------------------------------------------------


@contextmanager
def memory(_request: pytest.FixtureRequest, _tmp: Path, away: bool) -> Iterator[Case]:
    sink = MemorySink()
    if away:
        sink.go_away("told to be away")
    refused = a_run()
    sink.refuse(refused.id, "told to refuse it")
    yield Case(sink, refused, lambda: _firsts(r.target for r in sink.runs.values()), sink.come_back)


def _firsts(targets: Iterator[str]) -> list[str]:
    return list(dict.fromkeys(targets))


# The database -------------------------------------------------------------------------


def naive(record: RunRecord) -> RunRecord:
    """The run with a sample time that lost its zone: the database refuses it."""
    data = record.to_json()
    data["samples"][0]["started_at"] = data["samples"][0]["started_at"].removesuffix("+00:00")
    return RunRecord.from_json(data)


def targets_in_order(sessions: Sessions) -> list[str]:
    """A run of a target the database does not know adds its row: the rows' order is the
    order the runs came."""
    with sessions() as session:
        return list(session.scalars(select(TargetRow.name).order_by(TargetRow.id)))


@contextmanager
def database_sqlite(request: pytest.FixtureRequest, tmp: Path, away: bool) -> Iterator[Case]:
    path = tmp / "not-yet" / "phasewatch.db"  # away: its directory is not there yet

    def back() -> None:
        path.parent.mkdir()
        shutil.copyfile(request.getfixturevalue("_migrated_sqlite"), path)

    if not away:
        back()
    engine = make_engine(f"sqlite:///{path}")
    sessions = make_sessions(engine)
    try:
        yield Case(DatabaseSink(sessions), naive(a_run()), lambda: targets_in_order(sessions), back)
    finally:
        engine.dispose()


@contextmanager
def database_postgresql(request: pytest.FixtureRequest, _tmp: Path, away: bool) -> Iterator[Case]:
    server: str = request.getfixturevalue("postgres_server")
    name = f"pw_{secrets.token_hex(6)}"  # away: this database is not there yet
    url = make_url(server).set(database=name).render_as_string(hide_password=False)
    admin = make_engine(server, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")

    def back() -> None:
        with admin.connect() as connection:
            connection.exec_driver_sql(f'CREATE DATABASE "{name}"')
        upgrade(url)

    if not away:
        back()
    engine = make_engine(url)
    sessions = make_sessions(engine)
    try:
        yield Case(DatabaseSink(sessions), naive(a_run()), lambda: targets_in_order(sessions), back)
    finally:
        engine.dispose()
        with admin.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


# A push to a real server --------------------------------------------------------------


def targets_file() -> str:
    assigned = "".join(
        f"  - name: {name}\n    url: http://127.0.0.1:9/\n    vantages: [{VANTAGE}]\n"
        for name in TARGETS
    )
    return f"vantages:\n  {VANTAGE}: {{token: {TOKEN}}}\ntargets:\n" + assigned


@contextmanager
def push(request: pytest.FixtureRequest, tmp: Path, away: bool) -> Iterator[Case]:
    """The server with its lifespan off (nothing probed, its targets table empty), on a
    port that refuses connections until it listens (away: not yet)."""
    path = tmp / "phasewatch.yaml"
    path.write_text(targets_file())
    database = tmp / "server.db"
    shutil.copyfile(request.getfixturevalue("_migrated_sqlite"), database)
    settings = Settings(config=path, database_url=f"sqlite:///{database}", spool_dir=tmp / "s")
    app = create_app(settings, load_targets(path, {}))
    sock = loopback_socket()
    client = ServerClient(f"http://127.0.0.1:{sock.getsockname()[1]}", TOKEN, VANTAGE)
    with ExitStack() as stack:
        stack.callback(app.state.service.engine.dispose)
        stack.callback(lambda: agents_of(app).evaluations.wait_idle(30))
        stack.callback(client.close)

        def back() -> None:
            stack.enter_context(serving(app, sock=sock))

        if not away:
            back()
        refused = a_run("not-assigned")  # the server answers 403: never
        order = lambda: targets_in_order(app.state.service.sessions)  # noqa: E731
        yield Case(PushSink(client), refused, order, back)


BACKENDS = {
    "memory": memory,
    "database-sqlite": database_sqlite,
    "database-postgresql": database_postgresql,
    "push": push,
}


@pytest.fixture(params=SINKS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def case(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    with BACKENDS[kind](request, tmp_path, False) as built:
        yield built


@pytest.fixture
def away_case(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Case]:
    with BACKENDS[kind](request, tmp_path, True) as built:
        yield built


# The contract ---------------------------------------------------------------------------


def test_a_run_stored_again_is_stored_once(case: Case) -> None:
    run = a_run()
    assert case.sink.store(run) is True
    assert case.sink.store(run) is False  # had it already
    assert case.sink.store_batch([run]) == [False]
    assert case.order() == ["t0"]
    assert case.sink.problem is None


def test_a_second_run_of_one_slot_is_not_stored_and_answered_as_had_already(case: Case) -> None:
    """Two replicas that probed one scheduled run: the first kept, the second answered False
    (an agent drops it from its spool), whatever its id; another slot is stored."""
    at = datetime.now(UTC)
    slot = epoch_ms(at) - 1_000
    first, twin, other = (replace(a_run(), scheduled_at=at, slot=slot) for _ in range(3))
    assert case.sink.store(first) is True
    assert case.sink.store(twin) is False
    assert case.sink.store_batch([replace(other, slot=slot - 10_000), other]) == [True, False]
    assert case.sink.store_batch([replace(a_run(), slot=None)]) == [True]  # no slot: by id
    assert case.order() == ["t0"]
    assert case.sink.problem is None


def test_runs_reach_the_sink_in_the_order_given(case: Case) -> None:
    first, *middle, last = (a_run(target) for target in TARGETS)
    assert case.sink.store(first)
    assert case.sink.store_batch(middle) == [True] * len(middle)  # answered run by run
    assert case.sink.store(last)
    assert case.order() == TARGETS


def test_an_away_sink_raises_sink_away_and_says_why_until_a_store_succeeds(
    away_case: Case,
) -> None:
    sink, run = away_case.sink, a_run()
    with pytest.raises(SinkAway):
        sink.store(run)
    assert sink.problem
    with pytest.raises(SinkAway):
        sink.store_batch([run, a_run("t1")])  # nothing of it counts as answered
    assert sink.problem

    away_case.back()
    assert sink.store(run) is True  # not stored while away
    assert sink.problem is None
    assert sink.store_batch([a_run("t1")]) == [True]
    assert away_case.order() == ["t0", "t1"]


NAMES = {
    "memory": "memory",
    "database-sqlite": "the database",
    "database-postgresql": "the database",
    "push": "server http://127.0.0.1:",
}


def test_a_sink_names_itself_for_the_log_lines_that_say_it_is_away(kind: str, case: Case) -> None:
    assert case.sink.name.startswith(NAMES[kind])


def test_a_run_refused_for_good_raises_sink_refused_and_never_refuses_its_batch_mates(
    case: Case,
) -> None:
    with pytest.raises(SinkRefused):
        case.sink.store(case.refused)
    before, after = a_run("t1"), a_run("t2")
    answers = case.sink.store_batch([before, case.refused, after])
    assert answers[0] is True and answers[2] is True
    assert isinstance(answers[1], str) and answers[1]
    assert case.order() == ["t1", "t2"]
    assert case.sink.problem is None
