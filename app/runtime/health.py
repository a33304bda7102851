"""What /healthz says: asked fresh with a short budget, never waiting on the database.

The database ping and the spool count run on threads of their own (``app.runs.threads.Check``):
/healthz waits for them at most ``ASK_BUDGET_S`` and otherwise says so ("no answer"); a
ping that hangs (a frozen database) is not started again while it hangs. Whether the spool
can be written is checked every few seconds by the service's health loop, and by every
write. The store stage says how long it has waited, and its sink why its last store failed.

The same ping bounds the web's reads (``require_database``, ``database_answers``): a read
on a database that does not answer is told so within ``READ_BUDGET_S`` (a 503), instead
of waiting on a connection that never answers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Engine, text

from app.export.exporter import RunExporter
from app.replicas.membership import Replicas
from app.runs.threads import Check
from app.runs.writer import Writer
from app.runtime.coverage import Coverage
from app.runtime.skips import Skips
from app.store.db import describe
from app.store.quarantine import Quarantine

ASK_BUDGET_S = 0.5
STUCK_S = 2.0  # a store waiting longer than this is reported
REACHABLE, UNREACHABLE, TIMEOUT = "reachable", "unreachable", "timeout"
NO_SCHEMA = "waiting for the schema"
WAITING_FOR_ELECTION = "waiting for the database to share the targets out"
READ_BUDGET_S = 2.0  # a read waits at most this for the database to show that it answers
FRESH_S = 1.0  # a ping that answered this recently stands for the database answering


class DatabaseAway(Exception):
    """The database does not answer now (stopped, unreachable, frozen); the message says how."""


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
    # What the background loops set aside (a run the rollups cannot add, ...).
    quarantine: Quarantine | None = None
    # What this replica probes: on PostgreSQL, nothing until it has read the leases.
    replicas: Replicas | None = None
    exporter: RunExporter | None = None  # OpenTelemetry's: a collector that fails says so
    skips: Skips | None = None  # the scheduler's: a target skipped slot after slot says so
    _ping: Check[None] = field(init=False)
    _count: Check[int] = field(init=False)
    _answered_at: float = field(init=False, default=-FRESH_S)

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
        found.extend(self._replica_problems())
        if self.writer.spool.losses.ongoing is not None:
            found.append(self.writer.spool.losses.ongoing)
        if self.coverage is not None:
            found.extend(self.coverage.problems())
        if self.quarantine is not None:
            found.extend(self.quarantine.problems())
        if self.exporter is not None:
            found.extend(self.exporter.problems())
        if self.skips is not None:
            found.extend(self.skips.problems())
        return found

    def _replica_problems(self) -> list[str]:
        if self.replicas is None:
            return []
        if self.replicas.waiting:
            return [f"replicas: {WAITING_FOR_ELECTION}; probing nothing meanwhile"]
        stale = self.replicas.stale_s()
        if stale is None:
            return []
        why = f" ({self.replicas.problem})" if self.replicas.problem else ""
        return [
            f"replicas: leases not read for {stale:.0f} s{why}; this replica keeps its"
            " share as last seen and takes over nobody's"
        ]

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

    def require_database(self) -> None:
        """Blocking (a worker thread's): return once the database answers, or raise
        ``DatabaseAway`` within ``READ_BUDGET_S`` (at once if a ping hangs that long)."""
        if time.monotonic() - self._answered_at < FRESH_S:
            return
        try:
            self._ping.wait(max(0.0, READ_BUDGET_S - self._ping.waiting_s))
        except TimeoutError:
            raise DatabaseAway(self._no_answer()) from None
        except Exception as exc:
            raise DatabaseAway(f"the database is unreachable: {describe(exc)}") from exc

    async def database_answers(self, budget_s: float) -> str | None:
        """None if the database answers within ``budget_s``, else why not (a sentence)."""
        try:
            await self._ping.ask(budget_s)
        except TimeoutError:
            return self._no_answer()
        except Exception as exc:
            return f"the database is unreachable: {describe(exc)}"
        return None

    def _no_answer(self) -> str:
        return f"the database has not answered for {self._ping.waiting_s:.1f} s"

    def _select_one(self) -> None:
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        self._answered_at = time.monotonic()
