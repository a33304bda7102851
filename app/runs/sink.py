"""Where a finished run goes: the ``Sink`` seam (the database in ``serve``, a push to the
server in ``phasewatch agent``, memory in tests).

The contract, held by ``tests/runs/test_sink_contract.py`` for every sink:

- **Idempotent by run id.** ``store`` answers True when the sink stored the run now, False
  when it had it already: a run stored twice (a flush redone after a crash, a push whose
  answer was lost) is stored once.
- **One run a slot.** A run with a ``slot`` (``app.runs.slots``) whose (target, vantage,
  slot) another run already holds is not stored either, and answered False, as a replay is
  (two replicas that probed one scheduled run: the first kept, the second dropped from
  its spool, never set aside). A run without a slot is idempotent by run id only.
- **Order.** Runs reach the sink in the order they are given, one call at a time (the
  writer's thread); the spool keeps the order of the runs that wait, so none jumps the queue.
- **The batch form** (``store_batch``) is answered run by run, in order: True stored now,
  False had it already, a text why it refused that run for good. One refused run never
  refuses its batch mates. An answer shorter than the batch means the rest were not taken
  (yet): they wait and come again.
- **One vocabulary for failure**, whatever the sink's own errors are::

      SinkError
       ├── SinkAway      away for now (database down, server unreachable, 5xx, 429):
       │                 nothing of this call counts as stored; the run waits in the spool
       │                 and is tried again, in order
       └── SinkRefused   refused for good (a run the database cannot take, 403, 422): the
                         run is set aside in ``rejected.jsonl``, kept, never retried

  A batch that meets ``SinkAway`` raises it: none of its runs counts as answered (those
  stored meanwhile are a no-op the next time).
- ``problem`` says why the last attempt failed while the sink is away (health's "store:
  last attempt failed: …"); None once one succeeds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from app.store.records import RunRecord

# One run's answer in a batch: True stored now, False had it (or its slot) already, a text
# why never.
Stored = bool | str
T = TypeVar("T")


class SinkError(Exception):
    """A run did not reach the sink; the subclass says whether it ever will."""


class SinkAway(SinkError):
    """Away for now: the run waits in the spool and is tried again."""


class SinkRefused(SinkError):
    """Refused for good (the message says why): the run is set aside, kept, not retried."""


class Sink(Protocol):
    @property
    def name(self) -> str:
        """What the sink is, for a person reading the log: "the database", "server <url>"."""
        ...

    @property
    def problem(self) -> str | None:
        """Why the last attempt failed while away; None once one succeeded."""
        ...

    @property
    def batches(self) -> bool:
        """True when runs waiting together are better sent as one batch (one request for
        many): the writer then spools a run that has others queued behind it."""
        ...

    def store(self, record: RunRecord) -> bool:
        """True: stored now; False: had it (or its slot) already. Raises SinkAway or
        SinkRefused."""
        ...

    def store_batch(self, records: Sequence[RunRecord]) -> list[Stored]:
        """Each run's answer, in order (a prefix at least). Raises SinkAway."""
        ...


def answer(store: Callable[[RunRecord], bool], record: RunRecord) -> Stored:
    """``store(record)`` as one run's answer in a batch: its refusal's reason, not raised."""
    try:
        return store(record)
    except SinkRefused as exc:
        return str(exc)


class LastAttempt:
    """A sink's ``problem``: set by an attempt that found the sink away, cleared by one that
    succeeded (a batch answered, refusals in it or not); a run refused alone leaves it."""

    def __init__(self) -> None:
        self.problem: str | None = None

    def __call__(self, attempt: Callable[[], T]) -> T:
        try:
            answer = attempt()
        except SinkAway as exc:
            self.problem = str(exc)
            raise
        self.problem = None
        return answer
