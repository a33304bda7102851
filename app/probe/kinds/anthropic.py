"""``kind: anthropic``: Anthropic's Messages API, streamed as server-sent events (told
apart by their JSON ``type``) or answered whole."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.probe.facts import (
    StreamFacts,
    error_from_data,
    error_message,
    load_object,
    nonempty,
    objects,
    with_usage,
)
from app.probe.kinds.base import Answer
from app.probe.kinds.llm import LlmKind
from app.probe.readers import StreamReader
from app.probe.spec import Kind
from app.probe.sse import SSEEvent, StreamFormatError


def read_anthropic_event(event: SSEEvent) -> StreamFacts:
    """One Messages API stream event, told apart by its JSON "type" (else the event name)."""
    if event.event == "error":
        return StreamFacts(error=error_from_data(event.data))
    if event.data.strip() == "[DONE]":  # OpenAI's end of stream, which Anthropic never sends
        raise StreamFormatError("an OpenAI-style stream, not Anthropic's (kind: openai?)", "[DONE]")
    payload = load_object(event.data)
    kind = payload.get("type")
    reader = _ANTHROPIC_READERS.get(kind if isinstance(kind, str) else event.event)
    return reader(payload) if reader is not None else StreamFacts()


def read_anthropic_body(body: bytes) -> StreamFacts:
    """A whole non-streaming Messages API body."""
    payload = load_object(body)
    if payload.get("type") == "error":
        return _anthropic_error(payload)
    facts = with_usage(StreamFacts(), payload)
    for block in objects(payload.get("content")):
        _add_block(facts, block)
    return facts


def _anthropic_delta(payload: Mapping[str, Any]) -> StreamFacts:
    delta = payload.get("delta")
    if not isinstance(delta, Mapping):
        return StreamFacts()
    kind = delta.get("type")
    if kind == "text_delta":
        return StreamFacts(answer=nonempty(delta.get("text")))
    if kind == "input_json_delta":
        return StreamFacts(answer=nonempty(delta.get("partial_json")))
    if kind == "thinking_delta":
        return StreamFacts(reasoning=nonempty(delta.get("thinking")))
    return StreamFacts()  # signature_delta, citations_delta: no new output


def _anthropic_block_start(payload: Mapping[str, Any]) -> StreamFacts:
    facts = StreamFacts()
    block = payload.get("content_block")
    if isinstance(block, Mapping):
        _add_block(facts, block)
    return facts


def _add_block(facts: StreamFacts, block: Mapping[str, Any]) -> None:
    # A tool_use block opens with its name, as OpenAI's first tool_calls delta does;
    # redacted thinking arrives whole in its block, never as deltas.
    kind = block.get("type")
    if kind in ("tool_use", "server_tool_use"):
        facts.answer = facts.answer or nonempty(block.get("name"))
    elif kind == "text":
        facts.answer = facts.answer or nonempty(block.get("text"))
    elif kind == "thinking":
        facts.reasoning = facts.reasoning or nonempty(block.get("thinking"))
    elif kind == "redacted_thinking":
        facts.reasoning = True


def _anthropic_error(payload: Mapping[str, Any]) -> StreamFacts:
    return StreamFacts(error=error_message(payload.get("error") or payload))


_ANTHROPIC_READERS: dict[str, Callable[[Mapping[str, Any]], StreamFacts]] = {
    "content_block_delta": _anthropic_delta,
    "content_block_start": _anthropic_block_start,
    "message_start": lambda payload: with_usage(StreamFacts(), payload),
    "message_delta": lambda payload: with_usage(StreamFacts(), payload),
    "message_stop": lambda payload: StreamFacts(done=True),
    "error": _anthropic_error,
}


def _stream(answer: Answer) -> StreamReader:
    return StreamReader(read_anthropic_event, answer.marks, answer.findings, answer.limit)


ANTHROPIC = LlmKind(Kind.ANTHROPIC, stream=_stream, body=read_anthropic_body)
