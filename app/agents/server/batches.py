"""Storing a batch of runs an agent pushed: in one transaction while every run in it can be
stored (one commit for the lot), run by run when one cannot, so a bad run does not refuse
its batch mates."""

from __future__ import annotations

from collections.abc import Sequence

from app.runs.pipeline import Pipeline, describe
from app.store.db import write_transaction
from app.store.ingest import store_run
from app.store.records import RunRecord

# A run's outcome: True stored now, False stored already (a replay), a text why it never
# can be (the database refused it).
Stored = bool | str


def store_batch(pipeline: Pipeline, records: Sequence[RunRecord]) -> list[Stored]:
    """Each run's outcome, in order. The database away (``pipeline.transient``) raises:
    nothing is answered then, and every run is pushed again (a no-op for those stored)."""
    try:
        with write_transaction(pipeline.sessions) as session:
            now = pipeline.clock()
            stored: list[Stored] = [store_run(session, record, now) for record in records]
    except Exception as exc:
        if pipeline.transient(exc):
            pipeline.store_problem = describe(exc)
            raise
        if len(records) == 1:
            return [_refused(exc)]
        return [_alone(pipeline, record) for record in records]
    pipeline.store_problem = None
    return stored


def _alone(pipeline: Pipeline, record: RunRecord) -> Stored:
    try:
        return pipeline.store(record)
    except Exception as exc:
        if pipeline.transient(exc):
            raise
        return _refused(exc)


def _refused(exc: Exception) -> str:
    return f"the database refused it: {type(exc).__name__}"
