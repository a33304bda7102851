"""Stopping's pool: no connection left open behind the service, even one that comes back late."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from app.runtime.stopping import close_pool


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_connection_back_after_the_pool_closed_is_closed_not_left_open(engine: Engine) -> None:
    """A push thread still storing when stopping disposes of the pool (its 0.2 s wait gone
    on a busy machine) returns its connection to a pool nobody uses: left open there, the
    garbage collector found it later, in another test, as a ResourceWarning."""
    late = engine.connect()
    late.execute(text("SELECT 1"))
    raw = late.connection.dbapi_connection
    assert raw is not None
    close_pool(engine, wait_s=0.0)
    assert not raw.closed  # still out: its statement may still be running
    late.close()
    # Closed as it came back: the garbage collector has nothing to warn of when it finds it.
    # (No gc.collect() here: a forced collection judges every test's garbage at once, and
    # failed this test for a connection another test had left.)
    assert raw.closed
    with engine.connect() as again:  # the engine's new pool serves as before
        assert again.execute(text("SELECT 1")).scalar() == 1


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_connection_taken_after_the_pool_closed_is_closed_as_it_comes_back(
    engine: Engine,
) -> None:
    """A thread stopping left behind (a loop's step cancelled mid-way, a ping past its
    budget) that takes another connection once the pool is closed gets it from the engine's
    new pool, which nobody disposes of again: kept open there, the garbage collector found
    it later, in another test, as a ResourceWarning."""
    close_pool(engine, wait_s=0.0)
    with engine.connect() as late:
        raw = late.connection.dbapi_connection
        assert raw is not None and late.execute(text("SELECT 1")).scalar() == 1
    assert raw.closed
