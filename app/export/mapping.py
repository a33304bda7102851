"""A stored run as OpenTelemetry data, pure: metric points by the semantic conventions
(GenAI for the LLM kinds, HTTP for ``kind: http``) and one span per sample with a child
per phase, laid end to end from the sample's start.

Follows the semantic conventions v1.41 (``docs/gen-ai/gen-ai-metrics.md``,
``docs/http/http-metrics.md``); where phasewatch's definitions differ, docs/integrations.md
says so. Every sample is a point, failed ones with ``error.type``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from app.export.facts import TargetFacts
from app.probe.kinds import KINDS
from app.probe.traceparent import parse
from app.store.records import RunRecord, SampleRecord

Attributes = dict[str, str | int]
# The conventions' advice for durations (GenAI: up to 82 s; HTTP: up to 10 s) and tokens.
GENAI_SECONDS = tuple(round(0.01 * 2**n, 2) for n in range(14))  # 0.01, 0.02 … 81.92
HTTP_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
TOKENS = tuple(float(4**n) for n in range(14))  # 1, 4, 16 … 67108864


@dataclass(frozen=True, slots=True)
class Instrument:
    unit: str
    description: str
    buckets: tuple[float, ...]


DURATION = "gen_ai.client.operation.duration"
FIRST_CHUNK = "gen_ai.client.operation.time_to_first_chunk"
PER_CHUNK = "gen_ai.client.operation.time_per_output_chunk"
TOKEN_USAGE = "gen_ai.client.token.usage"
HTTP_DURATION = "http.client.request.duration"
INSTRUMENTS = {
    DURATION: Instrument("s", "GenAI operation duration.", GENAI_SECONDS),
    FIRST_CHUNK: Instrument(
        "s", "Time to the first chunk that carried a token (streamed answers).", GENAI_SECONDS
    ),
    PER_CHUNK: Instrument(
        "s", "Mean time per output token after the first (streamed answers).", GENAI_SECONDS
    ),
    TOKEN_USAGE: Instrument("{token}", "Number of input and output tokens used.", TOKENS),
    HTTP_DURATION: Instrument("s", "Duration of HTTP client requests.", HTTP_SECONDS),
}


@dataclass(frozen=True, slots=True)
class Point:
    instrument: str  # a key of INSTRUMENTS
    value: float
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class SpanSpec:
    name: str
    trace_id: int
    span_id: int
    parent_id: int | None  # None: the sample's span, a trace's root
    start_ns: int  # Unix time
    end_ns: int
    attributes: Attributes
    error: str | None = None  # error.type of a failed sample: the span's status is ERROR


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NewId = Callable[[int], int]  # bits -> a random id of that many bits, never 0


def points(run: RunRecord, facts: TargetFacts) -> list[Point]:
    """One duration per sample; for the LLM kinds the token counts and, for streamed
    answers, the time to the first token and per output token."""
    found: list[Point] = []
    for sample in run.samples:
        found.extend(_sample_points(run, facts, sample))
    return found


def _sample_points(run: RunRecord, facts: TargetFacts, sample: SampleRecord) -> list[Point]:
    attrs = metric_attributes(run, facts, sample)
    seconds = sample.total_ms / 1000.0
    if not facts.llm:
        return [Point(HTTP_DURATION, seconds, attrs)]
    found = [Point(DURATION, seconds, attrs)]
    tokens = sample.details.get("tokens")
    tokens = tokens if isinstance(tokens, dict) else {}
    for kind, key in (("input", "prompt"), ("output", "completion")):
        if isinstance(tokens.get(key), int):
            found.append(Point(TOKEN_USAGE, tokens[key], {**attrs, "gen_ai.token.type": kind}))
    first, last = _token_marks(sample.marks)
    if first is not None:
        found.append(Point(FIRST_CHUNK, first / 1e9, attrs))
    output = tokens.get("completion")
    if first is not None and last is not None and isinstance(output, int) and output > 1:
        found.append(Point(PER_CHUNK, (last - first) / 1e9 / (output - 1), attrs))
    return found


def metric_attributes(run: RunRecord, facts: TargetFacts, sample: SampleRecord) -> Attributes:
    """The conventions' attributes, and the target and vantage (bounded: one per series)."""
    attrs: Attributes = {"server.address": facts.host, "server.port": facts.port}
    if facts.llm:
        attrs["gen_ai.operation.name"] = facts.operation
        attrs["gen_ai.provider.name"] = facts.provider
        if facts.model is not None:
            attrs["gen_ai.request.model"] = facts.model
    else:
        attrs["http.request.method"] = facts.method
        if sample.http_status is not None:
            attrs["http.response.status_code"] = sample.http_status
        version = _protocol_version(sample.details.get("http_version"))
        if version is not None:
            attrs["network.protocol.version"] = version
    error = error_type(sample)
    if error is not None:
        attrs["error.type"] = error
    attrs["phasewatch.target"] = run.target
    attrs["phasewatch.vantage"] = run.vantage
    return attrs


