"""``kind: openai``: OpenAI's chat.completions (and legacy completions), streamed as
server-sent events or answered whole, and every server that speaks it (vLLM, llama.cpp,
TGI, Groq, DeepSeek, OpenRouter, Mistral …)."""

from __future__ import annotations

from collections.abc import Mapping
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
from app.probe.sse import SSEEvent


def read_openai_event(event: SSEEvent) -> StreamFacts:
    """One chat.completions (or legacy completions) chunk."""
    data = event.data
    if not data.startswith("{") and data.strip() == "[DONE]":
        return StreamFacts(done=True)
    if event.event == "error":
        return StreamFacts(error=error_from_data(data))
    payload = load_object(data)
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
    payload = load_object(body)
    return _ordinary_chunk(payload, "message") or _openai_facts(payload, "message")


def _openai_facts(payload: Mapping[str, Any], part_key: str) -> StreamFacts:
    facts = StreamFacts(error=_openai_error(payload))
    for choice in objects(payload.get("choices")):
        part = choice.get(part_key)
        part = part if isinstance(part, Mapping) else {}
        facts.answer = facts.answer or _has_answer(part) or nonempty(choice.get("text"))
        facts.reasoning = facts.reasoning or _has_reasoning(part)
    return with_usage(facts, payload)


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
    if nonempty(part.get("content")) or nonempty(part.get("refusal")):
        return True
    if _content_parts_have_text(part.get("content")):
        return True
    calls = [call.get("function") for call in objects(part.get("tool_calls"))]
    calls.append(part.get("function_call"))  # the pre-tools shape
    return any(_call_has_output(call) for call in calls)


def _content_parts_have_text(content: Any) -> bool:
    # Some OpenAI-compatible servers (Mistral among them) stream content as a list of parts.
    return any(nonempty(item.get("text")) for item in objects(content))


def _call_has_output(function: Any) -> bool:
    if not isinstance(function, Mapping):
        return False
    return nonempty(function.get("name")) or nonempty(function.get("arguments"))


def _has_reasoning(part: Mapping[str, Any]) -> bool:
    # DeepSeek and older vLLM say reasoning_content; newer vLLM and OpenRouter say reasoning.
    return nonempty(part.get("reasoning_content")) or nonempty(part.get("reasoning"))


def _openai_error(payload: Mapping[str, Any]) -> str | None:
    error = payload.get("error")
    if error:
        return error_message(error)
    if payload.get("object") == "error":  # vLLM's error shape
        return error_message(payload)
    return None


def _stream(answer: Answer) -> StreamReader:
    events = OpenAIEventReader()  # per stream: it learns the stream's chunk envelope
    return StreamReader(
        events, answer.marks, answer.findings, answer.limit, answer_chunk=events.answer_chunk
    )


OPENAI = LlmKind(Kind.OPENAI, stream=_stream, body=read_openai_body)
