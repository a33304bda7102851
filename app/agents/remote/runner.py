"""The agent's loop: fetch the assignment, probe it with ``serve``'s scheduler, pipeline and
writer (their sink a ``PushSink``: runs go to the server), flush the spool with backoff
while the server is away, and fetch again on a schedule or as soon as the server names
another assignment version.

The last assignment is kept beside the spool, so an agent started while the server is
away probes what it was last told instead of nothing.

Stopping (SIGTERM, Ctrl-C) has a deadline, ``STOP_BUDGET_S``, whatever the server does: a
fetch or a status report in flight is left behind at once; runs in flight get
``RUNS_GRACE_S`` and are then cut (kept as aborted); the writer gets ``STORE_GRACE_S`` to
push what it holds, and what it could not push by then (the run stuck in a push included)
stays in the spool, fsynced, for the next start; the connections get ``CLOSE_GRACE_S``.
A call stuck on a server that does not answer is left behind on its thread, and the process
exits without waiting for it (``app.cli.agent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.agents.remote.client import NotAdmitted, ServerClient
from app.agents.remote.pushsink import PushSink
from app.agents.wire import MAX_BATCH_JSON_BYTES, MAX_BATCH_RUNS, Assignment
from app.config import Target
from app.config.placement import probed_here
from app.runs.pipeline import Pipeline
from app.runs.sink import SinkError
from app.runs.spool import Spool
from app.runs.threads import bounded
from app.runs.writer import Writer
from app.runtime.scheduler import Watch
from app.runtime.stopping import RUNS_GRACE_S, STORE_GRACE_S

log = logging.getLogger(__name__)

FLUSH_BASE_S = 1.0
FLUSH_MAX_S = 60.0
ASSIGNMENT_FILE = "assignment.json"
CLOSE_GRACE_S = 0.3
# Runs in flight, the writer (and spooling what it holds), the connections: 2 + 1.25 + 0.3.
STOP_BUDGET_S = RUNS_GRACE_S + STORE_GRACE_S + 0.25 + CLOSE_GRACE_S


@dataclass
class Agent:
    client: ServerClient
    vantage: str
    spool_dir: Path
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    refresh_s: float | None = None  # None: as the server says
    assignment: Assignment | None = None
    refused: dict[str, str] = field(default_factory=dict)
    fetch_problem: str | None = None

    def __post_init__(self) -> None:
        self.spool = Spool(self.spool_dir)
        self.sink = PushSink(self.client)
        self.writer = Writer(
            self.sink, self.spool, flush_runs=MAX_BATCH_RUNS, flush_bytes=MAX_BATCH_JSON_BYTES
        )
        self.pipeline = Pipeline(self.writer, self.vantage)
        self.watch = Watch(self.pipeline.run, self.vantage)

    async def run(self, stop: asyncio.Event) -> None:
        """Probe and push until ``stop``. Raises NotAdmitted when the server refuses this
        agent's token for its vantage at start and no assignment was kept from before:
        nothing could be probed, so it is said at once rather than retried for ever."""
        self.assignment = self._kept()
        first = asyncio.ensure_future(self.refetch(admitted=self.assignment is not None))
        try:
            started = await _unless_stopped(first, stop)
        except NotAdmitted:
            self.spool.close()
            self.client.close()
            raise
        if not started:  # stopped while the server kept the first fetch waiting
            self.spool.close()
            return
        self.writer.start()
        await self.writer.recover_orphans()  # a run cut by a crash is pushed as aborted
        self.watch.start(paused=False)
        loops = [
            asyncio.ensure_future(self._flush_loop()),
            asyncio.ensure_future(self._refresh_loop()),
        ]
        try:
            await _unless_stopped(asyncio.gather(*loops), stop)
        finally:
            await self.close()

    async def close(self) -> None:
        """Stop within ``STOP_BUDGET_S``; what could not be pushed stays in the spool."""
        began = time.monotonic()
        log.info(
            "stopping: runs in flight get %.1f s, pushing %.1f s more", RUNS_GRACE_S, STORE_GRACE_S
        )
        await self.watch.stop(RUNS_GRACE_S)
        close = partial(self.writer.close, STORE_GRACE_S)
        left = await bounded(close, STORE_GRACE_S + 0.25, "pushing the last runs")
        self.spool.close()
        await bounded(self.client.close, CLOSE_GRACE_S, "closing connections")
        pending = f"; {left} run(s) left in the spool for the next start" if left else ""
        log.info("stopped in %.1f s%s", time.monotonic() - began, pending)

    async def refetch(self, *, admitted: bool = True) -> None:
        """Fetch the assignment and apply it; ``admitted=False``: a 401 raises NotAdmitted."""
        try:
            fetched = await asyncio.to_thread(self.client.fetch)
        except SinkError as exc:
            if isinstance(exc, NotAdmitted) and not admitted:
                raise
            if not self.fetch_problem:  # once an outage, not at every try
                meanwhile = "the last one known" if self.assignment else "nothing until then"
                log.warning("assignment not fetched (%s); probing %s", exc, meanwhile)
            self.fetch_problem = str(exc)
        else:
            if self.fetch_problem:
                log.info("server reachable again: assignment fetched")
            self.fetch_problem = None
            self._keep(fetched)
            self.assignment = fetched
        self.apply()
        await self._report()

    def apply(self) -> None:
        """Schedule the assignment; a target this environment cannot fill in is refused."""
        targets, invalid = self._targets()
        runnable, refused = probed_here(targets, self.vantage, self.environ, server=False)
        refused |= invalid
        for name, reason in refused.items():
            if self.refused.get(name) != reason:
                log.error("target %s refused at %s: %s", name, self.vantage, reason)
        self.refused = refused
        changes = self.watch.apply(runnable)
        if changes.added or changes.removed or changes.rescheduled or changes.updated:
            log.info("assignment applied: %s", changes)

    def _targets(self) -> tuple[list[Target], dict[str, str]]:
        targets: list[Target] = []
        invalid: dict[str, str] = {}
        for sent in self.assignment.targets if self.assignment else []:
            try:
                targets.append(Target.model_validate(sent))
            except ValidationError as exc:
                invalid[str(sent.get("name"))] = f"not valid here: {exc.error_count()} problem(s)"
        return targets, invalid

    async def _report(self) -> None:
        # The runs held in memory behind a full spool wait too.
        pending = await asyncio.to_thread(self.spool.pending) + self.writer.backlog.held()
        with contextlib.suppress(SinkError):
            skipped = self.watch.skips.by_target()
            await asyncio.to_thread(self.client.report, self.refused, pending, skipped)

    async def _flush_loop(self) -> None:
        delay = FLUSH_BASE_S
        while True:
            await asyncio.sleep(delay)
            if not self.writer.waiting():
                delay = FLUSH_BASE_S
                continue
            self.writer.request_flush()
            # Doubling while the server stays away, up to a minute; at once when back.
            away = self.sink.problem is not None
            delay = min(FLUSH_MAX_S, delay * 2) if away else FLUSH_BASE_S

    async def _refresh_loop(self) -> None:
        waited = 0.0
        while True:
            await asyncio.sleep(FLUSH_BASE_S)
            waited += FLUSH_BASE_S
            every = self.refresh_s or (self.assignment.refresh_s if self.assignment else 30.0)
            told = self.client.server_config
            changed = self.assignment is not None and told not in (None, self.assignment.version)
            if changed or waited >= every:
                waited = 0.0
                await self.refetch()

    def _kept(self) -> Assignment | None:
        try:
            return Assignment.model_validate_json((self.spool_dir / ASSIGNMENT_FILE).read_text())
        except (OSError, ValidationError):
            return None

    def _keep(self, assignment: Assignment) -> None:
        path = self.spool_dir / ASSIGNMENT_FILE
        try:
            self.spool_dir.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(assignment.model_dump(mode="json")))
            temporary.replace(path)
        except OSError as exc:
            log.warning("assignment not kept on disk: %s", exc)


async def _unless_stopped(work: asyncio.Future[Any], stop: asyncio.Event) -> bool:
    """``work``'s end (its error raised), or ``stop``: then ``work`` is cancelled, a call it
    waits for on a thread left behind. True if ``work`` ended."""
    stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait([work, stopping], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if work.done():
        work.result()
        return True
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work
    return False