def error_type(sample: SampleRecord) -> str | None:
    """``error.type``: the status code of an HTTP error, as the conventions ask; else the
    probe's error class (an exception name: ``ConnectError``, ``DeadlineExceeded``)."""
    if sample.status == "ok":
        return None
    if sample.status == "http_error" and sample.http_status is not None:
        return str(sample.http_status)
    return sample.error_class or "_OTHER"


def spans(run: RunRecord, facts: TargetFacts, new_id: NewId) -> list[SpanSpec]:
    """Each sample's span (the ids of the ``traceparent`` it sent, if it sent one) and its
    phases' spans, children laid end to end that end with it."""
    found: list[SpanSpec] = []
    for sample in run.samples:
        found.extend(_sample_spans(run, facts, sample, new_id))
    return found


def _sample_spans(
    run: RunRecord, facts: TargetFacts, sample: SampleRecord, new_id: NewId
) -> list[SpanSpec]:
    trace_id, span_id = parse(sample.details.get("traceparent")) or (new_id(128), new_id(64))
    start = _unix_ns(sample.started_at)
    end = start + round(sample.total_ms * 1e6)
    attrs: Attributes = {
        **metric_attributes(run, facts, sample),
        "phasewatch.run.id": str(run.id),
        "phasewatch.sample.index": sample.idx,
        "phasewatch.sample.status": sample.status,
    }
    error = error_type(sample)
    root = SpanSpec(_span_name(facts), trace_id, span_id, None, start, end, attrs, error)
    children = []
    at, elapsed_ms = start, 0.0
    phases = _in_time_order(facts, sample.phases)
    for n, (phase, ms) in enumerate(phases):
        elapsed_ms += ms
        # The last phase ends with the sample: phases add up to its total within 0.01 ms.
        until = end if n == len(phases) - 1 else min(end, start + round(elapsed_ms * 1e6))
        attrs = {"phasewatch.phase": phase, "phasewatch.target": run.target}
        attrs["phasewatch.vantage"] = run.vantage
        if phase in sample.provenance:
            attrs["phasewatch.phase.provenance"] = sample.provenance[phase]
        children.append(SpanSpec(phase, trace_id, new_id(64), span_id, at, until, attrs))
        at = until
    return [root, *children]


def _span_name(facts: TargetFacts) -> str:
    """The conventions' span names: ``{operation} {model}`` (GenAI), ``{method}`` (HTTP)."""
    if not facts.llm:
        return facts.method
    return f"{facts.operation} {facts.model}" if facts.model else facts.operation


def _in_time_order(facts: TargetFacts, phases: dict[str, float]) -> list[tuple[str, float]]:
    order = KINDS[facts.kind].phases
    rank = {phase: n for n, phase in enumerate(order)}
    return sorted(phases.items(), key=lambda item: rank.get(item[0], len(order)))


def _token_marks(marks: dict[str, int]) -> tuple[int | None, int | None]:
    """The first and last token of a streamed answer (reasoning or answer), if any."""
    firsts = [marks[k] for k in ("first_reasoning_token", "first_answer_token") if k in marks]
    lasts = [marks[k] for k in ("last_reasoning_token", "last_answer_token") if k in marks]
    return (min(firsts) if firsts else None), (max(lasts) if lasts else None)


def _protocol_version(http_version: Any) -> str | None:
    """``HTTP/1.1`` → ``1.1``, ``HTTP/2`` → ``2``."""
    if not isinstance(http_version, str) or "/" not in http_version:
        return None
    return http_version.split("/", 1)[1]


def _unix_ns(when: datetime) -> int:
    aware = when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return (aware - EPOCH) // timedelta(microseconds=1) * 1000
