"""Wire formats the simulated endpoint speaks: OpenAI chat completions and Anthropic Messages.

Pure builders of bytes; no timing here. The shapes follow what the real APIs send, including
the parts a probe must skip (``: ping`` comments, role-only chunks, ``ping`` events).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

ANSWER_TOKEN = "tok "
REASONING_TOKEN = "hmm "
DEFAULT_MODEL = "sim-1"


@dataclass(frozen=True)
class Counts:
    prompt: int
    reasoning: int
    answer: int

    @property
    def completion(self) -> int:
        return self.reasoning + self.answer

    @property
    def total(self) -> int:
        return self.prompt + self.completion


@dataclass(frozen=True)
class Timing:
    """Server-side durations in seconds, as Groq reports them."""

    queue: float
    prompt: float
    completion: float


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def sse_data(obj: Any) -> bytes:
    return b"data: " + _json(obj) + b"\n\n"


def sse_event(name: str, obj: Any) -> bytes:
    return b"event: " + name.encode() + b"\n" + sse_data(obj)


def model_of(body: dict[str, Any]) -> str:
    model = body.get("model")
    return model if isinstance(model, str) else DEFAULT_MODEL


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """A word count of the prompt: close enough for a simulator, and never zero."""
    texts = [body.get("system")]
    for message in body.get("messages") or []:
        if isinstance(message, dict):
            texts.append(message.get("content"))
    return max(1, sum(_words(text) for text in texts))


def _words(content: Any) -> int:
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_words(part.get("text")) for part in content if isinstance(part, dict))
    return 0


def openai_usage(counts: Counts) -> dict[str, Any]:
    return {
        "prompt_tokens": counts.prompt,
        "completion_tokens": counts.completion,
        "total_tokens": counts.total,
        "completion_tokens_details": {"reasoning_tokens": counts.reasoning},
    }


def groq_usage(request_id: str, counts: Counts, timing: Timing) -> dict[str, Any]:
    usage = {
        "queue_time": timing.queue,
        "prompt_time": timing.prompt,
        "completion_time": timing.completion,
        "total_time": timing.queue + timing.prompt + timing.completion,
        "prompt_tokens": counts.prompt,
        "completion_tokens": counts.completion,
        "total_tokens": counts.total,
    }
    return {"id": request_id, "usage": usage}


class OpenAIChat:
    """Chunks of one ``chat.completion`` stream, or the whole non-streaming body."""

    def __init__(self, model: str, request_id: str) -> None:
        self._model = model
        self._id = "chatcmpl-" + request_id
        self._created = int(time.time())

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self._id, "object": kind, "created": self._created, "model": self._model}

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return sse_data(self._envelope("chat.completion.chunk") | {"choices": [choice]})

    def role(self) -> bytes:
        return self._chunk({"role": "assistant", "content": ""})

    def token(self, reasoning: bool) -> bytes:
        if reasoning:
            return self._chunk({"reasoning_content": REASONING_TOKEN})
        return self._chunk({"content": ANSWER_TOKEN})

    def finish(self) -> bytes:
        return self._chunk({}, finish="stop")

    def usage(self, counts: Counts, groq: dict[str, Any] | None) -> bytes:
        chunk = self._envelope("chat.completion.chunk") | {"choices": [], "usage": None}
        chunk["usage"] = openai_usage(counts)
        if groq is not None:
            chunk["x_groq"] = groq
        return sse_data(chunk)

    def completion(self, counts: Counts, groq: dict[str, Any] | None) -> bytes:
        message: dict[str, Any] = {"role": "assistant", "content": ANSWER_TOKEN * counts.answer}
        if counts.reasoning:
            message["reasoning_content"] = REASONING_TOKEN * counts.reasoning
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
        body = self._envelope("chat.completion") | {"choices": [choice]}
        body["usage"] = openai_usage(counts)
        if groq is not None:
            body["x_groq"] = groq
        return _json(body)


class AnthropicStream:
    """Events of one streaming Messages response."""

    def __init__(self, model: str, request_id: str, input_tokens: int) -> None:
        self._model = model
        self._id = "msg_" + request_id.replace("-", "")
        self._input_tokens = input_tokens

    def message_start(self) -> bytes:
        message: dict[str, Any] = {
            "id": self._id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": self._model,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": self._input_tokens, "output_tokens": 1},
        }
        return sse_event("message_start", {"type": "message_start", "message": message})

    def block_start(self, index: int, thinking: bool) -> bytes:
        block = {"type": "thinking", "thinking": ""} if thinking else {"type": "text", "text": ""}
        data = {"type": "content_block_start", "index": index, "content_block": block}
        return sse_event("content_block_start", data)

    def ping(self) -> bytes:
        return sse_event("ping", {"type": "ping"})

    def delta(self, index: int, reasoning: bool) -> bytes:
        if reasoning:
            delta = {"type": "thinking_delta", "thinking": REASONING_TOKEN}
        else:
            delta = {"type": "text_delta", "text": ANSWER_TOKEN}
        data = {"type": "content_block_delta", "index": index, "delta": delta}
        return sse_event("content_block_delta", data)

    def signature(self, index: int) -> bytes:
        delta = {"type": "signature_delta", "signature": "c2ltdWxhdGVk"}
        data = {"type": "content_block_delta", "index": index, "delta": delta}
        return sse_event("content_block_delta", data)

    def block_stop(self, index: int) -> bytes:
        return sse_event("content_block_stop", {"type": "content_block_stop", "index": index})

    def message_delta(self, output_tokens: int) -> bytes:
        data = {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": output_tokens},
        }
        return sse_event("message_delta", data)

    def message_stop(self) -> bytes:
        return sse_event("message_stop", {"type": "message_stop"})
