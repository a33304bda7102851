"""The agent's loop: fetch the assignment, probe it with ``serve``'s scheduler, pipeline and
writer (the store step a push), flush the spool with backoff while the server is away, and
fetch again on a schedule or as soon as the server names another assignment version.

The last assignment is kept beside the spool, so an agent started while the server is
away probes what it was last told instead of nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError
from sqlalchemy.orm import sessionmaker

from app.agents.remote.client import Refused, ServerClient, Unreachable
from app.agents.wire import MAX_BATCH_JSON_BYTES, MAX_BATCH_RUNS, Assignment
from app.config import Target
from app.config.placement import probed_here
from app.runs.pipeline import Pipeline, log_orphan
from app.runs.spool import Spool
from app.runs.writer import Writer
from app.runtime.scheduler import Watch
from app.runtime.stopping import RUNS_GRACE_S, STORE_GRACE_S
from app.store.records import RunRecord

log = logging.getLogger(__name__)

FLUSH_BASE_S = 1.0
FLUSH_MAX_S = 60.0
ASSIGNMENT_FILE = "assignment.json"


@dataclass
class PushPipeline(Pipeline):
    """``serve``'s pipeline whose store is a push to the server.

    More than one run waiting (a spool to flush after an outage, or runs finishing together
    while one is pushed) go in batches; a server without batches (404, 405) gets them one
    by one from then on.
    """

    client: ServerClient | None = None
    batching: bool = True

    def deliver(self, record: RunRecord) -> bool:
        if self.batching and self.writer is not None and self.writer.queued():
            # More runs wait behind this one: it goes in a batch with them, from the spool.
            try:
                self.spool.append(record)
            except OSError:
                return super().deliver(record)
            return False
        return super().deliver(record)

    def flush(self) -> int:
        flushed = self.spool.flush_batched(
            self._push_lines, self.transient, MAX_BATCH_RUNS, MAX_BATCH_JSON_BYTES
        )
        if flushed:
            log.info("%d spooled run(s) pushed", flushed)
        return flushed

    def _push_lines(self, lines: list[str]) -> list[str | None]:
        assert self.client is not None
        if self.batching:
            try:
                taken = self.client.push_batch(lines)
            except Unreachable as exc:
                self.store_problem = str(exc)
                raise
            except Refused as exc:
                # A server that predates batches, or a batch it will not take whole.
                self.batching = not str(exc).startswith(("404", "405"))
                log.warning("batch of %d refused (%s); pushed one by one", len(lines), exc)
            else:
                self.store_problem = None
                return taken
        return [self._push_line(line) for line in lines]

    def _push_line(self, line: str) -> str | None:
        try:
            self.store(RunRecord.from_json(json.loads(line)))
        except Refused as exc:
            return str(exc)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            return f"not a run: {type(exc).__name__}"
        return None

    def store(self, record: RunRecord) -> bool:
        assert self.client is not None
        try:
            stored = self.client.push(record)
        except Unreachable as exc:
            self.store_problem = str(exc)
            raise
        self.store_problem = None
        return stored

    def transient(self, exc: Exception) -> bool:
        return isinstance(exc, Unreachable)


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
        self.pipeline = PushPipeline(sessionmaker(), self.spool, self.vantage, client=self.client)
        self.writer = Writer(self.pipeline.deliver, self.pipeline.flush, self.spool)
        self.pipeline.writer = self.writer
        self.watch = Watch(self.pipeline.run)

    async def run(self, stop: asyncio.Event) -> None:
        self.writer.start()
        for orphan in await asyncio.to_thread(self.spool.adopt_orphans):
            log_orphan(orphan)  # cut mid-run by a crash: pushed as aborted
            await self.writer.submit(orphan)
        self.assignment = self._kept()
        await self.refetch()
        self.watch.start(paused=False)
        try:
            await asyncio.gather(self._flush_loop(stop), self._refresh_loop(stop))
        finally:
            await self.close()

    async def close(self) -> None:
        await self.watch.stop(RUNS_GRACE_S)
        left = await asyncio.to_thread(self.writer.close, STORE_GRACE_S)
        if left:
            log.info("%d run(s) left in the spool for the next start", left)
        self.spool.close()
        self.client.close()

    async def refetch(self) -> None:
        try:
            fetched = await asyncio.to_thread(self.client.fetch)
        except (Unreachable, Refused) as exc:
            if not self.fetch_problem:  # once an outage, not at every try
                log.warning("assignment not fetched (%s); probing the last one known", exc)
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
        pending = await asyncio.to_thread(self.spool.pending)
        with contextlib.suppress(Unreachable, Refused):
            await asyncio.to_thread(self.client.report, self.refused, pending)

    async def _flush_loop(self, stop: asyncio.Event) -> None:
        delay = FLUSH_BASE_S
        while not await _stopped(stop, delay):
            if not self.spool.has_pending():
                delay = FLUSH_BASE_S
                continue
            self.writer.request_flush()
            # Doubling while the server stays away, up to a minute; at once when back.
            away = self.pipeline.store_problem is not None
            delay = min(FLUSH_MAX_S, delay * 2) if away else FLUSH_BASE_S

    async def _refresh_loop(self, stop: asyncio.Event) -> None:
        waited = 0.0
        while not await _stopped(stop, FLUSH_BASE_S):
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


async def _stopped(stop: asyncio.Event, delay_s: float) -> bool:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), delay_s)
    return stop.is_set()
