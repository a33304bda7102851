"""What each simulated endpoint does with one request, after its arrival.

Handlers sleep to absolute deadlines and mark the request's timeline; their last write sets
the ``end`` mark. Response headers leave right after arrival, as streaming servers send them,
except with ``server_timing="header"``: then they wait for the first token so that a
``Server-Timing`` header can carry the true queue and prefill.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from app.demo.sim.core import Exchange, Headers
from app.demo.sim.formats import (
    AnthropicStream,
    OpenAIChat,
    Timing,
    count_prompt_tokens,
    groq_usage,
    model_of,
)
from app.demo.sim.network import now, sleep_until

_SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


async def chat(ex: Exchange) -> None:
    """OpenAI chat completions; streams only when the body says ``"stream": true``."""
    if ex.body.get("stream") is not True:
        await _chat_whole(ex)
        return
    fmt = OpenAIChat(model_of(ex.body), ex.request_id)
    start = await _before_first_token(ex, ping=True)
    ex.write(fmt.role())
    async for reasoning in _token_steps(ex, start):
        ex.write(fmt.token(reasoning), token=True)
    ex.write(fmt.finish())
    ex.write(fmt.usage(ex.counts(), _groq(ex)))
    ex.write(b"data: [DONE]\n\n", last=True)


async def _chat_whole(ex: Exchange) -> None:
    # A non-streaming server has nothing to send before the whole answer, headers included.
    cfg = ex.config
    start = await _queue_and_prefill(ex)
    await sleep_until(start + (cfg.reasoning_tokens + cfg.tokens - 1) / cfg.tokens_per_s)
    ex.timeline.last_token = now()
    body = OpenAIChat(model_of(ex.body), ex.request_id).completion(ex.counts(), _groq(ex))
    ex.respond(200, b"application/json", body, _timing_headers(ex))


async def messages(ex: Exchange) -> None:
    """Anthropic Messages, always streamed; reasoning goes to a thinking block at index 0."""
    fmt = AnthropicStream(model_of(ex.body), ex.request_id, count_prompt_tokens(ex.body))
    thinking = ex.config.reasoning_tokens > 0
    start = await _before_first_token(ex, ping=False)
    for event in (fmt.message_start(), fmt.block_start(0, thinking), fmt.ping()):
        ex.write(event)
    index = 0
    async for reasoning in _token_steps(ex, start):
        if thinking and not reasoning and index == 0:
            for event in (fmt.signature(0), fmt.block_stop(0), fmt.block_start(1, False)):
                ex.write(event)
            index = 1
        ex.write(fmt.delta(index, reasoning), token=True)
    ex.write(fmt.block_stop(index))
    ex.write(fmt.message_delta(ex.counts().completion))
    ex.write(fmt.message_stop(), last=True)


async def health(ex: Exchange) -> None:
    ex.respond(200, b"text/plain; charset=utf-8", b"ok", [])


async def plain(ex: Exchange) -> None:
    """``/http?server_ms=N&bytes=M``: N ms of server work (the truth's queue), then M bytes."""
    try:
        server_ms = float(ex.query.get("server_ms", ["10"])[0])
        size = int(ex.query.get("bytes", ["1000"])[0])
    except ValueError:
        error(ex, 400, "invalid_request_error", "server_ms and bytes must be numbers")
        return
    await sleep_until(ex.timeline.arrived + max(0.0, server_ms) / 1000)
    ex.timeline.queued = now()
    extra: Headers = []
    if ex.config.server_timing != "none":
        work_ms = ex.timeline.durations_ms()[0]
        extra.append((b"server-timing", f"app;dur={work_ms:.3f}".encode()))
    ex.respond(200, b"application/octet-stream", b"x" * max(0, size), extra)


def error(ex: Exchange, status: int, kind: str, message: str) -> None:
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    ex.respond(status, b"application/json", body, [])


async def _before_first_token(ex: Exchange, *, ping: bool) -> float:
    """Send the stream's headers (early or at the first token); return the first token's time."""
    early = ex.config.server_timing != "header"
    if early:
        _start_sse(ex, ping=ping)
    start = await _queue_and_prefill(ex)
    if not early:
        _start_sse(ex, ping=ping)
    return start


async def _queue_and_prefill(ex: Exchange) -> float:
    timeline = ex.timeline
    await sleep_until(timeline.arrived + ex.queue_s)
    timeline.queued = now()
    await sleep_until(timeline.queued + ex.config.prefill_ms / 1000)
    timeline.first_token = timeline.last_token = now()
    return timeline.first_token


async def _token_steps(ex: Exchange, start: float) -> AsyncIterator[bool]:
    """Wait for each output token's time; yield whether it is a reasoning token."""
    cfg = ex.config
    for k in range(cfg.reasoning_tokens + cfg.tokens):
        await sleep_until(start + k / cfg.tokens_per_s)
        ex.timeline.last_token = now()
        yield k < cfg.reasoning_tokens


def _groq(ex: Exchange) -> dict[str, Any] | None:
    if ex.config.server_timing != "usage":
        return None
    queue, prefill, generation, _ = ex.timeline.durations_ms()
    timing = Timing(queue / 1000, prefill / 1000, generation / 1000)
    return groq_usage(ex.request_id, ex.counts(), timing)


def _timing_headers(ex: Exchange) -> Headers:
    if ex.config.server_timing != "header":
        return []
    queue, prefill, _, _ = ex.timeline.durations_ms()
    return [(b"server-timing", f"queue;dur={queue:.3f}, prefill;dur={prefill:.3f}".encode())]


def _start_sse(ex: Exchange, *, ping: bool) -> None:
    ex.start(200, [*_SSE_HEADERS, *_timing_headers(ex)])
    if ping:
        ex.write(b": ping\n\n")  # a keep-alive comment, as real servers send; probes skip it
