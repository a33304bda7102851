"""/api/v1 — samples: newest first, paged by a keyset cursor; and all of a window as CSV."""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from datetime import datetime

from fastapi import APIRouter
from fastapi.responses import StreamingResponse

from app.csvio.export import export_samples
from app.store.db import Sessions
from app.store.reads.browse import samples_count, samples_page
from app.web.api.params import (
    TARGET_ERRORS,
    BrowseDep,
    TargetParam,
    WindowDep,
    target_id_or_404,
)
from app.web.api.runs import sample_out
from app.web.deps import ServiceDep, SessionDep
from app.web.schemas import SamplePage

router = APIRouter(tags=["samples"])


@router.get("/samples", response_model=SamplePage, responses=TARGET_ERRORS)
def list_samples(session: SessionDep, browse: BrowseDep) -> SamplePage:
    """Samples taken in [from, to) (default: the last 24 hours), newest first."""
    rows, after, count = browse.page(session, samples_page, samples_count)
    items = [sample_out(row, name, v) for row, name, v in rows]
    return SamplePage(items=items, next_cursor=after, total=count)


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
    chunks = _exported(service.sessions, target, window.start, window.end)
    # The first chunk before the headers: a database away then is a 503 (app.web.unavailable),
    # not a 200 whose body is cut after it began.
    first = next(chunks, None)
    body = chunks if first is None else itertools.chain([first], chunks)
    name = f"phasewatch-{target or 'all'}-{window.start:%Y%m%dT%H%M%SZ}.csv"
    headers = {"Content-Disposition": f'attachment; filename="{name}"'}
    return StreamingResponse(body, media_type="text/csv; charset=utf-8", headers=headers)


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
    sessions: Sessions, target: str | None, start: datetime, end: datetime
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
