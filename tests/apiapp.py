"""A real app (``create_app``) over a test database, and alerts made the way serve makes them:
runs stored by the pipeline, then evaluated by the alert engine."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import uvicorn
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from app.alerts.identity import Transition
from app.config import Settings, TargetsFile
from app.main import create_app
from app.runtime.service import Service
from app.web.deps import workers_of
from tests.helpers import eventually
from tests.runfactory import failed_run, make_run, record_of

TOKEN = "test-token-0123456789"
EVERY = timedelta(minutes=1)
Lifespan = Literal["auto", "on", "off"]


def targets(*names: str, **fields: Any) -> TargetsFile:
    entries = [
        {"name": n, "url": f"http://{n}.invalid/", "interval": "1m", **fields} for n in names
    ]
    return TargetsFile.model_validate({"targets": entries})


@dataclass
class Api:
    app: FastAPI
    client: httpx.Client

    @property
    def service(self) -> Service:
        service: Service = self.app.state.service
        return service

    def store(self, record: Any) -> list[Transition]:
        """Store a run as the pipeline does (its after_store hook included)."""
        assert self.service.sink.store(record)
        result = self.service.after_store(record)
        return result if isinstance(result, list) else []

    def failing(self, target: str, vantage: str, runs: int, start: datetime) -> None:
        for k in range(runs):
            self.store(record_of(failed_run(start + k * EVERY, target=target, vantage=vantage)))

    def healthy(self, target: str, vantage: str, runs: int, start: datetime, seed: int = 1) -> None:
        rng = np.random.default_rng(seed)
        for k in range(runs):
            run = make_run(rng, start + k * EVERY, target=target, vantage=vantage, n=5)
            self.store(record_of(run))


@contextmanager
def api(
    db_url: str,
    tmp_path: Path,
    targets_file: TargetsFile,
    *,
    token: str | None = None,
    host: str = "127.0.0.1",
    **more: Any,
) -> Iterator[Api]:
    """Served on a loopback port without its lifespan: nothing is scheduled, the test
    stores the runs itself. ``more``: other settings."""
    settings = Settings(
        config=tmp_path / "none.yaml",
        database_url=db_url,
        spool_dir=tmp_path / "spool",
        vantage="eu",
        host=host,
        api_token=token,
        **more,
    )
    app = create_app(settings, targets_file)
    try:
        with in_process(app) as client:
            yield Api(app, client)
    finally:
        workers_of(app).close()
        app.state.service.engine.dispose()


class _ASGIOnPortal(httpx.BaseTransport):
    """A sync transport into ``httpx.ASGITransport``, run on an event loop of its own thread
    (what a server would give the app) and never through a socket."""

    def __init__(self, app: FastAPI, portal: BlockingPortal) -> None:
        # An exception in the app is a 500, as a real server answers.
        self._asgi = httpx.ASGITransport(app, raise_app_exceptions=False)
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        inner = httpx.Request(request.method, request.url, headers=request.headers, content=body)

        async def call() -> httpx.Response:
            response = await self._asgi.handle_async_request(inner)
            content = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=content)

        return self._portal.call(call)


@contextmanager
def in_process(app: FastAPI) -> Iterator[httpx.Client]:
    """A client of ``app`` over ASGI, lifespan off: for tests where a real server is not
    the point. The base URL is a loopback one, as the app's host checks expect."""
    with start_blocking_portal() as portal:
        transport = _ASGIOnPortal(app, portal)
        with httpx.Client(transport=transport, base_url="http://127.0.0.1:8000") as client:
            yield client


def loopback_socket() -> socket.socket:
    """A socket bound to a free loopback port and not listening yet: a client connecting
    there is refused until ``serving`` listens on it."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    return sock


@contextmanager
def serving(
    app: FastAPI, lifespan: Lifespan = "off", sock: socket.socket | None = None
) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port (``sock``'s, if given), in a thread;
    yields its base URL. For tests where the socket is the point (a browser, a process
    calling back)."""
    sock = sock or loopback_socket()
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan=lifespan, log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started or not thread.is_alive(), 20, "uvicorn started")
        assert server.started, "the test server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def minutes_ago(minutes: float) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)


def http_routes(app: FastAPI) -> list[tuple[str, str]]:
    """Every (method, path template) the app answers, routers included (mounts left out)."""
    found = []
    for route in iter_route_contexts(app.routes):
        if route.path is not None and route.methods:
            found += [(method, route.path) for method in sorted(route.methods)]
    return found
