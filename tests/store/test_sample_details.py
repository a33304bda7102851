"""A stored sample's details are what the probe's JSON says of those keys, built alone."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from app.probe.cadence import StreamStats
from app.probe.sample import Marks, Provenance, Sample, Status, Tokens
from app.store.records import DETAIL_KEYS, SampleRecord

AT = datetime(2026, 12, 7, 7, 0, tzinfo=UTC)


def _sample(**changes: object) -> Sample:
    marks = Marks(connect_start=0, connect_end=900, request_start=950, first_byte=5_000)
    base = Sample(0, AT, Status.OK, 5.0, {"server": 4.0}, {"server": Provenance.MEASURED}, marks)
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


SAMPLES = [
    _sample(),
    _sample(
        http_status=200,
        http_version="HTTP/2",
        connection_reused=True,
        cold_start=True,
        remote_address="127.0.0.1",
        address_family="ipv4",
        connect_split={"dns": 0.123456, "tcp": 0.5},
        request_id="r-1",
        rtt_ms=0.4,
        tokens=Tokens(prompt=3, completion=None, reasoning=7),
        unsplit=("queue", "prefill"),
        flags=("server_timing_ignored",),
        traceparent="00-aa-bb-01",
    ),
    _sample(status=Status.ERROR, error_class="ConnectError", error="refused", marks=Marks()),
    _sample(stream=StreamStats(3, 1, 4, {"p50": 1.23456}, 2.5, 3.0, 2)),
]


@pytest.mark.parametrize("sample", SAMPLES)
def test_stored_details_are_the_probe_jsons_values_of_those_keys(sample: Sample) -> None:
    as_json = sample.to_json()
    stored = SampleRecord.from_sample(sample)
    assert stored.details == {key: as_json[key] for key in DETAIL_KEYS}
    assert list(stored.details) == list(DETAIL_KEYS)
    assert stored.marks == as_json["marks_ns"]


@pytest.mark.parametrize("sample", SAMPLES)
def test_marks_and_tokens_as_dicts_are_dataclasses_asdict(sample: Sample) -> None:
    marks = {k: v for k, v in dataclasses.asdict(sample.marks).items() if v is not None}
    assert list(sample.marks.as_dict().items()) == list(marks.items())
    assert sample.tokens.as_dict() == dataclasses.asdict(sample.tokens)
