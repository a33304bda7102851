"""What one probe of one endpoint yields: raw marks, server timing, phases, outcome.

Marks are monotonic nanoseconds from the start of the request; a mark that the request
never reached stays ``None``. Phases are milliseconds derived from the marks (see
``app.probe.phases`` and docs/phases.md) and always add up to ``total_ms``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from app.probe.cadence import StreamStats


class Status(StrEnum):
    OK = "ok"
    HTTP_ERROR = "http_error"
    DEADLINE_EXCEEDED = "deadline_exceeded"  # cut at the target's own deadline: a censored miss
    # Cut at the hard ``timeout`` with no deadline at or before it: the endpoint hung. A
    # failure, not a miss of a deadline nobody set, and its phases are not the breakdown's.
    TIMEOUT = "timeout"
    ERROR = "error"
    # Answered, but not as the target's ``expect:`` asks (app.probe.answercheck): a failure.
    INVALID_ANSWER = "invalid_answer"


class Provenance(StrEnum):
    MEASURED = "measured"  # between two of our own clock readings (or ours minus the server's)
    SERVER = "server"  # reported by the server
    ESTIMATED = "estimated"  # from a round-trip estimate, or a remainder after one


LLM_PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")
HTTP_PHASES = ("connect", "network", "server", "transfer")


@dataclass(slots=True)
class Marks:
    connect_start: int | None = None
    # The name resolved (our backend's mark, inside httpcore's connect_tcp): DNS before
    # it, TCP after it (app.probe.connection).
    dns_end: int | None = None
    connect_end: int | None = None
    tls_start: int | None = None
    tls_end: int | None = None
    # The connection is ours and the request headers start to go out: pool wait,
    # DNS, TCP and TLS are behind us.
    request_start: int | None = None
    # After redirects (kind: http): the final request starts. The marks before it are the
    # first hop's, those after it the final response's.
    redirect_end: int | None = None
    request_sent: int | None = None
    response_headers: int | None = None
    first_byte: int | None = None
    first_reasoning_token: int | None = None
    last_reasoning_token: int | None = None
    first_answer_token: int | None = None
    last_answer_token: int | None = None
    stream_end: int | None = None
    # A censored sample: when the cut (deadline or hard timeout) took effect, on our clock.
    cut: int | None = None

    def as_dict(self) -> dict[str, int]:
        # What ``dataclasses.asdict`` gave, minus the None marks: its deep copy of plain
        # ints was a share of each run's CPU in ``serve`` (bench/README.md).
        return {name: v for name in _MARK_NAMES if (v := getattr(self, name)) is not None}


_MARK_NAMES = tuple(f.name for f in dataclasses.fields(Marks))


@dataclass(slots=True)
class ServerTiming:
    """Durations the server reported about itself, normalised to milliseconds.

    ``processing_ms`` is the server's own time before it sent the response headers
    (``openai-processing-ms``, a Server-Timing ``total``): it covers whatever of queue,
    prefill and generation happened before the headers left.
    """

    queue_ms: float | None = None
    prefill_ms: float | None = None
    generation_ms: float | None = None
    processing_ms: float | None = None
    # Every timing found, by its source name (e.g. "server-timing:queue", "usage.queue_time").
    raw: dict[str, float] = field(default_factory=dict)

    def merge(self, other: ServerTiming) -> None:
        """Fill what is still unknown from ``other`` (the first source found wins)."""
        for name in ("queue_ms", "prefill_ms", "generation_ms", "processing_ms"):
            if getattr(self, name) is None:
                setattr(self, name, getattr(other, name))
        self.raw.update(other.raw)

    @property
    def empty(self) -> bool:
        return not self.raw


@dataclass(slots=True)
class Tokens:
    prompt: int | None = None
    completion: int | None = None
    reasoning: int | None = None

    def as_dict(self) -> dict[str, int | None]:
        """``dataclasses.asdict``'s dict, without its deep copy of three ints."""
        return {"prompt": self.prompt, "completion": self.completion, "reasoning": self.reasoning}

    def merge(self, other: Tokens) -> None:
        self.prompt = other.prompt if other.prompt is not None else self.prompt
        self.completion = other.completion if other.completion is not None else self.completion
        self.reasoning = other.reasoning if other.reasoning is not None else self.reasoning


@dataclass(slots=True)
class Sample:
    index: int
    started_at: datetime
    status: Status
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, Provenance]
    marks: Marks
    error_class: str | None = None
    error: str | None = None
    http_status: int | None = None
    http_version: str | None = None
    connection_reused: bool = False
    remote_address: str | None = None
    request_id: str | None = None
    tokens: Tokens = field(default_factory=Tokens)
    server_timing: ServerTiming = field(default_factory=ServerTiming)
    rtt_ms: float | None = None
    # Phases whose time could not be told apart: e.g. ("queue", "prefill") when the
    # server reported nothing and queue holds the rest of the time to first token.
    unsplit: tuple[str, ...] = ()
    # What the breakdown had to say about the server's account of itself:
    # "server_timing_ignored" (zero, or leaving more network than the round trip allows:
    # not used), "server_timing_clamped" (more than we measured: scaled or cut to fit).
    flags: tuple[str, ...] = ()
    cold_start: bool = False
    # The W3C ``traceparent`` sent with the request (``propagate: true``), else None.
    traceparent: str | None = None
    # ``connect`` as dns, tcp and tls (app.probe.connection); None: no connection made.
    connect_split: dict[str, float] | None = None
    address_family: str | None = None  # ipv4 | ipv6: of ``remote_address``
    # A streamed answer's rhythm (``app.probe.cadence``): None unless a token arrived streamed.
    stream: StreamStats | None = None

    def to_json(self) -> dict[str, Any]:
        details = self.details()
        return {
            "index": self.index,
            "started_at": self.started_at.isoformat(),
            "status": self.status.value,
            "error_class": self.error_class,
            "error": self.error,
            "total_ms": round(self.total_ms, 4),
            "phases": {k: round(v, 4) for k, v in self.phases.items()},
            "provenance": {k: v.value for k, v in self.provenance.items()},
            "unsplit": details["unsplit"],
            "flags": details["flags"],
            "http_status": self.http_status,
            "http_version": details["http_version"],
            "connection_reused": details["connection_reused"],
            "cold_start": details["cold_start"],
            "remote_address": details["remote_address"],
            "address_family": details["address_family"],
            "connect_split": details["connect_split"],
            "request_id": details["request_id"],
            "traceparent": details["traceparent"],
            "stream": details["stream"],
            "rtt_ms": details["rtt_ms"],
            "tokens": details["tokens"],
            "server_timing": details["server_timing"],
            "marks_ns": self.marks.as_dict(),
        }

    def details(self) -> dict[str, Any]:
        """``to_json``'s values beyond the outcome, phases and marks (what a stored sample
        keeps in its ``details``), without building the rest of it."""
        return {
            "http_version": self.http_version,
            "connection_reused": self.connection_reused,
            "cold_start": self.cold_start,
            "remote_address": self.remote_address,
            "address_family": self.address_family,
            "connect_split": _rounded(self.connect_split),
            "request_id": self.request_id,
            "rtt_ms": self.rtt_ms,
            "tokens": self.tokens.as_dict(),
            "server_timing": self.server_timing.raw,
            "unsplit": list(self.unsplit),
            "flags": list(self.flags),
            "traceparent": self.traceparent,
            "stream": None if self.stream is None else self.stream.to_json(),
        }


def _rounded(split: dict[str, float] | None) -> dict[str, float] | None:
    return None if split is None else {k: round(v, 4) for k, v in split.items()}
