"""Reads on a database that does not answer: a 503 within a bound, never a 500 or a hang.

A PostgreSQL that is frozen (SIGSTOP, a paused VM) keeps its connections acknowledged, so
a query on one waits for as long as the freeze lasts, and a new connection fails only at
the driver's connect timeout. Three things bound a read:

* the session a route reads with is handed out only once the database answers
  (``Health.require_database``: a ping at most ``READ_BUDGET_S`` old or new);
* a GET still without an answer after ``WATCH_S`` asks the same ping; if it gets no answer
  within ``ASK_S`` the read is answered 503 and its worker is left behind (``ReadDeadline``);
  a read that is merely slow on a database that answers goes on;
* a database error that says "away" (``is_unavailable``) is a 503, not a 500.

Each 503 says why in ``detail`` (JSON under ``/api/``, a page elsewhere) and carries
``Retry-After``. ``/healthz`` and ``/metrics`` answer from memory within their own budgets.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.runtime.health import DatabaseAway, Health
from app.store.db import StoreError, describe, is_unavailable
from app.web.pages.render import error_page

log = logging.getLogger(__name__)

RETRY_AFTER_S = 5
WATCH_S = 3.0
ASK_S = 1.5
# The documented bound for a read on a database that does not answer (docs/api.md).
BOUND_S = WATCH_S + ASK_S
READS = frozenset({"GET", "HEAD"})
ON_THEIR_OWN = ("/healthz", "/metrics", "/static/")  # answer from memory, bounded by themselves


def install(app: FastAPI, health: Health) -> None:
    app.add_exception_handler(DatabaseAway, _away)  # type: ignore[arg-type]
    app.add_exception_handler(StoreError, _store_error)  # type: ignore[arg-type]
    app.add_middleware(ReadDeadline, health=health)


def unavailable(request: Request, detail: str) -> Response:
    """The 503: JSON for the API, a page for a browser."""
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    if request.url.path.startswith("/api/"):
        return JSONResponse({"detail": detail}, status_code=503, headers=headers)
    page = error_page(request, 503, "Database unavailable", f"{detail}; try again shortly.")
    page.headers.update(headers)
    return page


async def _away(request: Request, exc: DatabaseAway) -> Response:
    return unavailable(request, str(exc))


async def _store_error(request: Request, exc: StoreError) -> Response:
    if not is_unavailable(exc):
        raise exc  # a bug, not an outage: the server's 500, logged with its traceback
    return unavailable(request, f"the database is unavailable: {describe(exc)}")


class ReadDeadline:
    """ASGI middleware: a read whose answer has not begun after ``WATCH_S`` is answered 503
    if the database does not answer either; its handler is left to finish on its own."""

    def __init__(self, app: ASGIApp, health: Health) -> None:
        self.app, self.health = app, health
        self._left: set[asyncio.Task[None]] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not _watched(scope):
            await self.app(scope, receive, send)
            return
        began = asyncio.Event()
        answered = [False]  # once the 503 went out, the handler's own answer is dropped

        async def relay(message: Message) -> None:
            if message["type"] == "http.response.start":
                began.set()
            if not answered[0]:
                await send(message)

        handler = asyncio.ensure_future(self.app(scope, receive, relay))
        try:
            problem = await self._watch(handler, began)
        except asyncio.CancelledError:  # the server gave up on this request: so does the handler
            handler.cancel()
            raise
        if problem is None:
            await handler
            return
        answered[0] = True
        self._leave(handler)
        log.warning("%s %s answered 503: %s", scope["method"], scope["path"], problem)
        await unavailable(Request(scope), problem)(scope, receive, send)

    async def _watch(self, handler: asyncio.Task[None], began: asyncio.Event) -> str | None:
        """None once the handler answers (or starts to); why not, if the database is away."""
        beginning = asyncio.ensure_future(began.wait())
        try:
            while True:
                await asyncio.wait(
                    {handler, beginning}, timeout=WATCH_S, return_when=asyncio.FIRST_COMPLETED
                )
                if handler.done() or began.is_set():
                    return None
                problem = await self.health.database_answers(ASK_S)
                if problem is not None:
                    return problem
        finally:
            beginning.cancel()

    def _leave(self, handler: asyncio.Task[None]) -> None:
        """Keep the abandoned handler referenced until it ends, and read its outcome."""
        self._left.add(handler)
        handler.add_done_callback(self._forget)

    def _forget(self, handler: asyncio.Task[Any]) -> None:
        self._left.discard(handler)
        if not handler.cancelled() and handler.exception() is not None:
            log.info("a read answered 503 ended later: %s", handler.exception())


def _watched(scope: Scope) -> bool:
    if scope["type"] != "http" or scope["method"] not in READS:
        return False
    return not str(scope["path"]).startswith(ON_THEIR_OWN)
