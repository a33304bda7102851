"""What /healthz says: asked fresh with a short budget, never waiting on the database.

The database ping and the spool count run on threads of their own (``app.runs.threads.Check``):
/healthz waits for them at most ``ASK_BUDGET_S`` and otherwise says so ("no answer"); a
ping that hangs (a frozen database) is not started again while it hangs. Whether the spool
can be written is checked every few seconds by the service's health loop, and by every
write. The store stage says how long it has waited, and its sink why its last store failed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, text

from app.export.exporter import RunExporter
from app.runs.threads import Check
from app.runs.writer import Writer
from app.runtime.coverage import Coverage
from app.store.db import describe

ASK_BUDGET_S = 0.5
STUCK_S = 2.0  # a store waiting longer than this is reported
REACHABLE, UNREACHABLE, TIMEOUT = "reachable", "unreachable", "timeout"
NO_SCHEMA = "waiting for the schema"


@dataclass
class Health:
    engine: Engine
    writer: Writer  # the store stage: its sink, its spool
    # Set by the service while the database answers but lacks the schema this code needs.
    schema_problem: str | None = None
    database: str = REACHABLE
    database_problem: str | None = None
    spooled_runs: int = 0
    # Targets the file asks for that nobody probes, and a refused reload (never silent).
    coverage: Coverage | None = None
    exporter: RunExporter | None = None  # OpenTelemetry's: a collector that fails says so
    _ping: Check[None] = field(init=False)
    _count: Check[int] = field(init=False)

    def __post_init__(self) -> None:
        self._ping = Check(self._select_one, "healthz-ping")
        self._count = Check(self.writer.spool.pending, "healthz-spool")

    async def refresh(self) -> None:
        await asyncio.gather(self._ask_database(), self._count_spool())

    def check_spool(self) -> None:
        """Blocking (a small write and fsync): for the health loop's thread."""
        self.writer.spool.check()

    def report(self) -> dict[str, Any]:
        problems = self.problems()
        database = self.database
        if database == REACHABLE and self.schema_problem is not None:
            database = NO_SCHEMA
        spool_problem = self.writer.spool.problem
        return {
            "status": "degraded" if problems else "ok",
            "database": database,
            "spool": "ok" if spool_problem is None else spool_problem.split(":")[0],
            "spooled_runs": self.spooled_runs,
            "problems": problems,
        }

    def problems(self) -> list[str]:
        found = []
        if self.database_problem is not None:
            found.append(f"database {self.database}: {self.database_problem}")
        if self.schema_problem is not None:
            found.append(f"database: {self.schema_problem}")
        waited = self.writer.waiting_s
        if waited > STUCK_S:
            found.append(f"store: waiting {waited:.0f} s for the database")
        if self.writer.sink.problem is not None:
            found.append(f"store: last attempt failed: {self.writer.sink.problem}")
        if self.writer.spool.problem is not None:
            found.append(f"spool {self.writer.spool.problem}")
        if self.coverage is not None:
            found.extend(self.coverage.problems())
        if self.exporter is not None:
            found.extend(self.exporter.problems())
        return found

    async def _ask_database(self) -> None:
        try:
            await self._ping.ask(ASK_BUDGET_S)
        except TimeoutError:
            waited = self._ping.waiting_s
            self.database = TIMEOUT
            self.database_problem = f"no answer for {waited:.1f} s"
        except Exception as exc:
            self.database, self.database_problem = UNREACHABLE, describe(exc)
        else:
            self.database, self.database_problem = REACHABLE, None

    async def _count_spool(self) -> None:
        try:
            self.spooled_runs = await self._count.ask(ASK_BUDGET_S)
        except (TimeoutError, OSError):
            pass  # the last count stands; a spool that cannot be read is a problem of its own

    def _select_one(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
