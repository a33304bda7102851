"""A sample's JSON columns (phases, provenance, marks, details) as stored: packed.

As JSONB a sample's four documents took four fifths of its row (bench/README.md, "Storage
size"), most of it the same key names in every row. Packed, a document is a version byte
then its JSON text with each of its column's known tokens (key names, frequent values)
replaced by one control byte. JSON never holds a raw control byte (inside strings they are
escaped), so unpacking puts every token back exactly and the text parses to the value that
was packed: the same keys, values and order. A token left out of the book costs only size.

The books are frozen per version: a stored document names its version, and a new book is
a new version beside this one (migration 0012 holds a copy of version 1: the two are held
together by tests/store/test_samplepack.py). The database can still read a packed column
as JSON (``as_json``): the CSV export asks it which columns a file needs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import orjson
from sqlalchemy import JSON, Dialect, LargeBinary, TypeDecorator, cast, func, type_coerce
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import QueryableAttribute
from sqlalchemy.sql.elements import ColumnElement

VERSION = 1
_PHASES = tuple(
    f'"{name}"'.encode()
    for name in ("connect", "network", "queue", "prefill", "generation", "transfer", "server")
)
_MARKS = (
    *("connect_start", "dns_end", "connect_end", "tls_start", "tls_end", "request_start"),
    *("redirect_end", "request_sent", "response_headers", "first_byte", "cut"),
    *("first_reasoning_token", "last_reasoning_token", "first_answer_token"),
    *("last_answer_token", "stream_end"),
)
_DETAILS = (
    *("http_version", "connection_reused", "cold_start", "remote_address"),
    *("address_family", "connect_split", "request_id", "rtt_ms", "tokens"),
    *("server_timing", "unsplit", "flags", "traceparent", "stream", "prompt"),
    *("completion", "reasoning", "dns", "tcp", "tls", "goodput", "llm"),
)

# Version 1's books, by column: at most 31 tokens each (the bytes 1 to 31), none holding
# another's code. Longer tokens first where one is inside another (none is, today).
BOOKS: dict[str, tuple[bytes, ...]] = {
    "phases": _PHASES,
    "provenance": (*_PHASES, b'"measured"', b'"estimated"'),
    "marks": tuple(f'"{name}"'.encode() for name in _MARKS),
    "details": (
        *(f'"{name}"'.encode() for name in _DETAILS),
        *(b"null", b"false", b"true", b'"HTTP/1.1"', b'"HTTP/2"', b'"usage.', b"[]"),
    ),
}
COLUMNS = tuple(BOOKS)
_CODES = [bytes((code,)) for code in range(1, 32)]
_HEAD = bytes((VERSION,))
_PAIRS = {column: tuple(zip(book, _CODES, strict=False)) for column, book in BOOKS.items()}
_UNPAIRS = {
    column: tuple((code, token) for token, code in pairs) for column, pairs in _PAIRS.items()
}
_PACKED_PROVENANCE: dict[bytes, bytes] = {}
_PROVENANCE_KEPT = 4096


class SamplePackError(ValueError):
    """A stored document this code cannot read (another version, or not packed at all)."""


# As the engines' JSON serializer (app.store.db): integer keys become strings, numpy values
# numbers.
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def pack(column: str, value: Any) -> bytes:
    """``value`` as ``column`` stores it."""
    text = orjson.dumps(value, option=_OPTIONS)
    if column == "provenance":  # a target's samples mostly share one: packed once
        found = _PACKED_PROVENANCE.get(text)
        if found is None:
            if len(_PACKED_PROVENANCE) >= _PROVENANCE_KEPT:
                _PACKED_PROVENANCE.clear()
            found = _PACKED_PROVENANCE[text] = _HEAD + _replaced(text, _PAIRS[column])
        return found
    return _HEAD + _replaced(text, _PAIRS[column])


# Between documents packed together: JSON text never holds a raw NUL (control bytes in
# strings are escaped), and no book's code is one, so no token is found across it.
_SEPARATOR = b"\x00"


def pack_many(column: str, values: Sequence[Any]) -> list[bytes]:
    """``[pack(column, value) for value in values]``, each token of the book replaced once
    over all of them: a run's samples' documents cost one pass of the book, not one each."""
    if column == "provenance" or len(values) < 2:  # provenance: packed once per text anyway
        return [pack(column, value) for value in values]
    texts = [orjson.dumps(value, option=_OPTIONS) for value in values]
    joined = _replaced(_SEPARATOR.join(texts), _PAIRS[column])
    return [_HEAD + text for text in joined.split(_SEPARATOR)]


def _replaced(text: bytes, pairs: tuple[tuple[bytes, bytes], ...]) -> bytes:
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def unpack(column: str, data: bytes | memoryview) -> Any:
    """What ``pack(column, value)`` was given (a value as JSON parses it)."""
    text = json_text(column, bytes(data)) or "null"
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN, which the json module wrote into older rows
        return json.loads(text)


class Packed(TypeDecorator[Any]):
    """A JSON value stored packed (``pack``): a dict in, the same dict out."""

    impl = LargeBinary
    cache_ok = True

    def __init__(self, column: str) -> None:
        super().__init__()
        self.column = column

    def process_bind_param(self, value: Any, dialect: Dialect) -> bytes | None:
        return None if value is None else pack(self.column, value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> Any:
        return None if value is None else unpack(self.column, value)


def json_text(column: str, data: bytes | None) -> str | None:
    """``data`` unpacked to its JSON text: SQLite's ``samplepack_json(column, data)``
    (``app.store.db`` registers it on every connection)."""
    if data is None:
        return None
    if data[:1] != _HEAD:
        raise SamplePackError(f"{column}: stored in an unknown form (first byte {data[:1]!r})")
    return _replaced(data[1:], _UNPAIRS[column]).decode()


def as_json(
    packed: ColumnElement[Any] | QueryableAttribute[Any], column: str, dialect: str
) -> ColumnElement[Any]:
    """``packed`` read back as JSON by the database, for its JSON functions: JSONB on
    PostgreSQL; on SQLite JSON text (its parser refuses as many nested calls as a book has
    tokens, so there a function of ours unpacks)."""
    if dialect != "postgresql":
        return type_coerce(func.samplepack_json(column, packed), JSON)
    text: ColumnElement[Any] = func.convert_from(func.substr(packed, 2), "UTF8")
    for code, token in enumerate(BOOKS[column], start=1):
        text = func.replace(text, func.chr(code), token.decode())
    return cast(text, JSONB)
