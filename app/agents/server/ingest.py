"""A push taken in: its body read as one run or a batch, each run checked against the
agent's assignment (``PushCheck``), stored, and passed on (``after``: to evaluation).

A push is one ``RunRecord`` JSON; a batch is ``{"runs": [...]}``, at most
``MAX_BATCH_RUNS``, answered run by run (stored / duplicate / refused with its reason), so
one bad run does not refuse its batch mates: a single push is refused whole instead (403,
422). A run that fails the door's check (``app.runs.validate``, run by the sink) is refused
with the field and why: 422 alone, ``refused`` in a batch. Ingestion is idempotent by run
id and by slot: a run of a slot another run holds is answered as a duplicate. While the
database is away the whole push is refused for now (``StoreAway``): the agent keeps every
run and pushes it again.

Called on a worker thread: decompressing, parsing and storing are all here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from app.agents.server.access import PushCheck
from app.agents.server.body import json_of
from app.agents.server.refusals import NotYours, StoreAway, TooLarge, Unreadable
from app.agents.wire import MAX_BATCH_RUNS, PushOutcome, RunOutcome
from app.runs.dbsink import DatabaseSink
from app.runs.sink import SinkAway, Stored, answer
from app.store.records import RunRecord

After = Callable[[RunRecord], None]


@dataclass(frozen=True)
class Database:
    """Where pushed runs go: the service's own sink, once ``ready`` says the schema is
    there. A batch by ``DatabaseSink.store_batch`` (the road a flush of ``serve``'s spool
    takes: one transaction for the lot while every run can be stored, run by run when one
    cannot); a single push by ``DatabaseSink.store``, as ``serve`` stores a run it probed."""

    sink: DatabaseSink
    ready: threading.Event


def store_one(
    database: Database, check: PushCheck, after: After, data: bytes, gzipped: bool
) -> bool:
    """True: stored now; False: stored already, or its slot was (a duplicate stores nothing)."""
    record = _run_of(json_of(data, gzipped))
    refusal = check.refusal(record)
    if refusal is not None:
        raise NotYours(refusal)
    stored = _store_alone(database, record)
    if isinstance(stored, str):
        raise Unreadable(stored)
    if stored:
        after(record)
    return stored


def store_many(
    database: Database, check: PushCheck, after: After, data: bytes, gzipped: bool
) -> list[RunOutcome]:
    """Each item's outcome, in order; those refused before the database are not stored."""
    checked: list[tuple[RunRecord | Any, str | None]] = []
    for item in _runs_of(json_of(data, gzipped)):
        try:
            record = _run_of(item)
        except Unreadable as exc:
            checked.append((item, str(exc)))
        else:
            checked.append((record, check.refusal(record)))
    stored = iter(_store(database, [item for item, refusal in checked if refusal is None]))
    taken = [(item, next(stored) if refusal is None else refusal) for item, refusal in checked]
    for item, outcome in taken:
        if outcome is True:
            after(item)
    return [_outcome(item, outcome) for item, outcome in taken]


def _runs_of(body: Any) -> list[Any]:
    runs = body.get("runs") if isinstance(body, dict) else None
    if not isinstance(runs, list):
        raise Unreadable('the body is not a batch: {"runs": [...]}')
    if len(runs) > MAX_BATCH_RUNS:
        raise TooLarge(f"at most {MAX_BATCH_RUNS} runs in a batch, not {len(runs)}")
    return runs


def _run_of(data: Any) -> RunRecord:
    try:
        if not isinstance(data, dict):
            raise TypeError("not an object")
        return RunRecord.from_json(data)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Unreadable(f"the body is not a run: {type(exc).__name__}") from exc


def _store(database: Database, records: list[RunRecord]) -> list[Stored]:
    if not records:
        return []
    with _reachable(database):
        return database.sink.store_batch(records)


def _store_alone(database: Database, record: RunRecord) -> Stored:
    """One run by the sink's ``store``: on PostgreSQL one statement in autocommit (no BEGIN
    and COMMIT round trips), the transaction's way only when that statement wrote nothing
    (a replay, a taken slot, a new target) and it must say why."""
    with _reachable(database):
        return answer(database.sink.store, record)


@contextmanager
def _reachable(database: Database) -> Iterator[None]:
    if not database.ready.is_set():
        raise StoreAway("the database has no schema yet")
    try:
        yield
    except SinkAway as exc:
        raise StoreAway("the database is unreachable") from exc


def _outcome(item: RunRecord | Any, stored: Stored) -> RunOutcome:
    if isinstance(item, RunRecord):
        run_id: str | None = str(item.id)
    else:
        found = item.get("id") if isinstance(item, dict) else None
        run_id = found if isinstance(found, str) else None
    if isinstance(stored, str):
        return RunOutcome(id=run_id, outcome=PushOutcome.REFUSED, reason=stored)
    return RunOutcome(id=run_id, outcome=PushOutcome.STORED if stored else PushOutcome.DUPLICATE)
