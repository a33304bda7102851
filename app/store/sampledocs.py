"""A run's samples as the JSON array PostgreSQL's run statement unpacks
(``jsonb_to_recordset``, ``app.store.ingest``): one element a sample, its JSON columns
packed (``app.store.samplepack``) a column at a time and given as bytea's text form."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.store.records import SampleRecord
from app.store.samplepack import COLUMNS as PACKED
from app.store.samplepack import pack_many


def sample_documents(samples: Sequence[SampleRecord]) -> list[dict[str, Any]]:
    """The samples as elements of the JSON array the run statement unpacks, their JSON
    columns packed a column at a time (``pack_many``)."""
    for sample in samples:
        _check_document(sample)
    packed = [[_hex(p) for p in pack_many(name, [getattr(s, name) for s in samples])]
              for name in PACKED]  # fmt: skip
    return [
        sample_fields(sample) | dict(zip(PACKED, documents, strict=True))
        for sample, *documents in zip(samples, *packed, strict=True)
    ]


def _check_document(sample: SampleRecord) -> None:
    # What UTCDateTime checks for every other write; inside JSON a naive time would be
    # read in the server's time zone. Non-finite totals have no JSON form.
    if sample.started_at.tzinfo is None:
        raise ValueError("naive datetime: phasewatch stores aware UTC times only")
    if not math.isfinite(sample.total_ms):
        raise ValueError(f"sample {sample.idx}: total_ms {sample.total_ms} is not a number")


def _hex(packed: bytes) -> str:
    """bytea's text form, which jsonb_to_recordset reads a bytea column's value from."""
    return "\\x" + packed.hex()


def sample_fields(sample: SampleRecord) -> dict[str, Any]:
    return {
        "idx": sample.idx,
        "started_at": sample.started_at,
        "status": sample.status,
        "error_class": sample.error_class,
        "error": sample.error,
        "http_status": sample.http_status,
        "total_ms": sample.total_ms,
        "phases": sample.phases,
        "provenance": sample.provenance,
        "marks": sample.marks,
        "details": sample.details,
    }
