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
from typing import Any, NamedTuple

import orjson

from app.probe.sample import ServerTiming, Tokens
from app.probe.servertiming import timing_from_usage, tokens_from_usage

EXCERPT_CHARS = 80


class StreamFormatError(Exception):
    """The stream broke its format: bad JSON in a data line, a line or event over the limit.

    ``data`` is the offending text, when there is one: the message quotes its start, and
    ``describe`` quotes it again through a cut that knows the target's secrets.
    """

    def __init__(self, what: str, data: str | bytes | None = None) -> None:
        self.what, self.data = what, data
        super().__init__(self.describe(lambda text, limit: text[:limit]))

    def describe(self, cut: Callable[[str, int], str]) -> str:
        if self.data is None:
            return self.what
        text = self.data.decode("utf-8", "replace") if isinstance(self.data, bytes) else self.data
        return f"{self.what}: {cut(text, EXCERPT_CHARS)!r}"


class SSEEvent(NamedTuple):
    # A tuple, not a dataclass: one is built per token, inside the measured request.
    event: str
    data: str


# The decoder's hot path builds events without the Python frame of NamedTuple.__new__.
_new_event = tuple.__new__


class SSEDecoder:
    """Incremental text/event-stream decoder (WHATWG rules): feed raw byte chunks as they arrive.

    Bytes wait until their event's blank line has arrived, then the whole run of complete
    events is split at once (``bytes.split``, in C); an event that is one ``data: ...``
    line, as nearly all are, takes no per-line Python work. A chunk may end anywhere, even
    inside a UTF-8 character or between CR and LF. ``max_line_bytes`` bounds any one line;
    ``max_event_bytes`` bounds the data lines of an event and the bytes of one still
    waiting for its blank line.
    """

    def __init__(self, max_line_bytes: int = 1 << 20, *, max_event_bytes: int = 1 << 22) -> None:
        self._max_line_bytes = max_line_bytes
        self._max_event_bytes = max_event_bytes
        self._pending = bytearray()  # lines of the event still waiting for its blank line
        self._line_bytes = 0  # of which the last line, still waiting for its end
        self._skip_lf = False
        self._first = True
        self._fast_limit = min(max_line_bytes, max_event_bytes) + 2

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if (
            # The usual chunk, one whole "data: ...\n\n" event and nothing else: no frame more.
            chunk.find(b"\n") == len(chunk) - 2
            and chunk.endswith(b"\n\n")
            and chunk.startswith(b"data: ")
            and not (self._pending or self._skip_lf or self._first)
            and chunk.find(b"\r") < 0
            and len(chunk) <= self._fast_limit
        ):
            return [_new_event(SSEEvent, ("message", chunk[6:-2].decode("utf-8", "replace")))]
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]  # the LF of a CRLF split across chunks
        if not chunk:
            return []
        if chunk.find(b"\r") >= 0:  # CRLF and CR end lines too: make every line end an LF
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        pending = self._pending
        # A blank line may start at the last byte already pending.
        start = len(pending) - 1 if pending else 0
        data: bytes | bytearray = chunk
        if pending:
            pending += chunk
            data = pending
        end = data.rfind(b"\n\n", start)
        if end < 0:
            if data is chunk:
                pending += chunk
            self._hold(chunk)
            return []
        events = self._events(data[:end])
        rest = data[end + 2 :]
        pending.clear()
        if rest:
            pending += rest
            self._line_bytes = 0
            self._hold(rest)
        return events

    def between_events(self, chunk: bytes) -> bool:
        """Whether ``chunk``, arriving now, starts at an event's start and is within the line
        limit: if it is then one whole event, nothing is lost by not feeding it."""
        return not (self._pending or self._skip_lf or self._first) and len(chunk) <= (
            self._fast_limit
        )

    def close(self) -> list[SSEEvent]:
        """End of stream: dispatch a last event that no blank line followed."""
        rest, self._pending = bytes(self._pending), bytearray()
        return self._events(rest) if rest else []

    def _hold(self, added: bytes | bytearray) -> None:
        newline = added.rfind(b"\n")
        if newline < 0:
            self._line_bytes += len(added)
        else:
            self._line_bytes = len(added) - newline - 1
        if self._line_bytes > self._max_line_bytes:
            raise StreamFormatError(f"line longer than {self._max_line_bytes} bytes")
        if len(self._pending) > self._max_event_bytes:
            raise StreamFormatError(f"event longer than {self._max_event_bytes} bytes")

    def _events(self, complete: bytes | bytearray) -> list[SSEEvent]:
        """Events from whole events' bytes, blank lines between them already taken out."""
        if self._first:
            self._first = False
            complete = complete.removeprefix(b"\xef\xbb\xbf")
        events: list[SSEEvent] = []
        for block in complete.split(b"\n\n"):
            if block.startswith(b"data: ") and block.find(b"\n") < 0:
                if len(block) > self._max_line_bytes or len(block) > self._max_event_bytes:
                    self._check_line(len(block))
                    self._check_data(len(block))
                data = block[6:].decode("utf-8", "replace")
                events.append(_new_event(SSEEvent, ("message", data)))
            elif block:
                self._block(block, events)
        return events

    def _block(self, block: bytes | bytearray, events: list[SSEEvent]) -> None:
        """One event's lines, the general way (it may begin with blank lines)."""
        name: bytes | bytearray = b""
        data: list[bytes | bytearray] = []
        size = 0
        for line in block.split(b"\n"):
            self._check_line(len(line))
            if not line:
                _dispatch(name, data, events)
                name, data, size = b"", [], 0
                continue
            field, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if field == b"data":
                size += len(line)
                self._check_data(size)
                data.append(value)
            elif field == b"event":
                name = value
            # Comments (empty name), id, retry and unknown fields change nothing we read.
        _dispatch(name, data, events)

    def _check_line(self, size: int) -> None:
        if size > self._max_line_bytes:
            raise StreamFormatError(f"line longer than {self._max_line_bytes} bytes")

    def _check_data(self, size: int) -> None:
        if size > self._max_event_bytes:
            raise StreamFormatError(f"event longer than {self._max_event_bytes} bytes")


