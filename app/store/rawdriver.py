"""The raw-driver path: statements compiled once and run on the driver's own cursor, for the
few writes and reads where SQLAlchemy's per-execution work would be most of the cost."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import ClauseElement, Connection, CursorResult, Dialect
from sqlalchemy.exc import DBAPIError, StatementError


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A statement compiled for one dialect, to run on the driver's own cursor.

    Its parameters go through their SQLAlchemy types' bind processing (aware UTC times,
    JSON through the engine's serializer), as SQLAlchemy would apply it.
    """

    sql: str
    processors: tuple[tuple[str, Callable[[Any], Any] | None], ...]
    positions: tuple[str, ...] | None  # qmark drivers (SQLite): the names in order
    defaults: dict[str, Any]
    json_serializer: Callable[[Any], Any]  # the engine's, which its JSON columns use

    @classmethod
    def compile(cls, statement: Any, dialect: Dialect) -> DriverStatement:
        compiled = statement.compile(dialect=dialect)
        processors = tuple(
            (name, bind.type.dialect_impl(dialect).bind_processor(dialect))
            for bind, name in compiled.bind_names.items()
        )
        positions = tuple(compiled.positiontup) if compiled.positiontup else None
        dumps = getattr(dialect, "_json_serializer", None) or json.dumps
        return cls(compiled.string, processors, positions, dict(compiled.params), dumps)

    def bind(self, params: dict[str, Any] | None = None) -> Any:
        """The driver's parameters; a value its type refuses raises ``StatementError``, as
        SQLAlchemy's own execution would."""
        given = self.defaults if params is None else params
        try:
            values = {
                name: given[name] if process is None else process(given[name])
                for name, process in self.processors
            }
        except (TypeError, ValueError) as exc:
            raise StatementError(str(exc), self.sql, None, exc) from exc
        return values if self.positions is None else tuple(values[n] for n in self.positions)


# Statements run often, compiled once per engine's dialect (its JSON serializer is part
# of the bind processing); gone with the engine.
_driver_statements: WeakKeyDictionary[Dialect, dict[ClauseElement, DriverStatement]] = (
    WeakKeyDictionary()
)


def driver_statement(dialect: Dialect, statement: ClauseElement) -> DriverStatement:
    compiled = _driver_statements.setdefault(dialect, {})
    found = compiled.get(statement)
    if found is None:
        found = compiled[statement] = DriverStatement.compile(statement, dialect)
    return found


def run_driver(
    connection: Connection, statement: ClauseElement, params: dict[str, Any] | None = None
) -> CursorResult[*tuple[Any, ...]]:
    """``statement`` compiled once per dialect (``driver_statement``) and run as driver SQL
    with ``params`` bound as its types bind them."""
    compiled = driver_statement(connection.dialect, statement)
    return connection.exec_driver_sql(compiled.sql, compiled.bind(params))


def first_rows(
    connection: Connection, statement: ClauseElement, params: Sequence[dict[str, Any]]
) -> list[tuple[Any, ...] | None]:
    """``statement`` once for each of ``params``, in order, in one round trip (psycopg's
    ``executemany`` in a pipeline: one sync for the lot, where ``run_driver`` a statement
    waits for each), and the first row each gave; PostgreSQL only. The driver's errors are
    raised as SQLAlchemy's, as ``run_driver`` raises them."""
    compiled = driver_statement(connection.dialect, statement)
    bound = [compiled.bind(p) for p in params]
    driver = connection.connection.driver_connection
    assert driver is not None  # a connection checked out of the pool has one
    dialect = connection.dialect
    failed: StatementError | None = None
    rows: list[tuple[Any, ...] | None] = []
    with driver.cursor() as cursor:
        try:
            cursor.executemany(compiled.sql, bound, returning=True)
            rows = [cursor.fetchone()]
            while cursor.nextset():
                rows.append(cursor.fetchone())
        except dialect.loaded_dbapi.Error as exc:
            gone = dialect.is_disconnect(exc, driver, cursor)
            failed = DBAPIError.instance(
                compiled.sql, None, exc, dialect.loaded_dbapi.Error, False, gone, dialect
            )
    if failed is not None:
        if isinstance(failed, DBAPIError) and failed.connection_invalidated:
            # As SQLAlchemy's own execution does on a lost connection: the pool then
            # replaces it instead of handing the dead one out again.
            connection.invalidate(failed)
        raise failed from failed.orig
    return rows


def tuples(connection: Connection, query: ClauseElement) -> list[tuple[Any, ...]]:
    """The rows as plain tuples, straight from the driver's cursor.

    For 17,000 rows SQLAlchemy's row objects cost a fifth of the read, and psycopg's text
    format (its default, and SQLAlchemy's) a third more than binary, where numbers are not
    parsed from strings.
    """
    statement = DriverStatement.compile(query, connection.dialect)
    driver = connection.connection.driver_connection
    assert driver is not None  # a connection checked out of the pool has one
    if connection.dialect.name == "postgresql":
        with driver.cursor(binary=True) as cursor:
            cursor.execute(statement.sql, statement.bind())
            return list(cursor.fetchall())
    return list(driver.execute(statement.sql, statement.bind()).fetchall())
