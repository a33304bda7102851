"""A stored run → metric points and span specs (pure), by the semantic conventions."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from app.config import Target
from app.export.facts import TargetFacts
from app.export.mapping import (
    DURATION,
    FIRST_CHUNK,
    HTTP_DURATION,
    PER_CHUNK,
    TOKEN_USAGE,
    error_type,
    points,
    spans,
)
from app.store.records import RunRecord, SampleRecord

T0 = datetime(2026, 3, 2, 12, 0, 0, 250_000, tzinfo=UTC)
T0_NS = 1_772_452_800_250_000_000
LLM_PHASES = {"connect": 2.0, "network": 8.0, "queue": 40.0, "prefill": 20.0, "generation": 100.0}
LLM_PHASES["transfer"] = 1.5
STREAM_MARKS = {"first_answer_token": 70_000_000, "last_answer_token": 170_000_000}
CHAT = Target(
    name="chat",
    kind="openai",
    url="https://llm.example.com/v1/chat/completions",
    body={"model": "qwen3-8b", "stream": True, "messages": []},
)
HEALTH = Target(name="health", url="http://10.0.0.7:8080/health")


def sample(**fields: Any) -> SampleRecord:
    defaults: dict[str, Any] = {
        "idx": 0,
        "started_at": T0,
        "status": "ok",
        "total_ms": sum(LLM_PHASES.values()),
        "phases": dict(LLM_PHASES),
        "marks": dict(STREAM_MARKS),
        "details": {"tokens": {"prompt": 12, "completion": 51}, "http_version": "HTTP/1.1"},
        "http_status": 200,
    }
    return SampleRecord(**(defaults | fields))


def run(*samples: SampleRecord, target: str = "chat") -> RunRecord:
    run_id = uuid.UUID(int=7)
    return RunRecord(run_id, target, "eu-1", T0, "complete", samples=samples)


def test_facts_take_the_model_from_the_body_and_the_port_from_the_scheme() -> None:
    chat, health = TargetFacts.of(CHAT), TargetFacts.of(HEALTH)
    assert (chat.provider, chat.operation, chat.model) == ("openai", "chat", "qwen3-8b")
    assert (chat.host, chat.port, chat.method, chat.llm) == ("llm.example.com", 443, "POST", True)
    assert (health.host, health.port, health.method, health.llm) == ("10.0.0.7", 8080, "GET", False)


def test_a_streamed_llm_sample_gives_duration_tokens_first_chunk_and_per_chunk() -> None:
    found = points(run(sample()), TargetFacts.of(CHAT))
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "qwen3-8b",
        "server.address": "llm.example.com",
        "server.port": 443,
        "phasewatch.target": "chat",
        "phasewatch.vantage": "eu-1",
    }
    assert [(p.instrument, p.attributes) for p in found] == [
        (DURATION, base),
        (TOKEN_USAGE, base | {"gen_ai.token.type": "input"}),
        (TOKEN_USAGE, base | {"gen_ai.token.type": "output"}),
        (FIRST_CHUNK, base),
        (PER_CHUNK, base),
    ]
    values = [p.value for p in found]
    assert values[:3] == [pytest.approx(0.1715), 12, 51]
    assert values[3] == pytest.approx(0.070)  # the first token, from time zero
    assert values[4] == pytest.approx(0.100 / 50)  # 100 ms over the 50 tokens after it


def test_a_whole_json_answer_has_no_chunk_times() -> None:
    found = points(run(sample(marks={})), TargetFacts.of(CHAT))
    assert [p.instrument for p in found] == [DURATION, TOKEN_USAGE, TOKEN_USAGE]


def test_an_answer_without_token_counts_has_no_usage_and_no_per_chunk_time() -> None:
    found = points(run(sample(details={})), TargetFacts.of(CHAT))
    assert [p.instrument for p in found] == [DURATION, FIRST_CHUNK]


def test_a_plain_http_sample_gives_http_client_request_duration() -> None:
    probe = sample(phases={"connect": 1.0, "network": 2.0, "server": 5.0, "transfer": 0.5})
    found = points(run(probe, target="health"), TargetFacts.of(HEALTH))
    assert [(p.instrument, p.attributes) for p in found] == [
        (
            HTTP_DURATION,
            {
                "server.address": "10.0.0.7",
                "server.port": 8080,
                "http.request.method": "GET",
                "http.response.status_code": 200,
                "network.protocol.version": "1.1",
                "phasewatch.target": "health",
                "phasewatch.vantage": "eu-1",
            },
        )
    ]


@pytest.mark.parametrize(
    ("status", "error_class", "http_status", "expected"),
    [
        ("ok", None, 200, None),
        ("http_error", "HTTP503", 503, "503"),
        ("deadline_exceeded", "DeadlineExceeded", None, "DeadlineExceeded"),
        ("timeout", "HardTimeout", None, "HardTimeout"),
        ("error", "ConnectError", None, "ConnectError"),
        ("error", None, None, "_OTHER"),
    ],
)
def test_error_type_is_the_status_code_or_the_error_class(
    status: str, error_class: str | None, http_status: int | None, expected: str | None
) -> None:
    probe = sample(status=status, error_class=error_class, http_status=http_status)
    assert error_type(probe) == expected
    attrs = points(run(probe), TargetFacts.of(CHAT))[0].attributes
    assert attrs.get("error.type") == expected


def ids() -> Any:
    counter = itertools.count(1)
    return lambda _bits: next(counter)


def test_a_sample_is_a_span_with_its_phases_as_children_end_to_end() -> None:
    shuffled = dict(reversed(list(LLM_PHASES.items())))  # time order comes from the kind
    found = spans(run(sample(phases=shuffled)), TargetFacts.of(CHAT), ids())
    root, children = found[0], found[1:]
    assert (root.name, root.parent_id, root.error) == ("chat qwen3-8b", None, None)
    assert (root.trace_id, root.span_id) == (1, 2)
    assert root.start_ns == T0_NS and root.end_ns == T0_NS + 171_500_000
    assert root.attributes["phasewatch.run.id"] == str(uuid.UUID(int=7))
    assert [c.name for c in children] == list(LLM_PHASES)
    assert {(c.trace_id, c.parent_id) for c in children} == {(1, 2)}
    assert children[0].start_ns == root.start_ns and children[-1].end_ns == root.end_ns
    assert all(a.end_ns == b.start_ns for a, b in itertools.pairwise(children))
    durations = {c.name: (c.end_ns - c.start_ns) / 1e6 for c in children}
    assert durations == pytest.approx(LLM_PHASES)


def test_a_sample_that_sent_a_traceparent_keeps_its_ids() -> None:
    header = f"00-{'ab' * 16}-{'cd' * 8}-01"
    probe = sample(details={"traceparent": header})
    root, *children = spans(run(probe), TargetFacts.of(CHAT), ids())
    assert (root.trace_id, root.span_id) == (int("ab" * 16, 16), int("cd" * 8, 16))
    assert {c.parent_id for c in children} == {root.span_id}


def test_a_failed_sample_span_carries_the_error_and_the_http_span_is_named_by_method() -> None:
    probe = sample(status="error", error_class="ConnectError", phases={"connect": 3.0})
    (root, child) = spans(run(probe, target="health"), TargetFacts.of(HEALTH), ids())
    assert (root.name, root.error) == ("GET", "ConnectError")
    assert root.attributes["phasewatch.sample.status"] == "error"
    assert child.end_ns == root.end_ns  # the last phase ends with the sample
