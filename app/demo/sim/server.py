"""Serve the simulated endpoint with hypercorn on 127.0.0.1 and an ephemeral port.

``with SimServer(...) as sim:`` runs hypercorn on its own loop in a background thread;
``async with SimServer(...) as sim:`` runs it as a task on the current loop. Either way the
port is listening and the app started when the block begins.
"""

from __future__ import annotations

import asyncio
import logging
import selectors
import socket
import threading
from collections.abc import Coroutine
from typing import Any, cast

from hypercorn.asyncio import serve
from hypercorn.config import Config
from hypercorn.typing import Framework

from app.demo.sim.app import DEFAULT_CONFIG, Receive, Scope, SimApp, SimConfig, Truth, run_lifespan
from app.demo.sim.network import Send

_HOST = "127.0.0.1"
_START_TIMEOUT_S = 10.0
_STOP_TIMEOUT_S = 5.0
_GRACEFUL_TIMEOUT_S = 1.0


class SimServer:
    """The simulator on a loopback port; a context manager, sync (own thread) or async."""

    def __init__(
        self,
        config: SimConfig = DEFAULT_CONFIG,
        *,
        certfile: str | None = None,
        keyfile: str | None = None,
        http2: bool = True,
    ) -> None:
        if (certfile is None) != (keyfile is None):
            raise ValueError("give both certfile and keyfile, or neither")
        self.app = SimApp(config)
        self._certfile, self._keyfile, self._http2 = certfile, keyfile, http2
        self._url: str | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``, or ``https://`` with a certificate; set once started."""
        if self._url is None:
            raise RuntimeError("the sim server has not started")
        return self._url

    @property
    def config(self) -> SimConfig:
        return self.app.config

    def truths(self) -> list[Truth]:
        return self.app.truths()

    def reconfigure(self, **changes: Any) -> None:
        self.app.reconfigure(**changes)

    async def __aenter__(self) -> SimServer:
        await self._start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._stop is not None and self._task is not None
        self._stop.set()
        await asyncio.wait_for(self._task, _STOP_TIMEOUT_S)

    def __enter__(self) -> SimServer:
        ready = threading.Event()
        self._thread = threading.Thread(
            target=run_precise, args=(self._serve_in_thread(ready),), name="sim-server"
        )
        self._thread.daemon = True  # a stuck server must not keep the interpreter alive
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S):
            raise RuntimeError("the sim server did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._loop is not None and self._stop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(_STOP_TIMEOUT_S)
        if self._thread.is_alive():
            raise RuntimeError("the sim server did not stop in time")

    async def _serve_in_thread(self, ready: threading.Event) -> None:
        try:
            await self._start()
        except Exception as error:
            self._error = error
            return
        finally:
            ready.set()
        assert self._task is not None
        await self._task

    async def _start(self) -> None:
        config = self._hypercorn_config()
        config.create_ssl_context()  # fails here on a bad certificate, not in the server task
        sock = _listening_socket()
        port = sock.getsockname()[1]
        config.bind = [f"fd://{sock.detach()}"]
        self._url = f"{'https' if config.ssl_enabled else 'http'}://{_HOST}:{port}"
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        started = asyncio.Event()
        app = self._asgi(started)
        self._task = asyncio.create_task(serve(app, config, shutdown_trigger=self._stop.wait))
        try:
            await _until_started(self._task, started)
        except BaseException:
            self._task.cancel()
            raise

    def _asgi(self, started: asyncio.Event) -> Framework:
        async def asgi(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "lifespan":
                await run_lifespan(receive, send, on_startup=started.set)
            else:
                await self.app(scope, receive, send)

        # Our app takes plain mappings; hypercorn's signature names its own TypedDicts.
        return cast(Framework, asgi)

    def _hypercorn_config(self) -> Config:
        config = Config()
        config.certfile, config.keyfile = self._certfile, self._keyfile
        config.alpn_protocols = ["h2", "http/1.1"] if self._http2 else ["http/1.1"]
        config.accesslog = None
        config.errorlog = logging.getLogger(__name__)  # not hypercorn's stderr handler
        config.graceful_timeout = _GRACEFUL_TIMEOUT_S
        return config


def run_precise(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on a new loop whose sleeps end on time to the microsecond."""
    # epoll rounds every timeout up to a whole millisecond, which would make each simulated
    # delay up to 1 ms late; select() takes microseconds. Its price, file descriptors below
    # 1024 only, is no limit for tests and benchmarks.
    with asyncio.Runner(loop_factory=_select_loop) as runner:
        runner.run(main)


def _select_loop() -> asyncio.AbstractEventLoop:
    return asyncio.SelectorEventLoop(selectors.SelectSelector())


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((_HOST, 0))
    # Listening before hypercorn takes over: a client that connects early waits in the
    # backlog instead of being refused.
    sock.listen(128)
    return sock


async def _until_started(task: asyncio.Task[None], started: asyncio.Event) -> None:
    waiter = asyncio.create_task(started.wait())
    first = asyncio.FIRST_COMPLETED
    await asyncio.wait({task, waiter}, timeout=_START_TIMEOUT_S, return_when=first)
    waiter.cancel()
    if task.done():
        task.result()  # raises what stopped the server
        raise RuntimeError("the sim server stopped while starting")
    if not started.is_set():
        raise RuntimeError("the sim server did not start in time")
