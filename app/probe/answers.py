"""What an answer said, read once the request is over, for a target's ``expect:`` checks.

The readers that time an answer (``app.probe.readers``, the kinds) look at as little of
each chunk as they can, since they run inside the measured request. A target with
``expect:`` gets its reader wrapped in a ``Keeper`` that only keeps the bytes (up to the
reader's own limit, which refuses anything longer); ``said`` reads them after the sample's
time is taken, so checking an answer costs the measurement nothing but an append a chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from app.probe.answercheck import AnswerSaid, failures
from app.probe.outcome import ERROR_TEXT_LIMIT
from app.probe.readers import BodyReader
from app.probe.redact import Redactor
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec
from app.probe.sse import SSEDecoder


class Keeper:
    """A ``BodyReader`` that passes every chunk on to ``reader`` and keeps a copy."""

    def __init__(self, reader: BodyReader) -> None:
        self.reader = reader
        self.streaming = reader.streaming
        self.parts: list[bytes] = []

    def feed(self, chunk: bytes, now_ns: int) -> None:
        self.reader.feed(chunk, now_ns)  # first: it refuses a body past its limit
        self.parts.append(chunk)

    def close(self, now_ns: int) -> None:
        self.reader.close(now_ns)

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)


def said(kind: Kind, body: bytes, *, streaming: bool) -> AnswerSaid:
    """What ``body`` (a whole answer, or every event of a stream) said."""
    found = AnswerSaid()
    if kind is Kind.HTTP:
        found.text = body.decode("utf-8", "replace")
        return found
    payloads = _events(body) if streaming else [_object(body)]
    read = _read_openai if kind is Kind.OPENAI else _read_anthropic
    texts: list[str] = []
    for payload in payloads:
        if payload is not None:
            read(found, texts, payload, "delta" if streaming else "message")
    found.text = "".join(texts)
    found.answer_chunks = len(texts)
    return found


def _events(body: bytes) -> list[dict[str, Any] | None]:
    decoder = SSEDecoder()
    events = [*decoder.feed(body), *decoder.close()]
    return [_object(event.data) for event in events if event.data.strip() != "[DONE]"]


def _object(data: str | bytes) -> dict[str, Any] | None:
    try:
        payload = orjson.loads(data)
    except ValueError:
        return None  # the timing reader has made it an error already
    return payload if isinstance(payload, dict) else None


def _read_openai(
    found: AnswerSaid, texts: list[str], payload: Mapping[str, Any], part_key: str
) -> None:
    _add_model(found, payload.get("model"))
    for choice in _objects(payload.get("choices")):
        part = choice.get(part_key)
        text = _text(part.get("content")) if isinstance(part, Mapping) else ""
        text = text or _text(choice.get("text"))  # legacy completions
        _add_text(texts, text)
        _add_reason(found, choice.get("finish_reason"))
    _add_usage(found, payload.get("usage"), "completion_tokens")


def _read_anthropic(
    found: AnswerSaid, texts: list[str], payload: Mapping[str, Any], part_key: str
) -> None:
    kind = payload.get("type")
    if kind == "message_start" and isinstance(payload.get("message"), Mapping):
        _read_anthropic(found, texts, payload["message"], part_key)
    elif kind == "message":  # a whole answer, or the message a stream starts with
        _add_model(found, payload.get("model"))
        for block in _objects(payload.get("content")):
            _add_text(texts, _block_text(block))
        _add_reason(found, payload.get("stop_reason"))
        _add_usage(found, payload.get("usage"), "output_tokens")
    elif kind == "content_block_delta" and isinstance(payload.get("delta"), Mapping):
        delta = payload["delta"]
        _add_text(texts, _text(delta.get("text")) if delta.get("type") == "text_delta" else "")
    elif kind == "message_delta":
        delta = payload.get("delta")
        _add_reason(found, delta.get("stop_reason") if isinstance(delta, Mapping) else None)
        _add_usage(found, payload.get("usage"), "output_tokens")


def _block_text(block: Mapping[str, Any]) -> str:
    return _text(block.get("text")) if block.get("type") == "text" else ""


def _text(value: Any) -> str:
    """Answer text: a string, or the text of a list of content parts (Mistral streams so)."""
    if isinstance(value, str):
        return value
    return "".join(_text(part.get("text")) for part in _objects(value))


def _objects(value: Any) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _add_text(texts: list[str], text: str) -> None:
    if text:
        texts.append(text)


def _add_model(found: AnswerSaid, model: Any) -> None:
    if isinstance(model, str) and model and model not in found.models:
        found.models.append(model)


def _add_reason(found: AnswerSaid, reason: Any) -> None:
    if isinstance(reason, str) and reason:
        found.finish_reasons.append(reason)


def _add_usage(found: AnswerSaid, usage: Any, key: str) -> None:
    count = usage.get(key) if isinstance(usage, Mapping) else None
    if isinstance(count, int) and not isinstance(count, bool):
        found.output_tokens = count


def judge(sample: Sample, spec: ProbeSpec, keeper: Keeper | None, redactor: Redactor) -> None:
    """An ok sample whose answer fails ``spec.expect`` becomes ``invalid_answer``, the
    reasons its error (scrubbed of the target's header values, as every error is)."""
    if spec.expect is None or sample.status is not Status.OK:
        return
    body, streaming = (b"", False) if keeper is None else (keeper.body, keeper.streaming)
    found = said(spec.kind, body, streaming=streaming)
    found.http_status = sample.http_status
    if sample.tokens.completion is not None:
        found.output_tokens = sample.tokens.completion
    reasons = failures(spec.expect, found, redactor.cut)
    if reasons:
        sample.status = Status.INVALID_ANSWER
        sample.error_class = "InvalidAnswer"
        sample.error = redactor.cut("; ".join(reasons), ERROR_TEXT_LIMIT)
