"""Server-Timing and vendor timing headers, usage blocks: tables of what servers send."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.probe.sample import ServerTiming, Tokens
from app.probe.servertiming import (
    DEFAULT_SERVER_TIMING_MAP,
    PHASES,
    ServerTimingMetric,
    parse_server_timing,
    timing_from_headers,
    timing_from_usage,
    tokens_from_usage,
)

M = ServerTimingMetric

SERVER_TIMING_VALUES: list[tuple[str, str, list[ServerTimingMetric]]] = [
    # (what it shows, header value, metrics)
    ("empty", "", []),
    ("name only", "miss", [M("miss", None, None)]),
    (
        "several metrics",
        "cache;desc=hit, db;dur=53, app;dur=47.2",
        [M("cache", None, "hit"), M("db", 53.0, None), M("app", 47.2, None)],
    ),
    (
        "comma inside quotes",
        'total;dur=123.4;desc="Total, incl. queue"',
        [M("total", 123.4, "Total, incl. queue")],
    ),
    (
        "semicolon and equals inside quotes",
        'q;desc="a;b=c";dur=1',
        [M("q", 1.0, "a;b=c")],
    ),
    ("escaped quote", r'db;desc="say \"hi\", ok";dur=3', [M("db", 3.0, 'say "hi", ok')]),
    ("uppercase DUR", "queue;DUR=12", [M("queue", 12.0, None)]),
    ("name case kept", "Queue;dur=12", [M("Queue", 12.0, None)]),
    ("whitespace around everything", " queue ; dur = 12 ;\tdesc = x ", [M("queue", 12.0, "x")]),
    ("quoted dur", 'prefill;dur="7.5"', [M("prefill", 7.5, None)]),
    ("exponent dur", "prefill;dur=1.5e2", [M("prefill", 150.0, None)]),
    ("integer dur", "prefill;dur=0", [M("prefill", 0.0, None)]),
    ("first dur wins", "a;dur=1;dur=2", [M("a", 1.0, None)]),
    ("dur without value", "a;dur", [M("a", None, None)]),
    ("empty dur", "a;dur=", [M("a", None, None)]),
    ("text dur", "a;dur=abc", [M("a", None, None)]),
    ("negative dur", "a;dur=-1", [M("a", None, None)]),
    ("nan dur", "a;dur=nan", [M("a", None, None)]),
    ("infinite dur", "a;dur=inf, b;dur=1e999", [M("a", None, None), M("b", None, None)]),
    ("underscored dur", "a;dur=1_000", [M("a", None, None)]),
    ("two dots", "a;dur=1.2.3", [M("a", None, None)]),
    ("unknown params ignored", "a;foo=bar;dur=4", [M("a", 4.0, None)]),
    ("empty entries skipped", ",, a;dur=1 ,", [M("a", 1.0, None)]),
    ("quoted name skipped", '"quoted";dur=1, ok;dur=2', [M("ok", 2.0, None)]),
    ("non-token name skipped", "café;dur=1, bad name;dur=2, ok;dur=3", [M("ok", 3.0, None)]),
    ("missing name skipped", ";dur=5, =5, ok", [M("ok", None, None)]),
    (
        "unterminated quote runs to the end",
        'a;desc="open, b;dur=1',
        [M("a", None, "open, b;dur=1")],
    ),
    (
        "Cloudflare",
        'cfL4;desc="?proto=TCP&rtt=1234&min_rtt=900", cfRequestDuration;dur=48.999881',
        [
            M("cfL4", None, "?proto=TCP&rtt=1234&min_rtt=900"),
            M("cfRequestDuration", 48.999881, None),
        ],
    ),
    (
        "Akamai",
        "cdn-cache; desc=MISS, edge; dur=12, origin; dur=345",
        [M("cdn-cache", None, "MISS"), M("edge", 12.0, None), M("origin", 345.0, None)],
    ),
]


@pytest.mark.parametrize(
    ("value", "expected"),
    [case[1:] for case in SERVER_TIMING_VALUES],
    ids=[case[0] for case in SERVER_TIMING_VALUES],
)
def test_server_timing_header_parses_to_metrics(
    value: str, expected: list[ServerTimingMetric]
) -> None:
    assert parse_server_timing(value) == expected


HEADER_CASES: list[tuple[str, list[tuple[str, str]], dict[str, str], ServerTiming]] = [
    # (what it shows, response headers, mapping, timing)
    ("no timing headers", [("content-type", "text/event-stream")], {}, ServerTiming()),
    (
        "mapped and unmapped metrics",
        [("server-timing", "queue;dur=12.5, prefill;dur=40, db;dur=3, cache;desc=hit")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(
            queue_ms=12.5,
            prefill_ms=40.0,
            raw={
                "server-timing:queue": 12.5,
                "server-timing:prefill": 40.0,
                "server-timing:db": 3.0,
            },
        ),
    ),
    (
        "several header lines",
        [("Server-Timing", "queue;dur=5"), ("server-timing", "total;dur=80")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(
            queue_ms=5.0,
            processing_ms=80.0,
            raw={"server-timing:queue": 5.0, "server-timing:total": 80.0},
        ),
    ),
    (
        "metric names matched in any case",
        [("server-timing", "Queue_Time;dur=5, DECODE;dur=9")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(
            queue_ms=5.0,
            generation_ms=9.0,
            raw={"server-timing:queue_time": 5.0, "server-timing:decode": 9.0},
        ),
    ),
    (
        "first metric for a phase wins",
        [("server-timing", "queue;dur=5, wait;dur=7, queue;dur=9")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(queue_ms=5.0, raw={"server-timing:queue": 5.0, "server-timing:wait": 7.0}),
    ),
    (
        "custom mapping with mixed-case keys",
        [("server-timing", "sched;dur=4, fwd;dur=30, queue;dur=1")],
        {"Sched": "queue", "FWD": "prefill"},
        ServerTiming(
            queue_ms=4.0,
            prefill_ms=30.0,
            raw={
                "server-timing:sched": 4.0,
                "server-timing:fwd": 30.0,
                "server-timing:queue": 1.0,
            },
        ),
    ),
    (
        "mapping to something not a phase is raw only",
        [("server-timing", "total;dur=4")],
        {"total": "everything"},
        ServerTiming(raw={"server-timing:total": 4.0}),
    ),
    (
        "OpenAI processing time",
        [("openai-processing-ms", "523")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(processing_ms=523.0, raw={"openai-processing-ms": 523.0}),
    ),
    (
        "Server-Timing beats openai-processing-ms",
        [("server-timing", "total;dur=500"), ("openai-processing-ms", "523")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(
            processing_ms=500.0,
            raw={"server-timing:total": 500.0, "openai-processing-ms": 523.0},
        ),
    ),
    (
        "TGI: total time is processing, inference time stays raw",
        [
            ("x-compute-type", "gpu+optimized"),
            ("x-compute-time", "0.853"),
            ("x-compute-characters", "120"),
            ("x-total-time", "853"),
            ("x-validation-time", "1"),
            ("x-queue-time", "110"),
            ("x-inference-time", "742"),
            ("x-time-per-token", "24"),
            ("x-prompt-tokens", "31"),
            ("x-generated-tokens", "30"),
        ],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(
            queue_ms=110.0,
            processing_ms=853.0,
            raw={
                "x-total-time": 853.0,
                "x-validation-time": 1.0,
                "x-queue-time": 110.0,
                "x-inference-time": 742.0,
                "x-time-per-token": 24.0,
            },
        ),
    ),
    (
        "Envoy upstream time",
        [("x-envoy-upstream-service-time", "230")],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(processing_ms=230.0, raw={"x-envoy-upstream-service-time": 230.0}),
    ),
    (
        "numbers that do not parse are ignored",
        [
            ("openai-processing-ms", "fast"),
            ("x-queue-time", "-3"),
            ("x-total-time", "NaN"),
            ("server-timing", "queue;dur=soon"),
        ],
        DEFAULT_SERVER_TIMING_MAP,
        ServerTiming(),
    ),
]


@pytest.mark.parametrize(
    ("headers", "mapping", "expected"),
    [case[1:] for case in HEADER_CASES],
    ids=[case[0] for case in HEADER_CASES],
)
def test_timing_from_headers(
    headers: list[tuple[str, str]], mapping: dict[str, str], expected: ServerTiming
) -> None:
    assert timing_from_headers(httpx.Headers(headers), mapping) == expected


GROQ_USAGE = {
    "queue_time": 0.5,
    "prompt_tokens": 36,
    "prompt_time": 0.25,
    "completion_tokens": 3,
    "completion_time": 0.125,
    "total_time": 0.375,
}
GROQ_TIMING = ServerTiming(
    queue_ms=500.0,
    prefill_ms=250.0,
    generation_ms=125.0,
    raw={
        "usage.queue_time": 500.0,
        "usage.prompt_time": 250.0,
        "usage.completion_time": 125.0,
        "usage.total_time": 375.0,
    },
)

USAGE_TIMING_CASES: list[tuple[str, dict[str, Any], ServerTiming]] = [
    # (what it shows, payload, timing)
    ("nothing", {"choices": []}, ServerTiming()),
    ("OpenAI usage has no timing", {"usage": {"prompt_tokens": 5}}, ServerTiming()),
    ("null usage", {"usage": None, "x_groq": None}, ServerTiming()),
    ("Groq top-level usage in seconds", {"usage": GROQ_USAGE}, GROQ_TIMING),
    ("Groq x_groq usage in seconds", {"x_groq": {"id": "req_1", "usage": GROQ_USAGE}}, GROQ_TIMING),
    (
        "top-level usage wins over x_groq",
        {"usage": GROQ_USAGE, "x_groq": {"usage": {**GROQ_USAGE, "queue_time": 9.0}}},
        GROQ_TIMING,
    ),
    (
        "llama.cpp timings in milliseconds",
        {
            "timings": {
                "prompt_n": 20,
                "prompt_ms": 31.25,
                "prompt_per_token_ms": 1.5625,
                "prompt_per_second": 640.0,
                "predicted_n": 2,
                "predicted_ms": 12.5,
                "predicted_per_token_ms": 6.25,
                "predicted_per_second": 160.0,
            }
        },
        ServerTiming(
            prefill_ms=31.25,
            generation_ms=12.5,
            raw={
                "timings.prompt_ms": 31.25,
                "timings.predicted_ms": 12.5,
                "timings.prompt_per_token_ms": 1.5625,
                "timings.predicted_per_token_ms": 6.25,
            },
        ),
    ),
    (
        "non-numbers ignored",
        {
            "usage": {"queue_time": "0.5", "prompt_time": True, "completion_time": None},
            "timings": {"prompt_ms": float("nan"), "predicted_ms": -1},
        },
        ServerTiming(),
    ),
    ("timings not an object", {"timings": [1, 2]}, ServerTiming()),
]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [case[1:] for case in USAGE_TIMING_CASES],
    ids=[case[0] for case in USAGE_TIMING_CASES],
)
def test_timing_from_usage(payload: dict[str, Any], expected: ServerTiming) -> None:
    assert timing_from_usage(payload) == expected


USAGE_TOKEN_CASES: list[tuple[str, dict[str, Any], Tokens]] = [
    # (what it shows, payload, tokens)
    ("nothing", {}, Tokens()),
    (
        "OpenAI with reasoning",
        {
            "usage": {
                "prompt_tokens": 19,
                "completion_tokens": 40,
                "total_tokens": 59,
                "completion_tokens_details": {"reasoning_tokens": 32},
            }
        },
        Tokens(prompt=19, completion=40, reasoning=32),
    ),
    (
        "Groq x_groq usage",
        {"x_groq": {"usage": GROQ_USAGE}},
        Tokens(prompt=36, completion=3),
    ),
    (
        "top-level usage wins over x_groq",
        {"usage": {"prompt_tokens": 1}, "x_groq": {"usage": GROQ_USAGE}},
        Tokens(prompt=1, completion=3),
    ),
    (
        "Anthropic message_start counts cached input, not the output placeholder",
        {
            "type": "message_start",
            "message": {
                "usage": {
                    "input_tokens": 42,
                    "cache_creation_input_tokens": 100,
                    "cache_read_input_tokens": 8,
                    "output_tokens": 1,
                }
            },
        },
        Tokens(prompt=150),
    ),
    (
        "Anthropic message_delta",
        {"type": "message_delta", "usage": {"output_tokens": 17}},
        Tokens(completion=17),
    ),
    (
        "Anthropic body usage",
        {"type": "message", "usage": {"input_tokens": 20, "output_tokens": 12}},
        Tokens(prompt=20, completion=12),
    ),
    (
        "Responses-style output details",
        {
            "usage": {
                "input_tokens": 10,
                "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 20},
            }
        },
        Tokens(prompt=10, completion=30, reasoning=20),
    ),
    (
        "whole floats accepted, the rest ignored",
        {"usage": {"prompt_tokens": 12.0, "completion_tokens": 2.5, "total_tokens": "14"}},
        Tokens(prompt=12),
    ),
    (
        "non-numbers ignored",
        {
            "usage": {
                "prompt_tokens": "19",
                "completion_tokens": True,
                "completion_tokens_details": None,
            }
        },
        Tokens(),
    ),
    ("negative counts ignored", {"usage": {"prompt_tokens": -1}}, Tokens()),
]


@pytest.mark.parametrize(
    ("payload", "expected"),
    [case[1:] for case in USAGE_TOKEN_CASES],
    ids=[case[0] for case in USAGE_TOKEN_CASES],
)
def test_tokens_from_usage(payload: dict[str, Any], expected: Tokens) -> None:
    assert tokens_from_usage(payload) == expected


def test_default_map_uses_lower_case_names_and_known_phases() -> None:
    assert all(name == name.lower() for name in DEFAULT_SERVER_TIMING_MAP)
    assert set(DEFAULT_SERVER_TIMING_MAP.values()) == PHASES


def test_ttft_is_not_taken_for_prefill() -> None:
    headers = httpx.Headers({"server-timing": "ttft;dur=300"})
    timing = timing_from_headers(headers, DEFAULT_SERVER_TIMING_MAP)
    assert timing.prefill_ms is None
    assert timing.raw == {"server-timing:ttft": 300.0}
