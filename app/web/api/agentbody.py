"""What an agent's push body may be: gzip or identity, bounded in size before and after
decompression (413), JSON (422). Read off the event loop's hands: decompressing and
parsing happen on the thread that stores the run."""

from __future__ import annotations

import json
import zlib
from typing import Any

from fastapi import HTTPException, Request, status

MAX_WIRE_BYTES = 4 << 20  # a push as sent (compressed)
MAX_RUN_BYTES = 32 << 20  # and as read: 10,000 samples of a chatty run fit


async def wire_body(request: Request) -> tuple[bytes, bool]:
    """The body as sent, and whether it is gzip."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_WIRE_BYTES:
        raise too_large()
    data = bytearray()
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_WIRE_BYTES:
            raise too_large()
    encoding = request.headers.get("content-encoding", "identity").strip().lower()
    if encoding not in ("gzip", "identity"):
        raise HTTPException(status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "send gzip or identity")
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
        raise invalid("the body is not JSON") from exc


def gunzip(data: bytes) -> bytes:
    # Bounded: a small bomb must not become gigabytes here.
    inflate = zlib.decompressobj(wbits=31)
    try:
        out = inflate.decompress(data, MAX_RUN_BYTES + 1)
    except zlib.error as exc:
        raise invalid("the body is not gzip") from exc
    if len(out) > MAX_RUN_BYTES or inflate.unconsumed_tail:
        raise too_large()
    if not inflate.eof:
        raise invalid("the gzip body is cut short")
    return out


def invalid(why: str) -> HTTPException:
    return HTTPException(422, why)


def too_large() -> HTTPException:
    limits = f"{MAX_WIRE_BYTES} bytes sent, {MAX_RUN_BYTES} read"
    return HTTPException(413, f"at most {limits}")
