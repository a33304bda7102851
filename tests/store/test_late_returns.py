"""A connection returned to a pool its engine has disposed of is closed as it comes back,
not left open in the old pool until the garbage collector frees that pool some time later
(in the tests: a ResourceWarning in whichever test's collection finds it)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import Engine, text


def is_open(dbapi_connection: Any) -> bool:
    if isinstance(dbapi_connection, sqlite3.Connection):
        try:
            dbapi_connection.execute("SELECT 1")
        except sqlite3.ProgrammingError:  # "Cannot operate on a closed database."
            return False
        return True
    return not dbapi_connection.closed


@pytest.mark.parametrize("disposals", [1, 2])
def test_a_connection_out_while_its_pool_is_disposed_of_is_closed_on_return(
    engine: Engine, disposals: int
) -> None:
    for _ in range(disposals - 1):  # the engine's later pools too
        with engine.connect() as earlier:
            earlier.execute(text("SELECT 1"))
        engine.dispose()
    late = engine.connect()
    late.execute(text("SELECT 1"))
    raw = late.connection.dbapi_connection
    engine.dispose()
    assert is_open(raw)  # still out: its holder may finish its statement
    late.close()
    assert not is_open(raw)


def test_a_connection_returned_to_the_engines_pool_stays_pooled_and_open(engine: Engine) -> None:
    engine.dispose()  # the new pool is the engine's: its returns are kept
    with engine.connect() as connection:
        connection.execute(text("SELECT 1"))
        raw = connection.connection.dbapi_connection
    assert is_open(raw)
    with engine.connect() as again:
        assert again.connection.dbapi_connection is raw
