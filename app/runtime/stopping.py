"""Stopping the service within its budget, whatever the database does (SIGTERM: 5 s).

``serve`` starts this at the signal, beside the web server's drain of open requests
(``app.cli.serving``). Each step has a budget: runs in flight get ``RUNS_GRACE_S`` and are
then cut (stored as aborted), the background loops ``CANCEL_GRACE_S`` to end once cancelled
(one that does not is named and left running), the writer gets ``STORE_GRACE_S`` for what
it holds, and whatever it could not store by then is spooled; the lead and the replica's
lease get ``RELEASE_GRACE_S`` (first: the other replicas take the targets over at once),
and the connection pool ``POOL_GRACE_S``. A call stuck on a frozen database is left behind on its
daemon thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from sqlalchemy import Engine, event

from app.alerts.sender import Sender
from app.export.exporter import RunExporter
from app.replicas.membership import Replicas
from app.runs.threads import bounded
from app.runs.waits import CANCEL_GRACE_S, cancelled
from app.runs.writer import Writer
from app.runtime.scheduler import Watch
from app.store.leader import Leadership
from app.store.pooled import close_returned

log = logging.getLogger(__name__)

RUNS_GRACE_S = 2.0
STORE_GRACE_S = 1.0  # and 0.25 s more to spool what the writer still holds
RELEASE_GRACE_S = 0.4
POOL_GRACE_S = 0.3
EXPORT_GRACE_S = 0.5  # OpenTelemetry's last spans and metrics; a collector away is left behind
# Worst case 2 + 0.25 + 1.25 + 0.4 + 0.3 + 0.5 = 4.7 s, beside uvicorn's 1 s drain: within 5 s.


def close_pool(engine: Engine, wait_s: float = POOL_GRACE_S - 0.1) -> None:
    """Dispose of the pool once the connections still out come back, waiting ``wait_s`` at
    most: a loop cancelled mid-query finishes it on its thread. One that comes back later
    (a push still storing on a busy machine) is closed as it does (``make_engine``'s pools
    do that for any engine disposed of: ``close_late_returns``). So is one taken afterwards
    (that thread's next statement, a ping left behind): the engine's new pool keeps none,
    as nobody disposes of it again."""
    deadline = time.monotonic() + wait_s
    checked_out = getattr(engine.pool, "checkedout", lambda: 0)
    while checked_out() and time.monotonic() < deadline:
        time.sleep(0.01)
    engine.dispose()  # the engine has a new pool; make_engine's closes the late as they return
    event.listen(engine.pool, "checkin", close_returned)


def _release(service: Stoppable) -> None:
    """The lead, then the lease: the other replicas take this one's targets at once."""
    service.leadership.release()
    service.replicas.leave()


class Stoppable(Protocol):
    """What stopping needs of the service (app.runtime.service.Service), and nothing more."""

    @property
    def sender(self) -> Sender | None: ...

    @property
    def watch(self) -> Watch: ...

    @property
    def tasks(self) -> list[asyncio.Task[None]]: ...

    @property
    def writer(self) -> Writer: ...

    @property
    def leadership(self) -> Leadership: ...

    @property
    def replicas(self) -> Replicas: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def exporter(self) -> RunExporter | None: ...


async def stop_within_budget(service: Stoppable) -> None:
    began = time.monotonic()
    log.info(
        "stopping: runs in flight get %.1f s, storing %.1f s more", RUNS_GRACE_S, STORE_GRACE_S
    )
    if service.sender is not None:
        service.sender.stop()  # a send in flight is dropped; its row stays pending
    # The lease ends as the watch stops: the others take this one's slots from now on.
    await bounded(lambda: _release(service), RELEASE_GRACE_S, "releasing the lead and lease")
    await service.watch.stop(RUNS_GRACE_S)
    await cancelled(service.tasks, CANCEL_GRACE_S)
    spooled = await bounded(
        lambda: service.writer.close(STORE_GRACE_S), STORE_GRACE_S + 0.25, "storing the last runs"
    )
    await bounded(lambda: close_pool(service.engine), POOL_GRACE_S, "closing connections")
    service.writer.spool.close()
    if service.exporter is not None:  # after the writer: its last runs are exported too
        await bounded(service.exporter.close, EXPORT_GRACE_S, "exporting to OpenTelemetry")
    left = f"; {spooled} run(s) the database did not take left in the spool" if spooled else ""
    log.info("stopped in %.1f s%s", time.monotonic() - began, left)
