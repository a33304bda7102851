"""Running the web server for ``serve``: stopped on time, exiting 0, never held at exit.

On SIGTERM (or Ctrl-C) uvicorn stops taking connections and gives open requests
``HTTP_GRACE_S`` (a client that holds a request open gets no more), while the service
stops beside it (``Service.begin_stop``), and the what-if workers end at once (a what-if in
flight answers 503 within the grace instead of being cut). uvicorn would end by raising the
signal again; this server ends with exit code 0 instead. The process then exits at once: a
thread still stuck on a frozen database (an API read, say) must not keep it alive, and
everything worth keeping is stored or spooled (fsynced) by then.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys
import time
from email.utils import formatdate
from types import FrameType
from typing import NoReturn

import uvicorn
from fastapi import FastAPI
from uvicorn.server import ServerState

from app.cli.common import exit_now
from app.runs.threads import NoWaitThreadPool
from app.runtime.service import Service
from app.runtime.workers import Workers
from app.web.deps import service_of, workers_of

HTTP_GRACE_S = 1  # uvicorn takes whole seconds
DEFAULT_EXECUTOR_THREADS = 32


# uvicorn's main loop wakes ten times a second to see whether it should stop, and renews
# its Date header at every tenth: an idle serve's most frequent wakeup (600 a minute, each
# two turns of the event loop; 60 at a tick a second). Here the header is made when a
# request reads it (``_DatedState``) and the loop is woken only when told to stop.


class _DatedState(ServerState):
    """uvicorn's shared state, its default headers read with a Date of the current second,
    made when a request reads them (uvicorn reads them once a request's headers are in)
    rather than renewed every second by its main loop's tick; what the tick sets (the
    configured headers, a Date or none) is kept as the template."""

    def __init__(self) -> None:
        self._dated = True
        self._rest: list[tuple[bytes, bytes]] = []
        self._made: tuple[int, list[tuple[bytes, bytes]]] = (-1, [])
        super().__init__()

    @property  # uvicorn's is an attribute
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        if not self._dated:
            return self._rest
        second = int(time.time())
        if self._made[0] != second:
            date = formatdate(second, usegmt=True).encode()
            self._made = (second, [(b"date", date), *self._rest])
        return self._made[1]

    @default_headers.setter
    def default_headers(self, headers: list[tuple[bytes, bytes]]) -> None:
        self._dated = any(name == b"date" for name, _ in headers)
        self._rest = [(name, value) for name, value in headers if name != b"date"]
        self._made = (-1, [])


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, service: Service, workers: Workers) -> None:
        self._stop_now = asyncio.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        super().__init__(config)
        self.server_state = _DatedState()
        self.service = service
        self.workers = workers

    @property  # uvicorn's is an attribute; this one wakes main_loop too
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self.loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self.loop.call_soon_threadsafe(self._stop_now.set)

    async def main_loop(self) -> None:
        """uvicorn's, woken only when told to stop (its tick, every tenth in uvicorn's
        count, sets the headers' template; the Date is ``_DatedState``'s). No request
        limit is set (``limit_max_requests``), nor a supervisor's ``callback_notify``:
        nothing else asks for a tick."""
        while not await self.on_tick(0):
            await self._stop_now.wait()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        self._captured_signals.clear()  # stopped cleanly: exit 0, not by the signal again
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self.service.begin_stop)
            self.loop.call_soon_threadsafe(self.workers.close)


async def _serve(server: _Server, sock: socket.socket) -> None:
    server.loop = asyncio.get_running_loop()
    # asyncio.run would wait at its end for every to_thread call still stuck in a database.
    server.loop.set_default_executor(NoWaitThreadPool(DEFAULT_EXECUTOR_THREADS))
    await server.serve(sockets=[sock])


class PortTaken(Exception):
    pass


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything starts: a port another process holds is
    one line and exit 1 before a database is migrated, an alert restored or a probe sent
    (uvicorn binds only after the app's start-up has run)."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        return socket.create_server((host, port), family=family, backlog=2048)
    except OSError as exc:
        problem = exc.strerror or str(exc)
        raise PortTaken(
            f"cannot listen on {host}:{port}: {problem} (another phasewatch serve?"
            " --port or PHASEWATCH_PORT picks another)"
        ) from None


# How long a thread computing (an evaluation, a rollup) keeps the interpreter's lock from
# one that waits on it. The event loop and the push workers take it back after every
# socket or database call; at the 5 ms default each of those waits could cost a push a
# slice (bench/README.md, agents_ingest).
SWITCH_INTERVAL_S = 0.0005


def run_server(app: FastAPI, sock: socket.socket, log_level: str) -> NoReturn:
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    host, port = sock.getsockname()[:2]
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_config=None,
        log_level=log_level,
        timeout_graceful_shutdown=HTTP_GRACE_S,
    )
    server = _Server(config, service_of(app), workers_of(app))
    code = 0
    try:
        with asyncio.Runner(loop_factory=config.get_loop_factory()) as runner:
            runner.run(_serve(server, sock))
    except SystemExit as exit_:  # uvicorn's own, when it cannot bind
        code = exit_.code if isinstance(exit_.code, int) else 1
    exit_now(code)
