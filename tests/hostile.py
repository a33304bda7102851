"""Misbehaving endpoints, each a real socket server on loopback speaking raw HTTP/1.1."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

SSE_HEADERS = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token_event(text: str) -> bytes:
    payload = json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})
    return f"data: {payload}\n\n".encode()


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            await reader.readexactly(int(line.split(b":")[1]))


def reset(writer: asyncio.StreamWriter) -> None:
    """Abort with a TCP RST, as a crashing server or a middlebox does."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@asynccontextmanager
async def serve(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}/v1/chat/completions"
    finally:
        server.close()
        await asyncio.wait_for(server.wait_closed(), 5)


async def status_500(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    body = b'{"error": {"message": "model overloaded", "type": "server_error"}}'
    writer.write(b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n")
    writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()


async def status_429(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    body = b'{"error": {"message": "Rate limit reached for requests"}}'
    writer.write(b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 7\r\n")
    writer.write(b"content-length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()


async def reset_mid_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(SSE_HEADERS)
    for text in ("Hello", " wor"):
        writer.write(chunk(token_event(text)))
        await writer.drain()
        await asyncio.sleep(0.02)
    reset(writer)


async def malformed_json(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(SSE_HEADERS + chunk(token_event("Hi")) + chunk(b'data: {"choices": [\n\n'))
    await writer.drain()
    await asyncio.sleep(5)


async def trickling_headers(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    for byte in b"HTTP/1.1 200 OK\r\nx-slow: " + b"a" * 1000:
        writer.write(bytes([byte]))
        await writer.drain()
        await asyncio.sleep(0.05)


async def endless_stream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    writer.write(SSE_HEADERS)
    while True:
        writer.write(chunk(token_event("more")))
        await writer.drain()
        await asyncio.sleep(0.005)


async def huge_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    size = 100 * 1024 * 1024
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
    writer.write(b"content-length: %d\r\n\r\n" % size)
    block = b" " * (1024 * 1024)
    for _ in range(size // len(block)):
        writer.write(block)
        await writer.drain()


async def silent_after_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await read_request(reader)
    await asyncio.sleep(30)
