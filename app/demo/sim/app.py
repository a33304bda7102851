"""A simulated LLM inference endpoint whose true phase durations are known and logged.

One request, on the server's own clock::

    body read ─one_way─▶ arrived ─queue (+cold start)─▶ queued ─prefill─▶ first token
        ─token k at k / tokens_per_s─▶ last token ─▶ end (last write emitted)

Every write reaches the wire ``one_way_ms`` after it was emitted (``simwire.Wire``), so a
client sees the first token ``2 * one_way + queue + prefill`` after its request landed (a
client naming itself in ``X-Sim-Client`` gets its own one-way trip: ``SimConfig.paths``). The
truth logs what really happened on the server's clock: a loop that wakes late makes a trip,
a queue or a token late, and the truth says so instead of the nominal value.

Endpoints (``endpoints``): ``POST /v1/chat/completions`` (OpenAI, streaming or not),
``POST /v1/messages`` (Anthropic, streaming), ``GET /health`` and
``GET /http?server_ms=N&bytes=M``. For ``/http`` the truth's ``queue_ms`` holds the server's
work time. Cold starts apply to the two LLM endpoints only: a health check loads no model.
``simserver.SimServer`` serves the app on loopback.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import parse_qs

from app.demo.sim import endpoints
from app.demo.sim.core import DEFAULT_CONFIG, Exchange, SimConfig, Timeline, Truth
from app.demo.sim.network import Send, Wire, now, sleep_until

__all__ = ["DEFAULT_CONFIG", "SimApp", "SimConfig", "Truth", "run_lifespan"]

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[Mapping[str, Any]]]


@dataclass(frozen=True)
class _Route:
    method: str
    handler: Callable[[Exchange], Awaitable[None]]
    llm: bool = False


_ROUTES = {
    "/v1/chat/completions": _Route("POST", endpoints.chat, llm=True),
    "/v1/messages": _Route("POST", endpoints.messages, llm=True),
    "/health": _Route("GET", endpoints.health),
    "/http": _Route("GET", endpoints.plain),
}


class SimApp:
    """The ASGI app. Reconfigure it and read its truths from any thread."""

    def __init__(self, config: SimConfig = DEFAULT_CONFIG) -> None:
        self._lock = threading.Lock()
        self._config = config
        self._rng = random.Random(config.seed)
        self._truths: list[Truth] = []
        # Only touched on the serving loop.
        self._busy = 0
        self._last_done: float | None = None

    @property
    def config(self) -> SimConfig:
        return self._config

    def reconfigure(self, **changes: Any) -> None:
        """Replace the config at once; requests already running keep the one they began with."""
        with self._lock:
            self._config = replace(self._config, **changes)
            if "seed" in changes:
                self._rng = random.Random(self._config.seed)

    def truths(self) -> list[Truth]:
        """A copy, in order of completion."""
        with self._lock:
            return list(self._truths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await run_lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        raw = await _read_body(receive)
        if raw is None:
            return
        # Like a real server, stop generating when the client goes away (a probe past its
        # deadline does): writing on would only fill the log with broken-pipe warnings.
        exchange = asyncio.create_task(self._exchange(scope, raw, now(), send))
        disconnect = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait({exchange, disconnect}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (exchange, disconnect):
                task.cancel()
            await asyncio.gather(exchange, disconnect, return_exceptions=True)
        if not exchange.cancelled():
            exchange.result()  # raises what went wrong

    async def _exchange(self, scope: Scope, raw: bytes, received: float, send: Send) -> None:
        config = self.config
        one_way_s = config.one_way_for(_client(scope)) / 1000
        wire = Wire(send, one_way_s)
        try:
            await sleep_until(received + one_way_s)
            query = parse_qs(scope["query_string"].decode("latin-1"))
            ex = Exchange(config, scope["path"], wire, Timeline(received, now()), query)
            # Recorded once every part that the truth times has left, and before the last
            # byte can reach a client: a client that has its response finds its truth.
            wire.before_last = lambda: self._record(ex.truth())
            await self._dispatch(ex, scope["method"], raw)
        except BaseException:
            wire.abort()
            raise
        await wire.close()

    async def _dispatch(self, ex: Exchange, method: str, raw: bytes) -> None:
        route = _ROUTES.get(ex.path)
        body = _json_object(raw) if route is not None and route.method == "POST" else {}
        if route is None:
            endpoints.error(ex, 404, "not_found_error", f"no such path: {ex.path}")
        elif method != route.method:
            endpoints.error(ex, 405, "invalid_request_error", f"use {route.method}")
        elif body is None:
            endpoints.error(ex, 400, "invalid_request_error", "body is not a JSON object")
        else:
            ex.body = body
            await self._run(ex, route)

    async def _run(self, ex: Exchange, route: _Route) -> None:
        if not route.llm:
            await route.handler(ex)
            return
        ex.cold_start = self._enter_llm(ex)
        ex.queue_s = self._queue_s(ex.config, ex.cold_start)
        try:
            await route.handler(ex)
        finally:
            self._leave_llm()

    def _record(self, truth: Truth) -> None:
        with self._lock:
            self._truths.append(truth)

    def _enter_llm(self, ex: Exchange) -> bool:
        """Count the request in; return whether it meets a cold model."""
        cfg, last = ex.config, self._last_done
        idle = last is None or ex.timeline.arrived - last >= cfg.cold_after_idle_s
        cold = self._busy == 0 and idle and cfg.cold_start_ms > 0
        self._busy += 1
        return cold

    def _leave_llm(self) -> None:
        self._busy -= 1
        self._last_done = now()

    def _queue_s(self, cfg: SimConfig, cold_start: bool) -> float:
        cold_ms = cfg.cold_start_ms if cold_start else 0.0
        if cfg.queue_median_ms <= 0:
            return cold_ms / 1000
        with self._lock:
            factor = self._rng.lognormvariate(0.0, cfg.queue_sigma)
        return (cfg.queue_median_ms * factor + cold_ms) / 1000


def _client(scope: Scope) -> str | None:
    """The ``X-Sim-Client`` header: whose route (``SimConfig.paths``) the request takes."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"x-sim-client":
            return bytes(value).decode("latin-1")
    return None


def _json_object(raw: bytes) -> dict[str, Any] | None:
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when the client left before sending it."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def run_lifespan(
    receive: Receive, send: Send, on_startup: Callable[[], None] | None = None
) -> None:
    """Answer ASGI lifespan messages; ``on_startup`` runs once the server may accept."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            if on_startup is not None:
                on_startup()
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
