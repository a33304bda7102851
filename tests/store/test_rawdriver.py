"""Statements run on the driver's own cursor: a batch's errors come back as SQLAlchemy's,
and a connection lost in one is invalidated, as SQLAlchemy's own execution does."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, bindparam, literal_column, select, text
from sqlalchemy.exc import DBAPIError

from app.store.rawdriver import first_rows

ECHO = select(literal_column("1").label("one"), bindparam("x", type_=None))


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_batch_gives_each_statements_first_row_in_order(engine: Engine) -> None:
    with engine.connect() as connection:
        rows = first_rows(connection, ECHO, [{"x": "a"}, {"x": "b"}, {"x": "c"}])
    assert [row[1] if row else None for row in rows] == ["a", "b", "c"]


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_a_connection_lost_in_a_batch_is_invalidated_and_the_pool_replaces_it(
    engine: Engine,
) -> None:
    with engine.connect() as connection:
        pid = connection.execute(text("SELECT pg_backend_pid()")).scalar()
        connection.commit()
        with engine.connect() as other:
            assert other.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
        with pytest.raises(DBAPIError) as raised:
            first_rows(connection, ECHO, [{"x": "a"}, {"x": "b"}])
        assert raised.value.connection_invalidated
        assert connection.invalidated  # not handed out again by the pool
    with engine.connect() as again:
        assert again.execute(text("SELECT pg_backend_pid()")).scalar() != pid
