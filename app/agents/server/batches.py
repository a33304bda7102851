"""Storing a batch of runs an agent pushed, through the service's ``DatabaseSink``: in one
transaction while every run in it can be stored (one commit for the lot), run by run when
one cannot, so a bad run does not refuse its batch mates (``DatabaseSink.store_batch``, the
same road a flush of ``serve``'s own spool takes)."""

from __future__ import annotations

from collections.abc import Sequence

from app.runs.dbsink import DatabaseSink
from app.runs.pipeline import Pipeline
from app.runs.sink import Stored
from app.store.records import RunRecord

__all__ = ["Stored", "store_batch"]


def store_batch(sink: DatabaseSink | Pipeline, records: Sequence[RunRecord]) -> list[Stored]:
    """Each run's outcome, in order: True stored now, False stored already (a replay), a
    text why the database never can. The database away raises ``SinkAway``: nothing is
    answered then, and every run is pushed again (a no-op for those stored).

    ``sink`` is ``Service.sink``; a ``Pipeline`` (its database sink) is taken only until
    app/web/api/agentpush.py, restructured on another branch, passes that.
    """
    database = sink.database if isinstance(sink, Pipeline) else sink
    return database.store_batch(records)
