"""Reading LLM responses as they arrive: a text/event-stream decoder and provider readers.

The decoder turns byte chunks into events; a reader turns one event (or a whole
non-streaming body) into ``StreamFacts``: whether it carried answer or reasoning output,
ended the stream, reported an error, or brought token counts and server timings. Both sit
in the probe's read loop, so each event is decoded once and parsed as JSON at most once,
and memory is bounded however the server misbehaves.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.probe.sample import ServerTiming, Tokens
from app.probe.servertiming import timing_from_usage, tokens_from_usage


class StreamFormatError(Exception):
    """The stream broke its format: bad JSON in a data line, a line or event over the limit."""


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


class SSEDecoder:
    """Incremental text/event-stream decoder (WHATWG rules): feed raw byte chunks as they arrive.

    Lines are split as bytes and decoded whole, so a chunk may end anywhere, even inside
    a UTF-8 character or between CR and LF. ``max_line_bytes`` bounds a line still waiting
    for its end; ``max_event_bytes`` bounds the data lines of one event.
    """

    def __init__(self, max_line_bytes: int = 1 << 20, *, max_event_bytes: int = 1 << 22) -> None:
        self._max_line_bytes = max_line_bytes
        self._max_event_bytes = max_event_bytes
        self._pending = bytearray()
        self._skip_lf = False
        self._first_line = True
        self._event = ""
        self._data: list[str] = []
        self._data_bytes = 0

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        events: list[SSEEvent] = []
        if not chunk:
            return events  # would forget a CR that ended the previous chunk
        if self._skip_lf and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across chunks
        self._skip_lf = chunk.endswith(b"\r")
        # bytes.splitlines breaks at LF, CRLF and CR only: the three SSE line ends.
        for piece in chunk.splitlines(keepends=True):
            if piece.endswith((b"\n", b"\r")):
                self._complete_line(piece.rstrip(b"\r\n"), events)
            else:
                self._hold(piece)
        return events

    def close(self) -> list[SSEEvent]:
        """End of stream: dispatch a last event that no blank line followed."""
        events: list[SSEEvent] = []
        if self._pending:
            self._complete_line(b"", events)
        self._dispatch(events)
        return events

    def _hold(self, piece: bytes) -> None:
        self._pending += piece
        if len(self._pending) > self._max_line_bytes:
            raise StreamFormatError(f"line longer than {self._max_line_bytes} bytes")

    def _complete_line(self, line: bytes, events: list[SSEEvent]) -> None:
        if self._pending:
            self._pending += line
            line = bytes(self._pending)
            self._pending.clear()
        if len(line) > self._max_line_bytes:
            raise StreamFormatError(f"line longer than {self._max_line_bytes} bytes")
        text = line.decode("utf-8", "replace")
        if self._first_line:
            self._first_line = False
            text = text.removeprefix("\ufeff")
        self._field(text, len(line), events)

    def _field(self, text: str, size: int, events: list[SSEEvent]) -> None:
        if not text:
            self._dispatch(events)
            return
        name, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data_bytes += size
            if self._data_bytes > self._max_event_bytes:
                raise StreamFormatError(f"event longer than {self._max_event_bytes} bytes")
            self._data.append(value)
        elif name == "event":
            self._event = value
        # Comments (empty name), id, retry and unknown fields change nothing we read.

    def _dispatch(self, events: list[SSEEvent]) -> None:
        if self._data:
            events.append(SSEEvent(self._event or "message", "\n".join(self._data)))
        self._event = ""
        self._data = []
        self._data_bytes = 0


@dataclass(slots=True)
class StreamFacts:
    answer: bool = False  # carries non-empty answer output (text, or tool-call arguments)
    reasoning: bool = False  # carries non-empty reasoning output
    done: bool = False  # end-of-stream marker ([DONE], message_stop)
    error: str | None = None  # the stream reported an error
    tokens: Tokens | None = None
    server_timing: ServerTiming | None = None


def read_openai_event(event: SSEEvent) -> StreamFacts:
    """One chat.completions (or legacy completions) chunk."""
    if event.data.strip() == "[DONE]":
        return StreamFacts(done=True)
    if event.event == "error":
        return StreamFacts(error=_error_from_data(event.data))
    return _openai_facts(_load_object(event.data), "delta")


def read_openai_body(body: bytes) -> StreamFacts:
    """A whole non-streaming chat.completion (or legacy completion) body."""
    return _openai_facts(_load_object(body), "message")


def read_anthropic_event(event: SSEEvent) -> StreamFacts:
    """One Messages API stream event, told apart by its JSON "type" (else the event name)."""
    if event.event == "error":
        return StreamFacts(error=_error_from_data(event.data))
    payload = _load_object(event.data)
    kind = payload.get("type")
    reader = _ANTHROPIC_READERS.get(kind if isinstance(kind, str) else event.event)
    return reader(payload) if reader is not None else StreamFacts()


def read_anthropic_body(body: bytes) -> StreamFacts:
    """A whole non-streaming Messages API body."""
    payload = _load_object(body)
    if payload.get("type") == "error":
        return _anthropic_error(payload)
    facts = _with_usage(StreamFacts(), payload)
    for block in _objects(payload.get("content")):
        _add_block(facts, block)
    return facts


def _load_object(data: str | bytes) -> dict[str, Any]:
    try:
        payload = orjson.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
        raise StreamFormatError(f"not JSON: {_excerpt(data)}") from exc
    if not isinstance(payload, dict):
        raise StreamFormatError(f"not a JSON object: {_excerpt(data)}")
    return payload


def _excerpt(data: str | bytes) -> str:
    return repr(data[:80])


def _openai_facts(payload: Mapping[str, Any], part_key: str) -> StreamFacts:
    ordinary = _ordinary_chunk(payload, part_key)
    if ordinary is not None:
        return ordinary
    facts = StreamFacts(error=_openai_error(payload))
    for choice in _objects(payload.get("choices")):
        part = choice.get(part_key)
        part = part if isinstance(part, Mapping) else {}
        facts.answer = facts.answer or _has_answer(part) or _nonempty(choice.get("text"))
        facts.reasoning = facts.reasoning or _has_reasoning(part)
    return _with_usage(facts, payload)


# Nearly every chunk is one choice whose delta holds text: read that shape directly (this
# runs once per token inside the measured request); anything else takes the general walk.
_ORDINARY_KEYS = frozenset(
    {"id", "object", "created", "model", "choices", "system_fingerprint", "service_tier", "usage"}
)
_ORDINARY_PART_KEYS = frozenset({"role", "content", "reasoning_content", "reasoning"})


def _ordinary_chunk(payload: Mapping[str, Any], part_key: str) -> StreamFacts | None:
    choices = payload.get("choices")
    if type(choices) is not list or len(choices) != 1 or payload.get("usage"):
        return None
    if not payload.keys() <= _ORDINARY_KEYS or type(choices[0]) is not dict:
        return None
    part = choices[0].get(part_key)
    if type(part) is not dict or not part.keys() <= _ORDINARY_PART_KEYS:
        return None
    content = part.get("content")
    if content is not None and type(content) is not str:
        return None  # a list of content parts: the general walk knows it
    return StreamFacts(answer=bool(content), reasoning=_has_reasoning(part))


def _has_answer(part: Mapping[str, Any]) -> bool:
    # A refusal is text the user reads, so it counts as answer output.
    if _nonempty(part.get("content")) or _nonempty(part.get("refusal")):
        return True
    if _content_parts_have_text(part.get("content")):
        return True
    calls = [call.get("function") for call in _objects(part.get("tool_calls"))]
    calls.append(part.get("function_call"))  # the pre-tools shape
    return any(_call_has_output(call) for call in calls)


def _content_parts_have_text(content: Any) -> bool:
    # Some OpenAI-compatible servers (Mistral among them) stream content as a list of parts.
    return any(_nonempty(item.get("text")) for item in _objects(content))


def _call_has_output(function: Any) -> bool:
    if not isinstance(function, Mapping):
        return False
    return _nonempty(function.get("name")) or _nonempty(function.get("arguments"))


def _has_reasoning(part: Mapping[str, Any]) -> bool:
    # DeepSeek and older vLLM say reasoning_content; newer vLLM and OpenRouter say reasoning.
    return _nonempty(part.get("reasoning_content")) or _nonempty(part.get("reasoning"))


def _openai_error(payload: Mapping[str, Any]) -> str | None:
    error = payload.get("error")
    if error:
        return _error_message(error)
    if payload.get("object") == "error":  # vLLM's error shape
        return _error_message(payload)
    return None


def _error_from_data(data: str) -> str:
    try:
        payload = json.loads(data)
    except ValueError:
        return data.strip() or "error event"
    if isinstance(payload, Mapping) and payload.get("error"):
        return _error_message(payload["error"])
    return _error_message(payload)


def _error_message(error: Any) -> str:
    if isinstance(error, Mapping):
        for key in ("message", "type", "code"):
            if _nonempty(error.get(key)):
                return str(error[key])
        return json.dumps(error)
    return str(error) if error else "error"


def _with_usage(facts: StreamFacts, payload: Mapping[str, Any]) -> StreamFacts:
    get = payload.get
    if not (get("usage") or get("x_groq") or get("timings") or get("message")):
        return facts  # most chunks: this runs once per token, so skip the full look
    tokens = tokens_from_usage(payload)
    if (tokens.prompt, tokens.completion, tokens.reasoning) != (None, None, None):
        facts.tokens = tokens
    timing = timing_from_usage(payload)
    if not timing.empty:
        facts.server_timing = timing
    return facts


def _anthropic_delta(payload: Mapping[str, Any]) -> StreamFacts:
    delta = payload.get("delta")
    if not isinstance(delta, Mapping):
        return StreamFacts()
    kind = delta.get("type")
    if kind == "text_delta":
        return StreamFacts(answer=_nonempty(delta.get("text")))
    if kind == "input_json_delta":
        return StreamFacts(answer=_nonempty(delta.get("partial_json")))
    if kind == "thinking_delta":
        return StreamFacts(reasoning=_nonempty(delta.get("thinking")))
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
        facts.answer = facts.answer or _nonempty(block.get("name"))
    elif kind == "text":
        facts.answer = facts.answer or _nonempty(block.get("text"))
    elif kind == "thinking":
        facts.reasoning = facts.reasoning or _nonempty(block.get("thinking"))
    elif kind == "redacted_thinking":
        facts.reasoning = True


def _anthropic_error(payload: Mapping[str, Any]) -> StreamFacts:
    return StreamFacts(error=_error_message(payload.get("error") or payload))


_ANTHROPIC_READERS: dict[str, Callable[[Mapping[str, Any]], StreamFacts]] = {
    "content_block_delta": _anthropic_delta,
    "content_block_start": _anthropic_block_start,
    "message_start": lambda payload: _with_usage(StreamFacts(), payload),
    "message_delta": lambda payload: _with_usage(StreamFacts(), payload),
    "message_stop": lambda payload: StreamFacts(done=True),
    "error": _anthropic_error,
}


def _objects(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _nonempty(value: Any) -> bool:
    return isinstance(value, str) and value != ""
