"""Replicas on one PostgreSQL database: exactly one leads (keeps rollups and retention), and
another takes over; the helpers the replicas' process tests share (tests/faults). How they
share the probing: tests/faults/test_replicas_share.py."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from sqlalchemy import Engine, pool, select, text

from app.config import Settings
from app.demo.sim.server import SimServer
from app.main import build_service
from app.runtime.service import Service
from app.store.db import make_engine, make_sessions
from app.store.leader import LOCK_KEY, Leadership
from app.store.models import RunRow, TargetRow
from tests.helpers import eventually
from tests.pgcluster import Serve, serving

pytestmark = pytest.mark.postgres

INTERVAL_S = 1.0
CHECK_S = 1.0  # PHASEWATCH_LEADER_CHECK_S for the replicas
TARGETS = ("alpha", "beta")


# --- Leadership, directly ------------------------------------------------------------------


@pytest.fixture
def engines(postgres_url: str) -> Iterator[Callable[[], Engine]]:
    made: list[Engine] = []

    def make() -> Engine:
        made.append(make_engine(postgres_url))
        return made[-1]

    yield make
    for engine in made:
        engine.dispose()


@pytest.fixture
def admin(postgres_url: str) -> Iterator[Engine]:
    engine = make_engine(postgres_url, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    wait_until_free(engine)  # a replica of an earlier test may still be dying
    yield engine
    engine.dispose()


def lock_holder(admin: Engine) -> int | None:
    """The backend pid holding the leadership lock in this database, as PostgreSQL sees it."""
    with admin.connect() as connection:
        pid = connection.scalar(
            text(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
                " AND classid = :high AND objid = :low AND objsubid = 1"
            ),
            {"high": LOCK_KEY >> 32, "low": LOCK_KEY & 0xFFFF_FFFF},
        )
    return None if pid is None else int(pid)


def wait_until_free(admin: Engine) -> None:
    eventually(lambda: lock_holder(admin) is None, 10, "leadership lock released")


def terminate(admin: Engine, pid: int) -> None:
    """Kill a backend, as a network cut or a DBA would; returns once its locks are gone."""
    with admin.connect() as connection:
        assert connection.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    eventually(lambda: lock_holder(admin) != pid, 10, f"backend {pid} gone")


def test_only_one_of_two_processes_leads_until_it_releases(
    engines: Callable[[], Engine], admin: Engine
) -> None:
    first, second = Leadership(engines()), Leadership(engines())
    try:
        assert (first.check(), second.check()) == (True, False)
        assert (first.check(), second.check()) == (True, False)  # kept, not re-contested
        assert (first.leading, second.leading) == (True, False)
        assert lock_holder(admin) is not None

        first.release()
        assert lock_holder(admin) is None
        assert (second.check(), first.check()) == (True, False)
    finally:
        first.release()
        second.release()
    assert lock_holder(admin) is None


def test_a_leader_whose_connection_is_killed_steps_down_if_another_took_the_lock(
    engines: Callable[[], Engine], admin: Engine
) -> None:
    leader, other = Leadership(engines()), Leadership(engines())
    try:
        assert (leader.check(), other.check()) == (True, False)
        killed = lock_holder(admin)
        assert killed is not None
        terminate(admin, killed)

        assert other.check() is True  # took the freed lock first
        assert leader.check() is False  # finds its connection dead and the lock taken
        assert (leader.leading, other.leading) == (False, True)
        assert lock_holder(admin) not in (None, killed)
        assert leader.connection is None
    finally:
        leader.release()
        other.release()


def test_a_leader_whose_connection_is_killed_takes_the_lock_again_if_nobody_did(
    engines: Callable[[], Engine], admin: Engine
) -> None:
    leader, other = Leadership(engines()), Leadership(engines())
    try:
        assert (leader.check(), other.check()) == (True, False)
        killed = lock_holder(admin)
        assert killed is not None
        terminate(admin, killed)

        assert leader.check() is True
        retaken = lock_holder(admin)
        assert retaken is not None and retaken != killed  # a new session holds it
        assert other.check() is False
    finally:
        leader.release()
        other.release()


def test_the_check_that_takes_or_loses_the_lead_says_so_whoever_asked(
    engines: Callable[[], Engine], admin: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    # The service checks at start, once the schema is there and in its loop: a line
    # written by one of them after comparing before and after missed the others' takes.
    caplog.set_level(logging.INFO, "app.store.leader")
    leader, other = Leadership(engines()), Leadership(engines())
    try:
        assert (leader.check(), other.check(), leader.check()) == (True, False, True)
        assert caplog.text.count("took the lead") == 1  # by the check that took it, once
        killed = lock_holder(admin)
        assert killed is not None
        terminate(admin, killed)

        assert (other.check(), leader.check()) == (True, False)
        assert caplog.text.count("took the lead") == 2
        assert caplog.text.count("lost the lead") == 1
    finally:
        leader.release()
        other.release()


def test_a_released_lead_is_not_taken_again(engines: Callable[[], Engine], admin: Engine) -> None:
    # A stopping service gives the lead up first; its leader loop may check once more
    # before it is cancelled, and must not take the lock back on a connection nobody frees.
    leadership = Leadership(engines())
    try:
        assert leadership.check() is True
        leadership.release()
        assert (leadership.check(), leadership.leading) == (False, False)
        assert lock_holder(admin) is None
    finally:
        leadership.release()


def test_a_process_that_never_reached_the_database_does_not_lead(refused_port: int) -> None:
    engine = make_engine(f"postgresql+psycopg://postgres@127.0.0.1:{refused_port}/none")
    leadership = Leadership(engine)
    try:
        assert (leadership.check(), leadership.leading, leadership.elected) == (False, False, False)
    finally:
        engine.dispose()


def test_the_first_check_that_reaches_the_database_elects(
    engines: Callable[[], Engine], admin: Engine
) -> None:
    first, second = Leadership(engines()), Leadership(engines())
    try:
        assert not first.elected and not first.leading  # before any check: nobody leads
        assert (first.check(), second.check()) == (True, False)
        assert first.elected and second.elected  # the follower, too, has been told
    finally:
        first.release()
        second.release()


def test_sqlite_always_leads(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/one.db")
    leadership = Leadership(engine)
    try:
        assert (leadership.leading, leadership.elected, leadership.check()) == (True, True, True)
    finally:
        engine.dispose()


# --- Replicas starting at the same moment ---------------------------------------------------


def start_together(services: list[Service]) -> list[Exception]:
    """Start (then stop) every service at the same moment, each on a loop of its own."""
    together = threading.Barrier(len(services), timeout=10)
    failures: list[Exception] = []

    async def start_and_stop(service: Service) -> None:
        together.wait()
        try:
            await service.start()
            # Not START_WAIT_S: on a loaded machine start returns before the targets are
            # written (into the spool meanwhile, as designed), and the stop cancelled it.
            await service.until_ready()
        finally:
            await service.stop()

    def replica(service: Service) -> None:
        try:
            asyncio.run(start_and_stop(service))
        except Exception as exc:
            failures.append(exc)

    threads = [threading.Thread(target=replica, args=(service,)) for service in services]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert not any(thread.is_alive() for thread in threads), "a replica hangs"
    return failures


def test_replicas_starting_together_on_an_empty_database_all_start(
    tmp_path: Path, postgres_url: str, admin: Engine
) -> None:
    # Each inserts the same new targets: the one that loses the race must start all the same.
    config = tmp_path / "phasewatch.yaml"
    entries = [
        f"  - {{name: {name}, url: 'http://127.0.0.1:9/', interval: 1h}}\n" for name in TARGETS
    ]
    config.write_text("targets:\n" + "".join(entries))
    for attempt in range(6):  # the race is lost about every other time
        with admin.connect() as connection:
            connection.execute(text("TRUNCATE targets RESTART IDENTITY CASCADE"))
        services = [
            build_service(
                Settings(
                    config=config,
                    database_url=postgres_url,
                    spool_dir=tmp_path / f"spool-{attempt}-{replica}",
                )
            )
            for replica in range(2)
        ]
        assert start_together(services) == []
        with admin.connect() as connection:
            names = connection.scalars(text("SELECT name FROM targets ORDER BY name")).all()
        assert names == sorted(TARGETS)


# --- Two `phasewatch serve` replicas ---------------------------------------------------------


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., Serve]]:
    with serving(tmp_path) as start:
        yield start


def targets_file(tmp_path: Path, sim: SimServer) -> Path:
    entries = "".join(
        f"  - name: {name}\n    kind: http\n    url: {sim.url}/health\n"
        f"    interval: {INTERVAL_S}s\n    samples: 2\n"
        for name in TARGETS
    )
    path = tmp_path / "phasewatch.yaml"
    path.write_text(f"targets:\n{entries}")
    return path


class Run:
    def __init__(
        self, started_at: datetime, scheduled_at: datetime | None, finished_at: datetime | None
    ) -> None:
        assert scheduled_at is not None  # every scheduled run says when it was due
        assert finished_at is not None
        self.started_at, self.scheduled_at = started_at, scheduled_at
        self.finished_at = finished_at

    def __repr__(self) -> str:
        return (
            f"Run(due {self.scheduled_at:%S.%f}, started {self.started_at:%S.%f},"
            f" finished {self.finished_at:%S.%f})"
        )


def stored_runs(url: str) -> dict[str, list[Run]]:
    """The runs of each target, oldest first."""
    engine = make_engine(url, poolclass=pool.NullPool)
    try:
        with make_sessions(engine)() as session:
            rows = session.execute(
                select(TargetRow.name, RunRow.started_at, RunRow.scheduled_at, RunRow.finished_at)
                .join(TargetRow)
                .order_by(RunRow.started_at)
            )
            runs: dict[str, list[Run]] = {name: [] for name in TARGETS}
            for name, started_at, scheduled_at, finished_at in rows:
                runs[name].append(Run(started_at, scheduled_at, finished_at))
            return runs
    finally:
        engine.dispose()


def gaps_s(times: list[datetime]) -> list[float]:
    return [(later - earlier).total_seconds() for earlier, later in pairwise(times)]


def assert_one_scheduler(runs: list[Run], skipped: int = 0) -> None:
    """Due times on one grid, whole intervals apart: two schedulers would interleave.

    A slot due while the run before it is still in flight is skipped, not stacked: such
    slots are explained by that run's finish. ``skipped`` more may be missing, as after a
    takeover, when the missed slot runs late and the next is near.
    """
    due = [gap / INTERVAL_S for gap in gaps_s([run.scheduled_at for run in runs])]
    assert all(round(gap) >= 1 and abs(gap - round(gap)) < 0.05 for gap in due), runs
    unexplained = [
        (earlier, round(gap) - 1)
        for earlier, gap in zip(runs, due, strict=False)
        if round(gap) > 1
        and earlier.finished_at <= earlier.scheduled_at + timedelta(seconds=INTERVAL_S)
    ]
    assert sum(missing for _, missing in unexplained) <= skipped, runs


def assert_never_two_at_once(runs: list[Run]) -> None:
    """Each run starts after the one before it has finished: one scheduler, one at a time."""
    assert all(b.started_at >= a.finished_at for a, b in pairwise(runs)), runs


def leads(replica: Serve) -> bool:
    health = replica.health()
    return health is not None and health["leader"] is True
