"""/api/v1 — samples: newest first, paged by a keyset cursor; and all of a window as CSV."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from datetime import datetime

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session, sessionmaker

from app.store.csvexport import export_samples
from app.store.models import RunRow, SampleRow, TargetRow
from app.web.api.params import (
    TARGET_ERRORS,
    CursorParam,
    LimitParam,
    TargetParam,
    VantageParam,
    WindowDep,
    bad_request,
    cursor_uuid,
    decode_cursor,
    encode_cursor,
    target_id_or_404,
)
from app.web.api.runs import sample_out
from app.web.deps import ServiceDep, SessionDep
from app.web.schemas import SampleOut, SamplePage

router = APIRouter(tags=["samples"])


@router.get("/samples", response_model=SamplePage, responses=TARGET_ERRORS)
def list_samples(
    session: SessionDep,
    window: WindowDep,
    target: TargetParam = None,
    vantage: VantageParam = None,
    limit: LimitParam = 100,
    cursor: CursorParam = None,
) -> SamplePage:
    """Samples taken in [from, to) (default: the last 24 hours), newest first."""
    query = (
        select(SampleRow, TargetRow.name, RunRow.vantage)
        .join(RunRow, RunRow.id == SampleRow.run_id)
        .join(TargetRow, TargetRow.id == RunRow.target_id)
        .where(SampleRow.started_at >= window.start, SampleRow.started_at < window.end)
        .order_by(SampleRow.started_at.desc(), SampleRow.run_id.desc(), SampleRow.idx.desc())
    )
    if target is not None:
        query = query.where(RunRow.target_id == target_id_or_404(session, target))
    if vantage is not None:
        query = query.where(RunRow.vantage == vantage)
    if cursor is not None:
        query = query.where(_before(cursor))
    rows = session.execute(query.limit(limit + 1)).all()
    items = [sample_out(row, name, v) for row, name, v in rows[:limit]]
    more = len(rows) > limit
    return SamplePage(items=items, next_cursor=_cursor(items[-1]) if more else None)


def _before(cursor: str) -> ColumnElement[bool]:
    at, (run, idx) = decode_cursor(cursor, 2)
    run_id = cursor_uuid(run, cursor)
    if not idx.isdigit():
        raise bad_request(f"not a cursor from this API: {cursor!r}")
    same_run = and_(SampleRow.run_id == run_id, SampleRow.idx < int(idx))
    same_time = and_(SampleRow.started_at == at, or_(SampleRow.run_id < run_id, same_run))
    return or_(SampleRow.started_at < at, same_time)


def _cursor(sample: SampleOut) -> str:
    return encode_cursor(sample.started_at, sample.run_id, sample.idx)


@router.get(
    "/samples.csv",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/csv": {}}}, **TARGET_ERRORS},
)
def samples_csv(
    service: ServiceDep, session: SessionDep, window: WindowDep, target: TargetParam = None
) -> StreamingResponse:
    """Samples taken in [from, to) as CSV, in the export layout (``phasewatch export``),
    streamed: ``timestamp,target,vantage,run_id,status,total_ms,<phase>_ms…``."""
    if target is not None:
        target_id_or_404(session, target)
    chunks = _exported(service.pipeline.sessions, target, window.start, window.end)
    name = f"phasewatch-{target or 'all'}-{window.start:%Y%m%dT%H%M%SZ}.csv"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(chunks, media_type="text/csv; charset=utf-8", headers=headers)


class _Pipe:
    """A text file whose writes go to a bounded queue: the export waits for a slow reader."""

    def __init__(self) -> None:
        self.chunks: queue.Queue[str | BaseException | None] = queue.Queue(maxsize=64)
        self.closed = threading.Event()
        self._buffer: list[str] = []
        self._size = 0

    def write(self, text: str) -> int:
        if self.closed.is_set():
            raise _ReaderGone
        self._buffer.append(text)
        self._size += len(text)
        if self._size >= 64 * 1024:
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self._buffer:
            self.chunks.put("".join(self._buffer))
            self._buffer, self._size = [], 0


class _ReaderGone(Exception):
    pass


def _exported(
    sessions: sessionmaker[Session], target: str | None, start: datetime, end: datetime
) -> Iterator[str]:
    pipe = _Pipe()

    def export() -> None:
        try:
            with sessions() as session:
                export_samples(session, pipe, target=target, start=start, end=end)  # type: ignore[arg-type]
            pipe.flush()
            pipe.chunks.put(None)
        except _ReaderGone:
            return
        except BaseException as exc:  # handed to the reader, which raises it
            pipe.chunks.put(exc)

    threading.Thread(target=export, name="samples-csv", daemon=True).start()
    try:
        while (chunk := pipe.chunks.get()) is not None:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk
    finally:
        pipe.closed.set()
        while not pipe.chunks.empty():  # unblock a writer waiting on a full queue
            pipe.chunks.get_nowait()
