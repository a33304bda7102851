"""Marks -> phases, table-driven: every row is a request the probe could have recorded."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.probe.phases import http_phases, llm_phases
from app.probe.sample import Marks, ServerTiming

MS = 1_000_000


def marks(**ms: float) -> Marks:
    return Marks(**{name: int(value * MS) for name, value in ms.items()})


@dataclass
class Case:
    name: str
    marks: Marks
    end_ms: float
    expected: dict[str, float]
    provenance: dict[str, str] = field(default_factory=dict)
    server: ServerTiming = field(default_factory=ServerTiming)
    rtt_ms: float | None = None
    streaming: bool = True
    unsplit: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()


STREAMED = {"request_start": 1, "response_headers": 150, "first_answer_token": 300}
LLM_CASES = [
    Case(
        "server reports queue and prefill: network is what is left of the first token",
        marks(**STREAMED, last_answer_token=400, stream_end=401),
        401,
        {
            "connect": 1,
            "network": 129,
            "queue": 150,
            "prefill": 20,
            "generation": 100,
            "transfer": 1,
        },
        {"connect": "measured", "network": "measured", "queue": "server", "prefill": "server"},
        server=ServerTiming(queue_ms=150, prefill_ms=20, raw={"usage.queue_time": 150}),
    ),
    Case(
        "no server timing: network is the round trip, queue holds the rest unsplit",
        marks(**STREAMED, last_answer_token=400, stream_end=401),
        401,
        {
            "connect": 1,
            "network": 100,
            "queue": 199,
            "prefill": 0,
            "generation": 100,
            "transfer": 1,
        },
        {"network": "estimated", "queue": "estimated", "prefill": "estimated"},
        rtt_ms=100,
        unsplit=("queue", "prefill"),
    ),
    Case(
        "reasoning tokens count as generation, from the first token of either kind",
        marks(
            request_start=1,
            first_reasoning_token=200,
            last_reasoning_token=290,
            first_answer_token=300,
            last_answer_token=400,
            stream_end=402,
        ),
        402,
        {
            "connect": 1,
            "network": 29,
            "queue": 150,
            "prefill": 20,
            "generation": 200,
            "transfer": 2,
        },
        server=ServerTiming(queue_ms=150, prefill_ms=20, raw={"x": 1}),
    ),
    Case(
        "deadline before the first token: the head holds everything after connect",
        marks(request_start=1, request_sent=1.2, response_headers=150),
        1500,
        {"connect": 1, "network": 100, "queue": 1399, "prefill": 0, "generation": 0, "transfer": 0},
        rtt_ms=100,
        unsplit=("queue", "prefill"),
    ),
    Case(
        "deadline during generation: generation runs on to the cut",
        marks(**STREAMED, last_answer_token=1400),
        1500,
        {
            "connect": 1,
            "network": 100,
            "queue": 199,
            "prefill": 0,
            "generation": 1200,
            "transfer": 0,
        },
        rtt_ms=100,
        unsplit=("queue", "prefill"),
    ),
    Case(
        "server time larger than measured: scaled into the head, network zero",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 0, "queue": 249.166667, "prefill": 49.833333, "generation": 100},
        server=ServerTiming(queue_ms=250, prefill_ms=50, raw={"x": 1}),
        flags=("server_timing_clamped",),
    ),
    Case(
        "openai-processing-ms: network is time to headers minus processing",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 109, "queue": 190, "prefill": 0, "generation": 100},
        {"network": "measured", "queue": "estimated"},
        server=ServerTiming(processing_ms=40, raw={"openai-processing-ms": 40}),
        rtt_ms=60,
        unsplit=("queue", "prefill"),
    ),
    Case(
        "processing 0 is no account of the server's work: the round trip, not all the head",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 3, "queue": 296, "prefill": 0, "generation": 100},
        {"network": "estimated", "queue": "estimated"},
        server=ServerTiming(processing_ms=0, raw={"openai-processing-ms": 0}),
        rtt_ms=3,
        unsplit=("queue", "prefill"),
        flags=("server_timing_ignored",),
    ),
    Case(
        "processing leaving far more network than two round trips left work out: ignored",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 3, "queue": 296, "prefill": 0, "generation": 100},
        {"network": "estimated"},
        server=ServerTiming(processing_ms=40, raw={"openai-processing-ms": 40}),
        rtt_ms=3,  # 149 ms to the headers, 40 accounted for: 109 ms is no 3 ms round trip
        unsplit=("queue", "prefill"),
        flags=("server_timing_ignored",),
    ),
    Case(
        "processing within two round trips and the header's 1 ms resolution is believed",
        marks(request_start=1, response_headers=11, first_answer_token=300, stream_end=400),
        400,
        {"connect": 1, "network": 3, "queue": 296},
        {"network": "measured"},
        server=ServerTiming(processing_ms=7, raw={"openai-processing-ms": 7}),
        rtt_ms=1,
        unsplit=("queue", "prefill"),
    ),
    Case(
        "processing longer than the time to headers: network 0, flagged clamped",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 0, "queue": 299},
        {"network": "measured"},
        server=ServerTiming(processing_ms=160, raw={"openai-processing-ms": 160}),
        rtt_ms=3,
        unsplit=("queue", "prefill"),
        flags=("server_timing_clamped",),
    ),
    Case(
        "only queue reported: prefill is the rest after the round trip",
        marks(**STREAMED, last_answer_token=400, stream_end=400),
        400,
        {"connect": 1, "network": 100, "queue": 150, "prefill": 49, "generation": 100},
        {"queue": "server", "prefill": "estimated", "network": "estimated"},
        server=ServerTiming(queue_ms=150, raw={"x-queue-time": 150}),
        rtt_ms=100,
    ),
    Case(
        "non-streaming with server timing: generation comes out of the wait for the body",
        marks(request_start=1, response_headers=500, first_byte=500, stream_end=501),
        501,
        {
            "connect": 1,
            "network": 79,
            "queue": 100,
            "prefill": 20,
            "generation": 300,
            "transfer": 1,
        },
        {"generation": "server"},
        server=ServerTiming(queue_ms=100, prefill_ms=20, generation_ms=300, raw={"x": 1}),
        streaming=False,
    ),
    Case(
        "non-streaming without server timing: the server's time is one phase, server",
        marks(request_start=1, response_headers=500, first_byte=500, stream_end=501),
        501,
        {"connect": 1, "network": 100, "server": 399, "transfer": 1},
        {"network": "estimated", "server": "estimated"},
        rtt_ms=100,
        streaming=False,
    ),
    Case(
        "non-streaming with only its processing time: server is it, network the rest",
        marks(request_start=1, response_headers=401, first_byte=401, stream_end=402),
        402,
        {"connect": 1, "network": 17, "server": 383, "transfer": 1},
        {"network": "measured", "server": "server"},
        server=ServerTiming(processing_ms=383, raw={"openai-processing-ms": 383}),
        rtt_ms=10,
        streaming=False,
    ),
    Case(
        "non-streaming with processing 0: ignored, the round trip and server the rest",
        marks(request_start=1, response_headers=401, first_byte=401, stream_end=402),
        402,
        {"connect": 1, "network": 10, "server": 390, "transfer": 1},
        {"network": "estimated", "server": "estimated"},
        server=ServerTiming(processing_ms=0, raw={"openai-processing-ms": 0}),
        rtt_ms=10,
        streaming=False,
        flags=("server_timing_ignored",),
    ),
    Case(
        "failed while connecting: the whole time is connect",
        marks(connect_start=0.1, connect_end=0.3, tls_start=0.3),
        30,
        {"connect": 30, "network": 0, "queue": 0, "prefill": 0, "generation": 0, "transfer": 0},
        rtt_ms=100,
        unsplit=("queue", "prefill"),
    ),
]


STREAMED_ANSWER = ["connect", "network", "queue", "prefill", "generation", "transfer"]
WHOLE_ANSWER = ["connect", "network", "server", "transfer"]


@pytest.mark.parametrize("case", LLM_CASES, ids=lambda c: c.name)
def test_llm_phases(case: Case) -> None:
    result = llm_phases(
        case.marks, int(case.end_ms * MS), case.server, case.rtt_ms, streaming=case.streaming
    )
    whole = "server" in case.expected
    assert list(result.phases) == (WHOLE_ANSWER if whole else STREAMED_ANSWER)
    for name, expected in case.expected.items():
        assert result.phases[name] == pytest.approx(expected, abs=1e-6), name
    for name, provenance in case.provenance.items():
        assert result.provenance[name] == provenance, name
    assert result.unsplit == case.unsplit
    assert result.flags == case.flags
    assert abs(sum(result.phases.values()) - case.end_ms) < 0.01


HTTP_CASES = [
    Case(
        "server timing: network is time to headers minus the server's time",
        marks(request_start=2, response_headers=122, first_byte=122, stream_end=130),
        130,
        {"connect": 2, "network": 100, "server": 20, "transfer": 8},
        {"network": "measured", "server": "server", "transfer": "measured"},
        server=ServerTiming(processing_ms=20, raw={"server-timing:app": 20}),
    ),
    Case(
        "no server timing: the round trip estimate, the server holds the rest",
        marks(request_start=2, response_headers=122, first_byte=122, stream_end=130),
        130,
        {"connect": 2, "network": 5, "server": 115, "transfer": 8},
        {"network": "estimated", "server": "estimated"},
        rtt_ms=5,
    ),
    Case(
        "Server-Timing total;dur=0 is ignored: the round trip, the server holds the rest",
        marks(request_start=2, response_headers=122, first_byte=122, stream_end=130),
        130,
        {"connect": 2, "network": 5, "server": 115, "transfer": 8},
        {"network": "estimated", "server": "estimated"},
        server=ServerTiming(processing_ms=0, raw={"server-timing:total": 0}),
        rtt_ms=5,
        flags=("server_timing_ignored",),
    ),
    Case(
        "Server-Timing longer than the time to headers: scaled to fit, flagged",
        marks(request_start=2, response_headers=122, first_byte=122, stream_end=130),
        130,
        {"connect": 2, "network": 0, "server": 120, "transfer": 8},
        {"network": "measured", "server": "server"},
        server=ServerTiming(processing_ms=125, raw={"server-timing:total": 125}),
        rtt_ms=5,
        flags=("server_timing_clamped",),
    ),
    Case(
        "redirected: server is the final server's processing plus every hop before it",
        marks(request_start=2, redirect_end=40, response_headers=52, stream_end=60),
        60,
        {"connect": 2, "network": 2, "server": 48, "transfer": 8},
        {"network": "measured", "server": "server"},
        server=ServerTiming(processing_ms=10, raw={"server-timing:total": 10}),
        rtt_ms=1,  # 12 ms from the final request to its headers, 10 accounted for
    ),
    Case(
        "redirected, nothing reported: the round trip no longer than the final request",
        marks(request_start=2, redirect_end=40, response_headers=42, stream_end=50),
        50,
        {"connect": 2, "network": 2, "server": 38, "transfer": 8},
        {"network": "estimated", "server": "estimated"},
        rtt_ms=5,
    ),
    Case(
        "queue and prefill reported to a plain HTTP target add up to server time",
        marks(request_start=2, response_headers=122, stream_end=130),
        130,
        {"connect": 2, "network": 90, "server": 30, "transfer": 8},
        server=ServerTiming(queue_ms=10, prefill_ms=20, raw={"x": 1}),
    ),
]


@pytest.mark.parametrize("case", HTTP_CASES, ids=lambda c: c.name)
def test_http_phases(case: Case) -> None:
    result = http_phases(case.marks, int(case.end_ms * MS), case.server, case.rtt_ms)
    assert list(result.phases) == ["connect", "network", "server", "transfer"]
    for name, expected in case.expected.items():
        assert result.phases[name] == pytest.approx(expected, abs=1e-6), name
    for name, provenance in case.provenance.items():
        assert result.provenance[name] == provenance, name
    assert result.flags == case.flags
    assert abs(sum(result.phases.values()) - case.end_ms) < 0.01
