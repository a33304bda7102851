"""What an agent's push body may be: gzip or identity, bounded in size before and after
decompression (413), JSON (422). Read by the event loop, bounded as it arrives;
decompressed and parsed on the thread that stores the run."""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Any

import orjson

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
    if not _long_digits(data):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # what only the json module reads (NaN, other encodings): it decides
    try:
        return json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError too
        raise Unreadable("the body is not JSON") from exc
    except RecursionError as exc:  # a few bytes of '[' nest deeper than any run does
        raise Unreadable("the body's JSON is nested too deep") from exc


# orjson reads an integer past 64 bits as a float, where the json module keeps it whole:
# text holding 19 digits in a row (-2**63 - 1 has 19) goes to the json module (a run's
# numbers have at most 17). Found by one translate and one search: ~12 us for a 20-sample
# run, where a regular expression took 150.
_DIGITS = bytes(ord("0") if chr(byte).isdigit() and byte < 128 else ord(".") for byte in range(256))
_NINETEEN = b"0" * 19


def _long_digits(data: bytes) -> bool:
    return _NINETEEN in data.translate(_DIGITS)


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
