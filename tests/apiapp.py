"""A real app (``create_app``) over a test database, and alerts made the way serve makes them:
runs stored by the pipeline, then evaluated by the alert engine."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import uvicorn
from fastapi import FastAPI
from fastapi.routing import iter_route_contexts

from app.alerts.identity import Transition
from app.config import Settings, TargetsFile
from app.main import create_app
from app.service import Service
from tests.runfactory import failed_run, make_run, record_of

TOKEN = "test-token-0123456789"
EVERY = timedelta(minutes=1)


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
        assert self.service.pipeline.store(record)
        hook = self.service.pipeline.after_store
        assert hook is not None
        result = hook(record)
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
) -> Iterator[Api]:
    """Served on a loopback port without its lifespan: nothing is scheduled, the test
    stores the runs itself."""
    settings = Settings(
        config=tmp_path / "none.yaml",
        database_url=db_url,
        spool_dir=tmp_path / "spool",
        vantage="eu",
        host=host,
        api_token=token,
    )
    app = create_app(settings, targets_file)
    try:
        with serving(app) as base_url, httpx.Client(base_url=base_url, timeout=30) as client:
            yield Api(app, client)
    finally:
        app.state.service.engine.dispose()


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """``app`` on a free loopback port, in a thread; yields its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, lifespan="off", log_config=None, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "the test server did not start"
    try:
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
