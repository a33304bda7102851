"""The probe's connection as httpcore reads and writes it: one asyncio ``Protocol`` that keeps
reading on, buffered up to a bound, so a read of data already in takes no loop turn.

Failures are httpcore's ``ReadError``/``WriteError``, timeouts ``ReadTimeout``/
``WriteTimeout``; ``get_extra_info("socket")`` is the real ``socket.socket`` and
``get_extra_info("tcp_rtt_ms")`` the kernel's RTT of it (``app.probe.rtt``), read at the
close once it is closed: a request cut at its deadline is closed before the probe can ask.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Awaitable
from typing import Any, TypeVar

from httpcore import (
    AsyncNetworkStream,
    ConnectError,
    ConnectTimeout,
    ReadError,
    ReadTimeout,
    WriteError,
    WriteTimeout,
)

from app.probe.compat import is_socket_readable
from app.probe.rtt import tcp_rtt_ms

# Reading pauses above this many buffered bytes, so a server that floods memory cannot.
HIGH_WATER = 256 * 1024
LOW_WATER = 64 * 1024
# Writes held back to leave together go out at once from this size on.
HOLD_LIMIT = 64 * 1024


T = TypeVar("T")


async def within(awaitable: Awaitable[T], timeout: float | None, error: type[Exception]) -> T:
    """``awaitable`` unless ``timeout`` seconds pass first; then ``error``."""
    if timeout is None:
        return await awaitable
    try:
        async with asyncio.timeout(timeout):
            return await awaitable
    except TimeoutError as exc:
        raise error(f"timed out after {timeout:g} s") from exc


class _Buffered(asyncio.Protocol):
    """Bytes as they come in, plus why they stopped coming (EOF or an error)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        # The socket's RTT, read as the connection ends (whoever ends it): asyncio closes
        # the socket right after connection_lost, and nobody can ask it then.
        self.sock: socket.socket | None = None
        self.closed_rtt_ms: float | None = None
        self.chunks: deque[bytes] = deque()
        self.size = 0
        self.eof = False
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self._read_waiter: asyncio.Future[None] | None = None
        self._write_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.chunks.append(data)
        self.size += len(data)
        if self.size > HIGH_WATER and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self.eof = True
        self.keep_rtt()
        self._wake_reader()
        return False  # the transport closes: a server that is done sending is done reading

    def connection_lost(self, exc: Exception | None) -> None:
        self.keep_rtt()
        self.eof = True
        if exc is not None and self.error is None:
            self.error = exc
        self._wake_reader()
        self._wake_writer()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self._wake_writer()

    def keep_rtt(self) -> None:
        if self.closed_rtt_ms is None and self.sock is not None:
            self.closed_rtt_ms = tcp_rtt_ms(self.sock)

    # One waiter each way: HTTP/2 may wait to write while it waits to read.
    def readable(self) -> asyncio.Future[None]:
        self._read_waiter = asyncio.get_running_loop().create_future()
        return self._read_waiter

    def writable(self) -> asyncio.Future[None]:
        self._write_waiter = asyncio.get_running_loop().create_future()
        return self._write_waiter

    def take(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of what is buffered (``b""`` at EOF)."""
        if not self.chunks:
            if self.error is not None:
                raise ReadError(str(self.error) or repr(self.error))
            return b""
        data = self.chunks.popleft()
        if len(data) > max_bytes:
            self.chunks.appendleft(data[max_bytes:])
            data = data[:max_bytes]
        self.size -= len(data)
        if self.reading_paused and self.size <= LOW_WATER and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return data

    def _wake_reader(self) -> None:
        waiter, self._read_waiter = self._read_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_writer(self) -> None:
        waiter, self._write_waiter = self._write_waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class AsyncioStream(AsyncNetworkStream):
    """One connection: plain TCP, or TLS over it after ``start_tls``."""

    def __init__(
        self,
        sock: socket.socket,
        transport: asyncio.Transport,
        protocol: _Buffered,
        resolved_ns: int | None = None,
    ) -> None:
        self._sock = sock
        self._resolved_ns = resolved_ns  # when its name was resolved (app.probe.net.backend)
        self._transport = transport
        self._protocol = protocol
        self._tls = False
        self._unsent: list[bytes] = []
        self._unsent_size = 0
        # Kept now: once the socket is closed nobody can ask it any more.
        self._server_addr = _address(sock.getpeername)
        self._client_addr = _address(sock.getsockname)
        protocol.sock = sock

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._flush()
        protocol = self._protocol
        if not protocol.chunks and not protocol.eof:
            await within(protocol.readable(), timeout, ReadTimeout)
        return protocol.take(max_bytes)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.error is not None or self._transport.is_closing():
            raise WriteError(str(protocol.error or "connection closed"))
        self._hold(buffer)
        while protocol.writing_paused and not self._transport.is_closing():
            await within(protocol.writable(), timeout, WriteTimeout)
        if protocol.error is not None:
            raise WriteError(str(protocol.error))

    def _hold(self, buffer: bytes) -> None:
        """Queue ``buffer`` to leave with whatever else is written before the next read or
        the loop's next turn: httpcore writes a request's headers and body apart, and two
        segments cost the server two wake-ups where curl's one costs one."""
        if not self._unsent:
            asyncio.get_running_loop().call_soon(self._flush)
        self._unsent.append(buffer)
        self._unsent_size += len(buffer)
        if self._unsent_size >= HOLD_LIMIT:
            self._flush()

    def _flush(self) -> None:
        if self._unsent and not self._transport.is_closing():
            self._transport.write(b"".join(self._unsent))
        self._unsent.clear()
        self._unsent_size = 0

    async def aclose(self) -> None:
        self._flush()
        if not self._transport.is_closing():
            self._protocol.keep_rtt()
        # As httpcore's anyio backend does (standard_compatible=False): no TLS close_notify
        # exchange, which would wait on a peer that may be gone.
        if self._tls:
            self._transport.abort()
        else:
            self._transport.close()
        # The socket is closed on the loop's next turn: let it be, as anyio's aclose does,
        # so that closed means closed for whoever runs next (even blocking code).
        await asyncio.sleep(0)

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> AsyncNetworkStream:
        self._flush()
        loop = asyncio.get_running_loop()
        handshake = loop.start_tls(
            self._transport, self._protocol, ssl_context, server_hostname=server_hostname
        )
        try:
            transport = await within(handshake, timeout, ConnectTimeout)
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise ConnectError(str(exc) or repr(exc)) from exc
        except BaseException:
            self._transport.abort()
            raise
        if transport is None:  # the connection closed during the handshake
            raise ConnectError("connection closed during the TLS handshake")
        assert isinstance(transport, asyncio.Transport)
        self._protocol.transport = transport  # flow control now pauses the TLS layer
        stream = AsyncioStream(self._sock, transport, self._protocol, self._resolved_ns)
        stream._tls = True
        return stream

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._sock
        if info == "server_addr":
            return self._server_addr
        if info == "client_addr":
            return self._client_addr
        if info == "resolved_ns":
            return self._resolved_ns
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object") if self._tls else None
        if info == "is_readable":
            return self._readable()
        if info == "tcp_rtt_ms":
            closed = self._transport.is_closing() or self._protocol.eof
            return self._protocol.closed_rtt_ms if closed else tcp_rtt_ms(self._sock)
        return None

    def _readable(self) -> bool:
        """Whether an idle connection has something to say: data, EOF or an error all mean
        the server has dropped it (or broken the protocol), so the pool must not reuse it."""
        protocol = self._protocol
        if protocol.chunks or protocol.eof or protocol.error is not None:
            return True
        return is_socket_readable(self._sock)


async def open_stream(sock: socket.socket, resolved_ns: int | None = None) -> AsyncioStream:
    loop = asyncio.get_running_loop()
    protocol = _Buffered()
    try:
        transport, _ = await loop.create_connection(lambda: protocol, sock=sock)
    except BaseException:
        sock.close()
        raise
    return AsyncioStream(sock, transport, protocol, resolved_ns)


def _address(ask: Any) -> Any:
    try:
        return ask()
    except OSError:
        return None
