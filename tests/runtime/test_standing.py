"""The lease and the lead kept by one loop (app/runtime/standing.py): when each is due, and
on PostgreSQL a leader's pass in one statement, the renewal on the lock's own connection
standing for its liveness check, with every decision the check made alone."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest
from sqlalchemy import Connection, Engine, event, pool, select
from sqlalchemy.exc import DBAPIError

from app.replicas.membership import Replicas
from app.runtime.standing import Standing
from app.store import replicarows
from app.store.db import make_engine, make_sessions
from app.store.leader import Leadership
from app.store.replicarows import ReplicaRow
from tests.store.test_leader import lock_holder, terminate, wait_until_free


@dataclass
class Lease:
    next_renewal_s: float = 5.0


def standing(
    lead_at: float, share_at: float, renew_s: float = 5.0, lead_s: float = 5.0
) -> Standing:
    kept = Standing(cast(Any, None), cast(Any, Lease(renew_s)), lead_s)
    kept.done(True, True, 0.0)
    kept._lead_at, kept._share_at = lead_at, share_at  # noqa: SLF001 (the state under test)
    return kept


@pytest.mark.parametrize(
    ("lead_at", "share_at", "renew_s", "now", "due"),
    [
        (10.0, 10.0, 5.0, 10.0, (True, True)),  # the defaults' one rhythm
        (10.0, 12.5, 5.0, 10.0, (True, True)),  # the renewal 2.5 s early, with the check
        (10.0, 12.6, 5.0, 10.0, (True, False)),  # further off: each on its own
        (12.6, 10.0, 5.0, 10.0, (False, True)),
        (12.0, 10.0, 5.0, 10.0, (True, True)),  # the check early, with the renewal
        (10.4, 10.0, 1.0, 10.0, (True, True)),  # leases unread: renewals every second,
        (10.6, 10.0, 1.0, 10.0, (False, True)),  # and the check at most 0.5 s early
        (10.0, 12.0, 5.0, 9.0, (False, False)),  # nothing due: nothing early either
    ],
)
def test_each_runs_when_due_and_the_other_with_it_if_due_within_half_the_shorter_period(
    lead_at: float, share_at: float, renew_s: float, now: float, due: tuple[bool, bool]
) -> None:
    assert standing(lead_at, share_at, renew_s).due(now) == due


@pytest.mark.parametrize("lead_at", [0.0, 1.0, 2.5, 4.0, 4.9])
def test_with_equal_periods_the_two_fall_into_one_rhythm_at_the_first_pass(lead_at: float) -> None:
    kept, now, passes = standing(lead_at, 0.0), 0.0, []
    while now < 60.0:
        lead, share = kept.due(now)
        if lead or share:
            passes.append((lead, share))
            kept.done(lead, share, now)
        now = min(kept._lead_at, kept._share_at)  # noqa: SLF001
    assert passes[1:] == [(True, True)] * (len(passes) - 1)
    assert len(passes) in (12, 13)  # as many as each alone, every 5 s


# --- On PostgreSQL -------------------------------------------------------------------------


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    made = make_engine(postgres_url)
    yield made
    made.dispose()


@pytest.fixture
def admin(postgres_url: str) -> Iterator[Engine]:
    made = make_engine(postgres_url, poolclass=pool.NullPool, isolation_level="AUTOCOMMIT")
    wait_until_free(made)
    yield made
    made.dispose()


def kept_by(engine: Engine, name: str) -> Standing:
    leadership = Leadership(engine)
    lease = Replicas(make_sessions(engine), True, 15.0, name, leading=lambda: leadership.leading)
    return Standing(leadership, lease, 5.0)


def expires(engine: Engine, name: str) -> Any:
    with make_sessions(engine)() as session:
        return session.scalar(select(ReplicaRow.expires_at).where(ReplicaRow.id == name))


def statements(engine: Engine) -> list[str]:
    sent: list[str] = []
    event.listen(engine, "before_cursor_execute", lambda *args: sent.append(str(args[2])))
    return sent


@pytest.mark.postgres
def test_a_leaders_pass_is_one_statement_its_renewal_on_the_locks_connection(
    engine: Engine, admin: Engine
) -> None:
    kept = kept_by(engine, "a")
    try:
        assert kept.keep(True, True) is True  # took the lead, then joined
        holder, before = lock_holder(admin), expires(engine, "a")
        sent = statements(engine)
        assert kept.keep(True, True) is True
        assert len(sent) == 1 and "UPDATE replicas" in sent[0], sent  # no SELECT 1
        assert lock_holder(admin) == holder and expires(engine, "a") > before
    finally:
        kept.leadership.release()


@pytest.mark.postgres
def test_a_killed_lock_connection_is_found_the_lock_taken_again_and_the_lease_renewed(
    engine: Engine, admin: Engine
) -> None:
    kept = kept_by(engine, "a")
    try:
        assert kept.keep(True, True) is True
        killed, before = lock_holder(admin), expires(engine, "a")
        assert killed is not None
        terminate(admin, killed)
        assert kept.keep(True, True) is True
        assert lock_holder(admin) not in (None, killed)
        assert expires(engine, "a") > before and kept.replicas.problem is None
    finally:
        kept.leadership.release()


@pytest.mark.postgres
def test_a_renewal_failing_on_the_locks_connection_loses_no_lead(
    engine: Engine, admin: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = kept_by(engine, "a")
    try:
        assert kept.keep(True, True) is True
        holder = lock_holder(admin)

        def missing(connection: Connection, *_args: object) -> None:
            connection.exec_driver_sql("SELECT expires_at FROM no_such_table")  # refused

        def refused(*_args: object) -> None:
            raise DBAPIError("renew", {}, Exception("relation replicas does not exist"))

        monkeypatch.setattr(replicarows, "renew_held", missing)
        monkeypatch.setattr(replicarows, "renew", refused)
        assert kept.keep(True, True) is True  # SELECT 1: the connection lives
        assert lock_holder(admin) == holder
        assert kept.replicas.problem is not None  # the renewal's failure, told as alone
    finally:
        kept.leadership.release()


@pytest.mark.postgres
def test_a_followers_pass_tries_the_lock_and_renews_on_a_pooled_connection(
    engine: Engine, admin: Engine
) -> None:
    leader, follower = kept_by(engine, "a"), kept_by(engine, "b")
    try:
        assert leader.keep(True, True) is True
        assert follower.keep(True, True) is False
        before = expires(engine, "b")
        assert follower.keep(True, True) is False
        assert expires(engine, "b") > before
        leader.leadership.release()
        assert follower.keep(True, True) is True  # the freed lock taken at its next pass
    finally:
        leader.leadership.release()
        follower.leadership.release()
