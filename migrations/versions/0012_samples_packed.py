"""samples: the four JSON columns (phases, provenance, marks, details) stored packed.

Packed (``app.store.samplepack``): a version byte, then the document's JSON text with its
column's known tokens (key names, frequent values) each replaced by one control byte; as
JSONB the four took four fifths of a sample's row, most of it key names repeated in every
row (bench/README.md, "Storage size"). Readers get the same dicts (the column type unpacks).

Converted in SQL on the server, both ways: PostgreSQL rewrites ``samples`` (every day's
partition) once, under an exclusive lock, about as long as writing the samples once more
(docs/deploy.md); SQLite updates every row and then rebuilds the table with BLOB columns
(the file keeps its size until a VACUUM). A document PostgreSQL packs here is JSONB's text
(a space after each colon and comma, keys in JSONB's order), one stored later orjson's: both
unpack to the same value.

Written without importing app code, as every migration here: ``BOOKS`` is a copy of
``app.store.samplepack.BOOKS`` at version 1 (tests/store/test_samplepack.py holds the two to
each other).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_PHASES = tuple(
    f'"{name}"'
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
BOOKS: dict[str, tuple[str, ...]] = {
    "phases": _PHASES,
    "provenance": (*_PHASES, '"measured"', '"estimated"'),
    "marks": tuple(f'"{name}"' for name in _MARKS),
    "details": (
        *(f'"{name}"' for name in _DETAILS),
        *("null", "false", "true", '"HTTP/1.1"', '"HTTP/2"', '"usage.', "[]"),
    ),
}


def _packed(column: str) -> str:
    """PostgreSQL packing ``column``'s JSON (``app.store.samplepack.pack`` in SQL)."""
    text = f"CAST({column} AS TEXT)"
    for code, token in enumerate(BOOKS[column], start=1):
        text = f"replace({text}, '{token}', chr({code}))"
    return f"'\\x01'::bytea || convert_to({text}, 'UTF8')"


def _unpacked(column: str) -> str:
    """PostgreSQL unpacking ``column`` to JSON text (``app.store.samplepack.json_sql``)."""
    text = f"convert_from(substring({column} FROM 2), 'UTF8')"
    for code, token in enumerate(BOOKS[column], start=1):
        text = f"replace({text}, chr({code}), '{token}')"
    return text


# SQLite's parser refuses ~30 nested calls: its replacements go a few at a time.
PASS = 8


def _replaced(column: str, book: tuple[str, ...], first: int, packing: bool) -> str:
    """SQLite: ``column`` with ``book[first : first + PASS]`` packed (or unpacked)."""
    text = f"CAST({column} AS TEXT)"
    for code, token in enumerate(book[first : first + PASS], start=first + 1):
        pair = (f"'{token}'", f"char({code})")
        text = (
            f"replace({text}, {pair[0] if packing else pair[1]}, {pair[1] if packing else pair[0]})"
        )
    return text


def upgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":  # one rewrite of every partition for the four
        changes = ", ".join(f"ALTER COLUMN {c} TYPE bytea USING {_packed(c)}" for c in BOOKS)
        op.execute(f"ALTER TABLE samples {changes}")
        return
    for column, book in BOOKS.items():
        for first in range(0, len(book), PASS):
            op.execute(f"UPDATE samples SET {column} = {_replaced(column, book, first, True)}")
        op.execute(f"UPDATE samples SET {column} = CAST(char(1) || {column} AS BLOB)")
    with op.batch_alter_table("samples") as batch:
        for column in BOOKS:
            batch.alter_column(column, existing_type=sa.JSON(), type_=sa.LargeBinary())


def downgrade() -> None:
    dialect = op.get_context().dialect.name
    if dialect == "postgresql":
        changes = ", ".join(
            f"ALTER COLUMN {c} TYPE jsonb USING CAST({_unpacked(c)} AS jsonb)" for c in BOOKS
        )
        op.execute(f"ALTER TABLE samples {changes}")
        return
    for column, book in BOOKS.items():
        op.execute(f"UPDATE samples SET {column} = CAST(substr({column}, 2) AS TEXT)")
        for first in range(0, len(book), PASS):
            op.execute(f"UPDATE samples SET {column} = {_replaced(column, book, first, False)}")
    with op.batch_alter_table("samples") as batch:
        for column in BOOKS:
            batch.alter_column(column, existing_type=sa.LargeBinary(), type_=sa.JSON())
