"""The simulator's data: its config, the truth it logs, and one request being handled."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from app.demo.sim.formats import Counts, count_prompt_tokens
from app.demo.sim.network import Wire

ServerTimingMode = Literal["usage", "header", "none"]
Headers = list[tuple[bytes, bytes]]

_NON_NEGATIVE = (
    "one_way_ms",
    "queue_median_ms",
    "queue_sigma",
    "prefill_ms",
    "tokens",
    "reasoning_tokens",
    "cold_start_ms",
    "cold_after_idle_s",
)


@dataclass(frozen=True)
class SimConfig:
    one_way_ms: float = 50.0
    queue_median_ms: float = 100.0
    queue_sigma: float = 0.5  # lognormal shape; 0 makes the queue constant
    prefill_ms: float = 20.0
    tokens: int = 20
    tokens_per_s: float = 200.0
    reasoning_tokens: int = 0  # streamed before the answer, at the same rate
    cold_start_ms: float = 0.0  # counted as queue
    cold_after_idle_s: float = 60.0
    server_timing: ServerTimingMode = "usage"
    seed: int | None = None
    # A route of its own per client, named by the request's ``X-Sim-Client`` header: its
    # one-way trip in ms (one simulated server seen from several vantages at once).
    paths: Mapping[str, float] = field(default_factory=dict)

    def one_way_for(self, client: str | None) -> float:
        return self.paths.get(client, self.one_way_ms) if client else self.one_way_ms

    def __post_init__(self) -> None:
        negative = [name for name in _NON_NEGATIVE if getattr(self, name) < 0]
        negative += [f"paths.{name}" for name, ms in self.paths.items() if ms < 0]
        if negative:
            raise ValueError(f"must not be negative: {', '.join(negative)}")
        if self.tokens_per_s <= 0:
            raise ValueError("tokens_per_s must be positive")
        if self.tokens + self.reasoning_tokens < 1:
            raise ValueError("at least one output token is needed")
        if self.server_timing not in get_args(ServerTimingMode):
            raise ValueError(f"server_timing must be one of {get_args(ServerTimingMode)}")


DEFAULT_CONFIG = SimConfig()


@dataclass(frozen=True)
class Truth:
    request_id: str
    path: str
    network_ms: float  # the two one-way trips as they really went: 2 * one_way_ms, or late
    queue_ms: float  # includes a cold start; the server's work time for /http
    prefill_ms: float
    generation_ms: float  # first output token emitted -> last output token emitted
    transfer_ms: float  # last token emitted -> last byte of the response emitted
    cold_start: bool


@dataclass
class Timeline:
    """Server-clock marks of one request. A mark never reached takes the previous one."""

    received: float  # the app has the request; it "arrives" one way later
    arrived: float
    queued: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    end: float | None = None

    def durations_ms(self) -> tuple[float, float, float, float]:
        """queue, prefill, generation, transfer."""
        queued = self.arrived if self.queued is None else self.queued
        first = queued if self.first_token is None else self.first_token
        last = first if self.last_token is None else self.last_token
        end = last if self.end is None else self.end
        ms = 1000.0
        queue, prefill = (queued - self.arrived) * ms, (first - queued) * ms
        return queue, prefill, (last - first) * ms, (end - last) * ms


@dataclass
class Exchange:
    """One request as the server handles it: its config snapshot, marks and writes."""

    config: SimConfig
    path: str
    wire: Wire
    timeline: Timeline
    query: dict[str, list[str]]
    body: dict[str, Any] = field(default_factory=dict)
    request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    queue_s: float = 0.0  # drawn by the app, cold start included
    cold_start: bool = False
    token_part: int | None = None  # which emitted message carried the first output token

    def start(self, status: int, headers: Headers) -> None:
        headers = [(b"x-request-id", self.request_id.encode()), *headers]
        self.wire.emit({"type": "http.response.start", "status": status, "headers": headers})

    def write(self, data: bytes, *, last: bool = False, token: bool = False) -> None:
        message = {"type": "http.response.body", "body": data, "more_body": not last}
        if token and self.token_part is None:
            self.token_part = self.wire.emitted
        emitted = self.wire.emit(message)
        if last:
            self.timeline.end = emitted

    def respond(self, status: int, content_type: bytes, data: bytes, extra: Headers) -> None:
        length = str(len(data)).encode()
        self.start(status, [(b"content-type", content_type), (b"content-length", length), *extra])
        self.write(data, last=True)

    def counts(self) -> Counts:
        cfg = self.config
        return Counts(count_prompt_tokens(self.body), cfg.reasoning_tokens, cfg.tokens)

    def truth(self) -> Truth:
        queue, prefill, generation, transfer = self.timeline.durations_ms()
        network = (self.timeline.arrived - self.timeline.received + self._reply_trip()) * 1000
        args = (network, queue, prefill, generation, transfer, self.cold_start)
        return Truth(self.request_id, self.path, *args)

    def _reply_trip(self) -> float:
        """How long the reply's first part took on the wire: the part that carries the first
        token, or, without tokens, the first part (a client's time to first byte)."""
        part = self.token_part or 0
        departures = self.wire.departures
        if part >= len(departures):
            return 0.0
        return departures[part].sent - departures[part].emitted
