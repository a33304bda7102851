"""What the probe does to httpx's responses: closes them whole, and lets them go at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx


class WholeClose(httpx.AsyncByteStream):
    """A response's stream whose close the deadline cannot stop half-way.

    httpcore shields its clean-up with anyio's cancel scope, which a plain asyncio
    cancellation (``asyncio.timeout``, our deadline) passes straight through. A cut landing
    inside the close (httpx closes the response as the last byte is read, inside the
    deadline) left the connection checked out: the pool then made every later sample of
    the run wait for the whole deadline. The close runs in a task of its own, which the cut
    waits for (microseconds) before it goes on.
    """

    def __init__(self, stream: httpx.AsyncByteStream) -> None:
        self._stream = stream

    def __aiter__(self) -> AsyncIterator[bytes]:
        # The inner iterator itself: no frame of ours per chunk.
        return self._stream.__aiter__()

    async def aclose(self) -> None:
        closing = asyncio.ensure_future(self._stream.aclose())
        try:
            await asyncio.shield(closing)
        except asyncio.CancelledError:
            await closing
            raise


def closed_whole(response: httpx.Response) -> httpx.Response:
    """``response``, its stream's close made whole (``WholeClose``)."""
    assert isinstance(response.stream, httpx.AsyncByteStream)
    response.stream = WholeClose(response.stream)
    return response


def unbind(response: httpx.Response | None) -> None:
    """Break the closed response's reference cycle (httpx binds its stream to it), so that
    refcounting frees the response, and through it the client's pool once the client is
    closed, at once instead of at the next full garbage collection, whose pause grows with
    every object still alive."""
    if response is not None and response.is_closed:
        response.stream = httpx.ByteStream(b"")
