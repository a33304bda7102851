"""The server as a ``Sink``: ``phasewatch agent``'s runs are pushed where ``serve`` stores.

Runs waiting together (a spool to flush after an outage, or runs finishing together while
one is pushed) go in batches; a server without batches (404, 405 there) gets them one by
one from then on. The client's failures are already the sink's (``SinkAway``,
``SinkRefused``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from app.agents.remote.client import ServerClient
from app.runs.sink import LastAttempt, SinkRefused, Stored, answer
from app.store.records import RunRecord

log = logging.getLogger(__name__)

NO_BATCHES = ("404", "405")  # the statuses of a server from before batches


class PushSink:
    def __init__(self, client: ServerClient) -> None:
        self.name = f"server {client.server}"
        self.client = client
        self.batching = True  # until the server says it has no batches
        self._last = LastAttempt()

    @property
    def problem(self) -> str | None:
        return self._last.problem

    @property
    def batches(self) -> bool:
        return self.batching

    def store(self, record: RunRecord) -> bool:
        return self._last(lambda: self.client.push(record))

    def store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        if self.batching:
            try:
                return self._last(lambda: self.client.push_batch(records))
            except SinkRefused as exc:
                # A server that predates batches, or a batch it will not take whole.
                self.batching = not str(exc).startswith(NO_BATCHES)
                log.warning("batch of %d refused (%s); pushed one by one", len(records), exc)
        return [answer(self.store, record) for record in records]
