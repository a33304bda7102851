"""The database as a ``Sink`` (``serve``'s, and the server's for the runs agents push).

The SQL stays in ``app.store`` (``store_run_on``, ``store_run``); this module only says
what the database's errors mean in the sink's vocabulary: a connection that failed or was
lost (``is_transient``) is ``SinkAway``, any other error ``SinkRefused``. Before any SQL,
each run passes the door (``app.runs.validate``): a run it refuses is ``SinkRefused`` with
its reason (a spooled one is set aside, a pushed one answered 422 or ``refused``), counted
through ``refused`` and never stored. A run whose slot another run holds is answered False,
as a replay is, and counted in ``taken`` (``app.runs.slots.TakenSlots``). Each run stored
is handed to ``stored`` once committed (``serve``: the evaluator's history keeps it), and
each run about to be written to ``writing`` first: another thread that finds the run the
moment it commits (the rollups' catch-up) then finds it in hand too. A run handed to
``writing`` may still fail to be stored; its follower holds it until newer ones push it out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime

from sqlalchemy import Engine

from app.clock import utcnow
from app.runs.sink import LastAttempt, SinkAway, SinkError, SinkRefused, Stored, answer
from app.runs.slots import TakenSlots
from app.runs.validate import Counted, Door
from app.store.db import Sessions, autocommit, describe, is_transient, write_connection
from app.store.ingest import Ingested, ingest_many_on, ingest_run_on, store_alone_on
from app.store.records import RunRecord

log = logging.getLogger(__name__)


class DatabaseSink:
    batches = False  # a run stored alone costs one commit, not a request

    def __init__(
        self,
        sessions: Sessions,
        clock: Callable[[], datetime] = utcnow,
        refused: Counted | None = None,
        stored: Callable[[RunRecord], None] | None = None,
        writing: Callable[[RunRecord], None] | None = None,
    ) -> None:
        self.name = "the database"
        self.sessions = sessions
        self.engine: Engine = sessions.kw["bind"]
        self.clock = clock
        self.door = Door(clock, refused)
        self.taken = TakenSlots()
        self.stored = stored
        self.writing = writing
        self._last = LastAttempt()

    @property
    def problem(self) -> str | None:
        return self._last.problem

    def store(self, record: RunRecord) -> bool:
        refusal = self.door.refusal(record)
        if refusal is not None:
            raise SinkRefused(refusal)
        return self._last(lambda: self._store(record))

    def store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        """One transaction (one commit) for the lot while every run in it can be stored;
        run by run when one cannot, so a bad run does not refuse its batch mates (one the
        door refuses never reaches the database)."""
        refusals = [self.door.refusal(record) for record in records]
        passed = [record for record, refusal in zip(records, refusals, strict=True) if not refusal]
        stored = iter(self._last(lambda: self._store_batch(passed)))
        return [next(stored) if refusal is None else refusal for refusal in refusals]

    def _store(self, record: RunRecord) -> bool:
        self._hand_over([record])
        with translated():
            ingested = self._alone(record)
            if ingested is None:
                with write_connection(self.sessions) as connection:
                    ingested = ingest_run_on(connection, record, self.clock())
        return self._answer(record, ingested)  # counted once committed

    def _alone(self, record: RunRecord) -> Ingested | None:
        """On PostgreSQL a run goes in by one statement, in autocommit: spared a BEGIN and
        a COMMIT round trip. None when it did not go in so (nothing written): a target seen
        for the first time, a replay or a taken slot go the transaction's way."""
        if self.engine.dialect.name != "postgresql":
            return None
        with autocommit(self.engine) as connection:
            return Ingested.STORED if store_alone_on(connection, record) else None

    def _store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        if not records:
            return []
        self._hand_over(records)
        try:
            # A Core connection, as ``_store``'s: an agent's single push comes this way, and
            # a Session's own work was a large share of storing it.
            with translated(), write_connection(self.sessions) as connection:
                ingested = ingest_many_on(connection, records, self.clock())
        except SinkRefused as exc:
            if len(records) == 1:
                return [str(exc)]
            return [answer(self._store, record) for record in records]
        return [self._answer(r, i) for r, i in zip(records, ingested, strict=True)]

    def _hand_over(self, records: Sequence[RunRecord]) -> None:
        if self.writing is None:
            return
        for record in records:
            try:
                self.writing(record)
            except Exception:  # any: storing the run matters more than its follower
                log.exception("run %s of %s: not kept in hand", record.id, record.target)

    def _answer(self, record: RunRecord, ingested: Ingested) -> bool:
        if ingested is Ingested.SLOT_TAKEN and record.slot is not None:
            self.taken.taken(record.target, record.vantage, record.slot)
        if ingested is not Ingested.STORED:
            return False
        if self.stored is not None:
            try:
                self.stored(record)
            except Exception:  # any: the run is stored whatever its follower makes of it
                log.exception(
                    "run %s of %s: stored, not kept for evaluation", record.id, record.target
                )
        return True


@contextmanager
def translated() -> Iterator[None]:
    """The database's errors as the sink's (the original kept as the cause, for the log)."""
    try:
        yield
    except SinkError:
        raise
    except Exception as exc:
        if is_transient(exc):
            raise SinkAway(describe(exc)) from exc
        raise SinkRefused(f"the database refused it: {type(exc).__name__}") from exc
