"""What a server says about its own time: Server-Timing and vendor headers, usage blocks.

Pure functions over headers and parsed JSON; nothing here raises on odd input. A number
that does not parse, is negative or is not finite is ignored, as if it was never sent.
Every timing found lands in ``ServerTiming.raw`` in milliseconds under its source name;
the phase fields take the first value found for them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from app.probe.sample import ServerTiming, Tokens

PHASES = frozenset({"queue", "prefill", "generation", "processing"})

# Server-Timing metric name (lower case) -> the phase it reports.
DEFAULT_SERVER_TIMING_MAP: dict[str, str] = {
    # Time waiting for a batch slot or a worker.
    "queue": "queue",
    "queue_time": "queue",
    "queued": "queue",
    "wait": "queue",
    # Prompt processing up to the first token. "ttft" is left out on purpose: it
    # includes the queue, so calling it prefill would hide a queueing problem.
    "prefill": "prefill",
    "prefill_time": "prefill",
    "prompt": "prefill",
    "prompt_time": "prefill",
    "prompt_eval": "prefill",  # llama.cpp's name for it
    # Token generation after the first token.
    "generation": "generation",
    "decode": "generation",
    "decode_time": "generation",
    "completion": "generation",
    "completion_time": "generation",
    # Everything the server did before sending headers. "upstream" and "origin" come from
    # proxies and CDNs (Akamai sends "origin"): from the client's side, time behind the
    # first hop is the server's. "inference" (prefill + generation without the queue)
    # and Cloudflare's "cfRequestDuration" (edge time, origin fetch included) fit no
    # phase and stay raw only.
    "total": "processing",
    "app": "processing",
    "server": "processing",
    "processing": "processing",
    "upstream": "processing",
    "origin": "processing",
}

# Response headers carrying one duration in milliseconds -> phase (None: raw only).
# Earlier rows win for the same phase. TGI's x-compute-time is skipped: its unit changed
# from ms to s between releases, and x-total-time carries the same duration in ms.
_TIMING_HEADERS: tuple[tuple[str, str | None], ...] = (
    ("openai-processing-ms", "processing"),
    ("x-queue-time", "queue"),  # TGI
    # TGI: validation + queue + inference, the same span as processing.
    ("x-total-time", "processing"),
    # TGI: prefill + generation with no split, so neither phase can take it.
    ("x-inference-time", None),
    ("x-validation-time", None),  # TGI
    ("x-time-per-token", None),  # TGI
    # Envoy (Istio, KServe, AI gateways): upstream time to response headers.
    ("x-envoy-upstream-service-time", "processing"),
)

# Groq's usage block, in seconds. Key -> phase.
_USAGE_TIMES: tuple[tuple[str, str | None], ...] = (
    ("queue_time", "queue"),
    ("prompt_time", "prefill"),
    ("completion_time", "generation"),
    ("total_time", None),
)

# llama.cpp's top-level "timings" block, in milliseconds. Key -> phase.
_LLAMACPP_TIMES: tuple[tuple[str, str | None], ...] = (
    ("prompt_ms", "prefill"),
    ("predicted_ms", "generation"),
    ("prompt_per_token_ms", None),
    ("predicted_per_token_ms", None),
)

# RFC 9110 tchar: what a metric or parameter name may be made of.
_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)
_NUMBER_CHARS = frozenset("0123456789.eE+-")


@dataclass(frozen=True, slots=True)
class ServerTimingMetric:
    name: str
    dur_ms: float | None
    desc: str | None


def parse_server_timing(value: str) -> list[ServerTimingMetric]:
    """Parse one Server-Timing header value; entries that are not metrics are skipped."""
    metrics = []
    for entry in _split_unquoted(value, ","):
        metric = _parse_metric(entry)
        if metric is not None:
            metrics.append(metric)
    return metrics


def timing_from_headers(headers: httpx.Headers, mapping: Mapping[str, str]) -> ServerTiming:
    """Server-Timing (mapped by ``mapping``) first, then the vendor timing headers."""
    timing = ServerTiming()
    lowered = {name.lower(): phase for name, phase in mapping.items()}
    for value in headers.get_list("server-timing"):
        for metric in parse_server_timing(value):
            phase = lowered.get(metric.name.lower())
            _record(timing, f"server-timing:{metric.name.lower()}", phase, metric.dur_ms)
    for header, phase in _TIMING_HEADERS:
        _record(timing, header, phase, _parse_number(headers.get(header)))
    return timing


def timing_from_usage(payload: Mapping[str, Any]) -> ServerTiming:
    """Timings in a JSON body or final chunk: Groq's usage (seconds), llama.cpp's timings."""
    timing = ServerTiming()
    for usage in _usage_blocks(payload):
        for key, phase in _USAGE_TIMES:
            seconds = _number(usage.get(key))
            _record(timing, f"usage.{key}", phase, None if seconds is None else seconds * 1000)
    timings = payload.get("timings")
    if isinstance(timings, Mapping):
        for key, phase in _LLAMACPP_TIMES:
            _record(timing, f"timings.{key}", phase, _number(timings.get(key)))
    return timing


def tokens_from_usage(payload: Mapping[str, Any]) -> Tokens:
    """Token counts from an OpenAI-style or Anthropic-style usage block.

    Anthropic's input_tokens leave out cached tokens; they are added back so that
    ``prompt`` means what OpenAI's prompt_tokens means. Anthropic's message_start
    carries a placeholder output count, so only its input side is read.
    """
    tokens = Tokens()
    for usage in _usage_blocks(payload):
        _fill_tokens(tokens, usage)
    message = payload.get("message")
    start_usage = message.get("usage") if isinstance(message, Mapping) else None
    if isinstance(start_usage, Mapping) and tokens.prompt is None:
        tokens.prompt = _input_tokens(start_usage)
    return tokens


def _split_unquoted(text: str, separator: str) -> list[str]:
    if '"' not in text:
        return text.split(separator)
    parts, start, quoted, escaped = [], 0, False, False
    for index, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return parts


def _parse_metric(entry: str) -> ServerTimingMetric | None:
    name, *params = _split_unquoted(entry, ";")
    name = name.strip()
    if not _is_token(name):
        return None
    found: dict[str, str] = {}
    for param in params:
        key, _, value = param.partition("=")
        key = key.strip().lower()
        if _is_token(key):
            found.setdefault(key, _unquote(value.strip()))  # the W3C spec keeps the first
    return ServerTimingMetric(name, _parse_number(found.get("dur")), found.get("desc"))


def _is_token(text: str) -> bool:
    return bool(text) and all(char in _TOKEN_CHARS for char in text)


def _unquote(value: str) -> str:
    if not value.startswith('"'):
        return value
    chars, escaped = [], False
    for char in value[1:]:
        if escaped:
            chars.append(char)
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            break
        else:
            chars.append(char)
    return "".join(chars)


def _parse_number(text: str | None) -> float | None:
    # float() alone would take "nan", "inf" and "1_000".
    if not text:
        return None
    text = text.strip()
    if not text or not all(char in _NUMBER_CHARS for char in text):
        return None
    try:
        return _number(float(text))
    except ValueError:
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _count(value: Any) -> int | None:
    number = _number(value)
    if number is None or not number.is_integer():
        return None
    return int(number)


def _record(timing: ServerTiming, source: str, phase: str | None, ms: float | None) -> None:
    if ms is None or source in timing.raw:
        return
    timing.raw[source] = ms
    if phase in PHASES and getattr(timing, f"{phase}_ms") is None:
        setattr(timing, f"{phase}_ms", ms)


def _usage_blocks(payload: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    # Groq sends its usage under x_groq in streams, and at the top level otherwise.
    usage = payload.get("usage")
    if isinstance(usage, Mapping):
        yield usage
    x_groq = payload.get("x_groq")
    usage = x_groq.get("usage") if isinstance(x_groq, Mapping) else None
    if isinstance(usage, Mapping):
        yield usage


def _fill_tokens(tokens: Tokens, usage: Mapping[str, Any]) -> None:
    prompt = _count(usage.get("prompt_tokens"))
    completion = _count(usage.get("completion_tokens"))
    if completion is None:
        completion = _count(usage.get("output_tokens"))
    details = usage.get("completion_tokens_details") or usage.get("output_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, Mapping) else None
    tokens.prompt = _first(tokens.prompt, prompt if prompt is not None else _input_tokens(usage))
    tokens.completion = _first(tokens.completion, completion)
    tokens.reasoning = _first(tokens.reasoning, reasoning)


def _input_tokens(usage: Mapping[str, Any]) -> int | None:
    uncached = _count(usage.get("input_tokens"))
    if uncached is None:
        return None
    cached = ("cache_read_input_tokens", "cache_creation_input_tokens")
    return uncached + sum(_count(usage.get(key)) or 0 for key in cached)


def _first(current: int | None, new: int | None) -> int | None:
    return current if current is not None else new
