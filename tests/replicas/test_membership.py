"""Leases on a real PostgreSQL: who counts from when, and the evaluations asked of owners."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, event, text

from app.replicas.assign import owner
from app.replicas.membership import Replicas
from app.store import replicarows
from app.store.db import make_engine, make_sessions

pytestmark = pytest.mark.postgres

LEASE_S = 30.0
TARGETS = [f"t{k}" for k in range(60)]


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    made = make_engine(postgres_url)
    yield made
    made.dispose()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replica(engine: Engine, name: str, clock: Clock | None = None) -> Replicas:
    return Replicas(make_sessions(engine), True, LEASE_S, name, clock or Clock())


def test_the_first_replica_counts_at_once_and_a_joiner_after_two_renewals(engine: Engine) -> None:
    first, second = replica(engine, "a"), replica(engine, "b")
    assert first.waiting and not first.owns("t1", 0)  # no lease read: nothing owned
    view_a = first.renew()
    view_b = second.renew()
    assert view_a is not None and view_b is not None
    (a,) = view_a.members
    assert a.effective_ms == view_a.read_ms  # alone: counts at once
    b = {m.id: m for m in view_b.members}["b"]
    settle_ms = round(second.settle_s * 1000)
    assert b.effective_ms == view_b.read_ms + settle_ms
    assert b.expires_ms == view_b.read_ms + round(LEASE_S * 1000)
    # The first reads the joiner's lease at its next renewal, before the joiner counts:
    # until then it owns everything; from then on they share.
    first.renew()
    assert first.share(TARGETS, b.effective_ms - 1) == TARGETS
    both = first.share(TARGETS, b.effective_ms) + second.share(TARGETS, b.effective_ms)
    assert sorted(both) == sorted(TARGETS)
    assert second.share(TARGETS, b.effective_ms) == [
        t for t in TARGETS if owner(t, ["a", "b"]) == "b"
    ]


def test_a_renewal_extends_the_lease_and_keeps_the_effective_time(engine: Engine) -> None:
    one = replica(engine, "a")
    first = one.renew()
    again = one.renew()
    assert first is not None and again is not None
    assert again.members[0].effective_ms == first.members[0].effective_ms
    assert again.members[0].expires_ms >= first.members[0].expires_ms


def forgotten(engine: Engine, name: str) -> None:
    """``name``'s lease ran out longer ago than a lease is remembered."""
    with engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE replicas SET renewed_at = now() - interval '3 hours',"
                " expires_at = now() - interval '2 hours' WHERE id = :id"
            ),
            {"id": name},
        )


def test_a_held_lease_is_renewed_and_every_lease_read_in_one_statement(engine: Engine) -> None:
    one, other = replica(engine, "a"), replica(engine, "b")
    one.renew()
    theirs = other.renew()
    sent: list[str] = []

    def count(*args: object) -> None:
        sent.append(str(args[2]))

    event.listen(engine, "before_cursor_execute", count)
    try:
        view = one.renew()
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(sent) == 1, sent
    assert view is not None and theirs is not None
    assert {m.id: m for m in view.members}["b"] == {m.id: m for m in theirs.members}["b"]
    assert [m.id for m in view.members] == ["a", "b"]


def test_a_replica_whose_lease_was_forgotten_joins_again_as_a_newcomer(engine: Engine) -> None:
    staying, returning = replica(engine, "a"), replica(engine, "b")
    staying.renew()
    returning.renew()
    forgotten(engine, "b")  # frozen for hours, say
    view = returning.renew()
    assert view is not None
    b = {m.id: m for m in view.members}["b"]
    # Not renewed in place (it would count at once): it waits to settle like any joiner.
    assert b.effective_ms == view.read_ms + round(returning.settle_s * 1000)


def test_a_renewal_deletes_a_forgotten_lease_it_reads(engine: Engine) -> None:
    one, gone = replica(engine, "a"), replica(engine, "b")
    one.renew()
    gone.renew()
    forgotten(engine, "b")
    view = one.renew()
    assert view is not None and [m.id for m in view.members] == ["a"]
    with engine.connect() as connection:
        assert connection.execute(text("SELECT id FROM replicas")).scalars().all() == ["a"]


