"""The raw-driver floor of ``store_run``: what it hands the driver, replayed on the driver's
own connection (``bench.store_ingest`` measures the two in turns)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Engine, event

from app.store.ingest import store_run_on
from app.store.records import RunRecord

# One statement as the driver received it: SQL, parameters, executemany or not.
DriverCall = tuple[str, Any, bool]


def captured(engine: Engine, runs: list[RunRecord]) -> list[list[DriverCall]]:
    """What ``store_run_on`` (``Pipeline.store``'s) hands the driver for each run,
    parameters already processed (JSON serialised, times converted): stored in a
    transaction that is rolled back."""
    calls: list[list[DriverCall]] = []

    def record(_conn: Any, _cursor: Any, sql: str, params: Any, _ctx: Any, many: bool) -> None:
        calls[-1].append((sql, params, many))

    with engine.connect() as connection:
        transaction = connection.begin()
        event.listen(connection, "before_cursor_execute", record)
        for run in runs:
            calls.append([])
            store_run_on(connection, run, datetime.now(UTC))
        event.remove(connection, "before_cursor_execute", record)
        transaction.rollback()
    return calls


def replay(engine: Engine, calls: list[list[DriverCall]], budget_s: float) -> list[float]:
    """The same statements on the driver's own connection, a run per transaction, as fast
    as the driver and the database take them: the floor ``store_run`` is compared with."""
    raw = engine.raw_connection()
    driver: Any = raw.driver_connection
    deadline = time.perf_counter() + budget_s
    latencies: list[float] = []
    try:
        for run in calls:
            before = time.perf_counter()
            cursor = driver.cursor()
            for sql, params, many in run:
                if many:
                    cursor.executemany(sql, params)
                else:
                    cursor.execute(sql, params)
                    if cursor.description is not None:
                        cursor.fetchall()
            cursor.close()
            driver.commit()
            latencies.append(time.perf_counter() - before)
            if before > deadline:
                break
    finally:
        raw.close()
    return latencies
