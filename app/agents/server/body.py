"""What an agent's push body may be: gzip or identity, bounded in size before and after
decompression (413), JSON (422). Read by the event loop, bounded as it arrives;
decompressed and parsed on the thread that stores the run."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Any

from app.agents.server.refusals import NotGzip, TooLarge, Unreadable

MAX_WIRE_BYTES = 4 << 20  # a push as sent (compressed)
MAX_RUN_BYTES = 32 << 20  # and as read: 10,000 samples of a chatty run fit


@dataclass(frozen=True)
class Body:
    """A push's body as it arrives, with what its headers say of it."""

    chunks: AsyncIterable[bytes]
    length: str = ""  # Content-Length as sent
    encoding: str = "identity"  # Content-Encoding as sent


async def wire_body(body: Body) -> tuple[bytes, bool]:
    """The body as sent, and whether it is gzip."""
    if body.length.isdigit() and int(body.length) > MAX_WIRE_BYTES:
        raise too_large()
    data = bytearray()
    async for chunk in body.chunks:
        data += chunk
        if len(data) > MAX_WIRE_BYTES:
            raise too_large()
    encoding = body.encoding.strip().lower()
    if encoding not in ("gzip", "identity"):
        raise NotGzip("send gzip or identity")
    return bytes(data), encoding == "gzip"


def json_of(data: bytes, gzipped: bool) -> Any:
    """The body's JSON, decompressed first if ``gzipped``."""
    if gzipped:
        data = gunzip(data)
    elif len(data) > MAX_RUN_BYTES:
        raise too_large()
    try:
        return json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError too
        raise Unreadable("the body is not JSON") from exc
    except RecursionError as exc:  # a few bytes of '[' nest deeper than any run does
        raise Unreadable("the body's JSON is nested too deep") from exc


def gunzip(data: bytes) -> bytes:
    # Bounded: a small bomb must not become gigabytes here.
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(data, MAX_RUN_BYTES + 1)
    except zlib.error as exc:
        raise Unreadable("the body is not gzip") from exc
    if len(out) > MAX_RUN_BYTES or inflate.unconsumed_tail:
        raise too_large()
    if not inflate.eof:
        raise Unreadable("the gzip body is cut short")
    return out


def too_large() -> TooLarge:
    return TooLarge(f"at most {MAX_WIRE_BYTES} bytes sent, {MAX_RUN_BYTES} read")
