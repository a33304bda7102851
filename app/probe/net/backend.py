"""httpcore's network backend, written straight on asyncio for the probe.

httpcore's default (anyio) spends many times the kernel's connect in Python in
``connect_tcp`` (a task group racing every address, cancel scopes, several loop turns;
``bench.probe_cpu`` and ``bench.probe_accuracy`` measure the difference); all of it lands in
the sample's ``connect`` phase. This backend connects a plain non-blocking socket (racing
addresses only when a name resolves to more than one), then reads and writes through one
asyncio ``Protocol`` that keeps reading on, buffered up to a bound, so a read of data
already in takes no loop turn. Connecting is
``app.probe.net.connect``'s job, reading and writing ``app.probe.net.stream``'s.

The contract is httpcore's ``AsyncNetworkBackend``/``AsyncNetworkStream``: timeouts are
per call (``ConnectTimeout``/``ReadTimeout``/``WriteTimeout``), failures are httpcore's
``ConnectError``/``ReadError``/``WriteError``, cancellation passes through untouched.
``get_extra_info("socket")`` is the real ``socket.socket``; ``get_extra_info("tcp_rtt_ms")``
is the kernel's RTT of it (``app.probe.rtt``), read at the close once it is closed: a
request cut at its deadline is closed before the probe can ask. ``get_extra_info
("resolved_ns")`` is when its name was resolved (``clock.now_ns``): the end of ``dns``.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable

from httpcore import (
    AsyncNetworkBackend,
    AsyncNetworkStream,
    ConnectError,
    ConnectTimeout,
)

from app.probe.compat import SOCKET_OPTION
from app.probe.net.connect import connect, prepare
from app.probe.net.resolver import Resolver, SystemResolver
from app.probe.net.stream import open_stream, within


class AsyncioBackend(AsyncNetworkBackend):
    def __init__(self, resolver: Resolver | None = None) -> None:
        self.resolver = resolver or SystemResolver()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        options = list(socket_options or ())
        try:
            connecting = connect(host, port, local_address, options, self.resolver)
            sock, resolved_ns = await within(connecting, timeout, ConnectTimeout)
        except OSError as exc:
            raise ConnectError(str(exc) or repr(exc)) from exc
        return await open_stream(sock, resolved_ns)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> AsyncNetworkStream:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            prepare(sock, None, list(socket_options or ()))
            loop = asyncio.get_running_loop()
            await within(loop.sock_connect(sock, path), timeout, ConnectTimeout)
        except OSError as exc:
            sock.close()
            raise ConnectError(str(exc) or repr(exc)) from exc
        except BaseException:
            sock.close()
            raise
        return await open_stream(sock)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
