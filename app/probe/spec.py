"""What to probe and how: the probe's view of one target, free of any file format."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from app.probe import template
from app.probe.answercheck import Expect
from app.probe.servertiming import DEFAULT_SERVER_TIMING_MAP

# What `follow_redirects: true` allows (browsers allow 20, curl 50; a monitored endpoint
# that needs more than a few is broken).
DEFAULT_MAX_REDIRECTS = 10
# The default cool-down after a cut is the deadline, at most this (a cut by the 60 s hard
# timeout is no reason to stop probing for a minute).
MAX_DEFAULT_COOLDOWN_S = 5.0


class Kind(StrEnum):
    OPENAI = "openai"
    ANTHROPIC = "anthropic"
    HTTP = "http"


class RttMethod(StrEnum):
    TCP = "tcp"  # the least RTT the kernel has seen on the request's socket
    TTFB = "ttfb"  # fastest time to first byte of a trivial request to ``rtt_url``


@dataclass(frozen=True, slots=True)
class ProbeSpec:
    url: str
    kind: Kind = Kind.HTTP
    method: str = "GET"
    headers: Mapping[str, str] = field(default_factory=dict)
    body: Any = None  # JSON-able value sent as JSON, or bytes sent as they are
    deadline_ms: float | None = None
    timeout_s: float = 60.0
    http2: bool = False
    verify: bool | str = True  # False, True or a CA bundle path
    server_timing_map: Mapping[str, str] = field(
        default_factory=lambda: dict(DEFAULT_SERVER_TIMING_MAP)
    )
    rtt_method: RttMethod = RttMethod.TCP
    rtt_url: str | None = None
    rtt_probes: int = 3
    # Bodies we keep to parse (JSON answers, error excerpts); anything longer is an error
    # for a JSON answer and is counted, not kept, for a plain HTTP target.
    max_body_bytes: int = 16 * 1024 * 1024
    cold_after_idle_s: float = 60.0
    # Redirects ``kind: http`` follows (0: a redirect is the answer); see app.probe.redirects.
    max_redirects: int = DEFAULT_MAX_REDIRECTS
    # The pause after a sample cut at its deadline, so that a server still working on the
    # cancelled request does not bill the next sample for it. None: the default below.
    cooldown_s: float | None = None
    # Send a W3C ``traceparent`` with each request: the ids of its sample's span.
    propagate: bool = False
    # What a right answer has (``expect:``); None: any answer below 400 is ok.
    expect: Expect | None = None
    # Whether the body has {{nonce}} or {{i}} to fill in for every request (app.probe.template).
    templated: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "templated", template.has_placeholders(self.body))

    @property
    def cooldown_after_cut_s(self) -> float:
        """``cooldown_s``, else the deadline itself up to ``MAX_DEFAULT_COOLDOWN_S``: a request
        cut at its deadline had at least that long to go (docs/phases.md)."""
        if self.cooldown_s is not None:
            return self.cooldown_s
        return min(self.cutoff_s, MAX_DEFAULT_COOLDOWN_S)

    @property
    def asks_for_stream(self) -> bool:
        """A JSON body with ``"stream": true`` (OpenAI's and Anthropic's way of asking)."""
        return isinstance(self.body, dict) and self.body.get("stream") is True

    @property
    def cutoff_s(self) -> float:
        """When the request is cut: the client deadline, or the hard timeout if sooner."""
        if self.deadline_ms is None:
            return self.timeout_s
        return min(self.deadline_ms / 1000, self.timeout_s)