def test_a_replica_that_leaves_ends_its_lease_and_the_other_takes_everything(
    engine: Engine,
) -> None:
    staying, leaving = replica(engine, "a"), replica(engine, "b")
    staying.renew()
    joined = leaving.renew()
    assert joined is not None
    leaving.leave()
    view = staying.renew()
    assert view is not None
    after = view.read_ms + round(staying.settle_s * 1000)
    assert staying.share(TARGETS, after) == TARGETS
    assert staying.live(after) == 1


def test_leases_are_not_believed_once_not_read_for_half_a_lease(engine: Engine) -> None:
    clock = Clock()
    one = replica(engine, "a", clock)
    one.renew()
    assert one.stale_s() is None
    clock.now = LEASE_S / 2
    assert one.stale_s() == LEASE_S / 2
    view = one.view()
    assert view is not None and not view.current
    far = view.read_ms + round(LEASE_S * 10_000)  # long past its own lease's end
    assert one.share(TARGETS, far) == TARGETS  # it keeps its share through the outage


def test_a_replica_whose_database_is_away_keeps_its_last_view(tmp_path: Path) -> None:
    away = make_engine("postgresql+psycopg://postgres@127.0.0.1:9/none?connect_timeout=1")
    try:
        one = Replicas(make_sessions(away), True, LEASE_S, "a")
        assert one.next_renewal_s == LEASE_S / 3
        assert one.renew() is None and one.waiting
        assert one.problem is not None
        assert one.next_renewal_s == 1.0  # tried again soon: a database back is seen at once
    finally:
        away.dispose()


def test_sqlite_owns_everything_without_leases(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path}/one.db")
    try:
        one = Replicas(make_sessions(engine), False, LEASE_S, "a")
        assert one.renew() is None and not one.waiting
        assert one.share(TARGETS, 0) == TARGETS and one.live() == 1
    finally:
        engine.dispose()


def test_evaluations_asked_coalesce_and_are_claimed_by_target(engine: Engine) -> None:
    sessions = make_sessions(engine)
    with engine.connect() as connection:
        assert not replicarows.any_requested(connection)
    with sessions.begin() as session:
        now = replicarows._database_now(session)
        for k, (target, vantage) in enumerate([("x", "v1"), ("x", "v1"), ("y", "v1"), ("x", "v2")]):
            replicarows.request(session, target, vantage, now + timedelta(seconds=k))
    with engine.connect() as connection:
        assert replicarows.any_requested(connection)
    with sessions.begin() as session:
        assert replicarows.claim(session, ["x"]) == [("x", "v1"), ("x", "v2")]
    with sessions.begin() as session:
        assert replicarows.claim(session, ["x", "y"]) == [("y", "v1")]
        assert replicarows.claim(session, []) == []
    with engine.connect() as connection:
        assert not replicarows.any_requested(connection)


def test_a_replica_restarted_after_a_crash_ends_its_predecessors_lease_and_counts_at_once(
    engine: Engine,
) -> None:
    # The predecessor: this host, a pid no process has (crashed), its lease still running.
    crashed = replica(engine, f"{socket.gethostname()}-999999999-abcdef")
    crashed.renew()
    sibling = replica(engine, f"{socket.gethostname()}-{os.getppid()}-fedcba")  # running
    sibling_view = sibling.renew()
    assert sibling_view is not None
    sibling_effective = [m for m in sibling_view.members if m.id == sibling.me][0].effective_ms

    restarted = Replicas(make_sessions(engine), True, LEASE_S)  # replica_id(): this host
    view = restarted.renew()
    assert view is not None
    leases = {m.id: m for m in view.members}
    assert leases[crashed.me].expires_ms <= view.read_ms  # ended, not held a lease longer
    assert leases[sibling.me].effective_ms == sibling_effective  # alive: untouched
    assert leases[sibling.me].expires_ms > view.read_ms
    # The sibling counts: the restarted one joins it as any joiner does.
    assert leases[restarted.me].effective_ms == view.read_ms + round(restarted.settle_s * 1000)
    assert view.live(view.read_ms) == [sibling.me]


def test_a_lone_replica_restarted_after_a_crash_owns_everything_at_once(engine: Engine) -> None:
    crashed = replica(engine, f"{socket.gethostname()}-999999999-abcdef")
    crashed.renew()
    restarted = Replicas(make_sessions(engine), True, LEASE_S)
    view = restarted.renew()
    assert view is not None
    assert restarted.share(TARGETS, view.read_ms) == TARGETS  # no two renewals' wait