def _dispatch(
    name: bytes | bytearray, data: list[bytes | bytearray], events: list[SSEEvent]
) -> None:
    if data:
        event = name.decode("utf-8", "replace") or "message"
        events.append(SSEEvent(event, b"\n".join(data).decode("utf-8", "replace")))


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
    data = event.data
    if not data.startswith("{") and data.strip() == "[DONE]":
        return StreamFacts(done=True)
    if event.event == "error":
        return StreamFacts(error=_error_from_data(data))
    payload = _load_object(data)
    return _ordinary_chunk(payload, "delta") or _openai_facts(payload, "delta")


class OpenAIEventReader:
    """``read_openai_event`` for one stream, with a shortcut for its ordinary chunks.

    Servers send nearly every chunk of an answer as the same JSON with only the text
    changed (same id, created, model, key order and spacing). Once one chunk was parsed in
    full and found to be an ordinary answer chunk, an event whose data is that chunk's bytes
    before and after its text, around other non-empty text that needs no JSON escaping, is
    the same valid object with other text: an answer chunk, exactly, with no parse. Anything
    else is parsed in full, so the facts are always those ``read_openai_event`` gives.
    """

    def __init__(self) -> None:
        self._before: str | None = None
        self._after = ""
        self._chunk_before: bytes | None = None
        self._chunk_after = b""

    def __call__(self, event: SSEEvent) -> StreamFacts:
        data, before = event.data, self._before
        if before is not None and data.startswith(before) and data.endswith(self._after):
            text = data[len(before) : len(data) - len(self._after)]
            # _plain(text), written out: this runs once per token.
            if text and '"' not in text and "\\" not in text and text.isprintable():
                if event.event != "error":
                    return _ANSWER
        facts = read_openai_event(event)
        if before is None and facts is _ANSWER:
            self._learn(data)
        return facts

    def answer_chunk(self, chunk: bytes) -> bool:
        """Whether ``chunk`` is exactly one event, ``data: `` + data + blank line, whose data
        the shortcut above takes for an answer chunk. The stream reader asks first, for a
        chunk that starts between events: such a chunk needs no decoder and no event.
        The text must decode as UTF-8 and be plain, so it holds no line end either."""
        before, after = self._chunk_before, self._chunk_after
        if before is None or not (chunk.startswith(before) and chunk.endswith(after)):
            return False
        end = len(chunk) - len(after)
        if end <= len(before):
            return False
        try:
            return _plain(chunk[len(before) : end].decode())
        except UnicodeDecodeError:
            return False

    def _learn(self, data: str) -> None:
        start = data.find(_CONTENT_KEY)
        if start < 0 or data.find(_CONTENT_KEY, start + 1) >= 0:
            return  # no "content" key written this way, or more than one
        start += len(_CONTENT_KEY)
        end = data.find('"', start)
        if end > start and _plain(data[start:end]):
            self._before, self._after = data[:start], data[end:]
            if data.isprintable():  # one line: it travels as one "data:" line
                self._chunk_before = b"data: " + self._before.encode()
                self._chunk_after = self._after.encode() + b"\n\n"


def _plain(text: str) -> bool:
    """Whether ``text`` stands in a JSON string as it is: no quote, backslash or control
    character (nor, to keep this one C call, other unprintable ones such as U+2028)."""
    return '"' not in text and "\\" not in text and text.isprintable()


_CONTENT_KEY = '"content":"'


def read_openai_body(body: bytes) -> StreamFacts:
    """A whole non-streaming chat.completion (or legacy completion) body."""
    payload = _load_object(body)
    return _ordinary_chunk(payload, "message") or _openai_facts(payload, "message")


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
        raise StreamFormatError("not JSON", data) from exc
    if not isinstance(payload, dict):
        raise StreamFormatError("not a JSON object", data)
    return payload


def _openai_facts(payload: Mapping[str, Any], part_key: str) -> StreamFacts:
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
    if len(part) == 1 and content:
        return _ANSWER  # {"content": "..."}: nearly every chunk of an answer
    return StreamFacts(answer=bool(content), reasoning=_has_reasoning(part))


# Shared, so never changed: the facts of an ordinary answer chunk.
_ANSWER = StreamFacts(answer=True)


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
