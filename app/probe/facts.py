"""What one event or one whole answer of an LLM endpoint says (``StreamFacts``), and the
JSON helpers the providers' readers share: loading an object, usage and timings, errors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from app.probe.sample import ServerTiming, Tokens
from app.probe.servertiming import timing_from_usage, tokens_from_usage
from app.probe.sse import StreamFormatError


@dataclass(slots=True)
class StreamFacts:
    answer: bool = False  # carries non-empty answer output (text, or tool-call arguments)
    reasoning: bool = False  # carries non-empty reasoning output
    done: bool = False  # end-of-stream marker ([DONE], message_stop)
    error: str | None = None  # the stream reported an error
    tokens: Tokens | None = None
    server_timing: ServerTiming | None = None


def load_object(data: str | bytes) -> dict[str, Any]:
    """A JSON object, or ``StreamFormatError`` quoting what it was instead."""
    try:
        payload = orjson.loads(data)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
        raise StreamFormatError("not JSON", data) from exc
    if not isinstance(payload, dict):
        raise StreamFormatError("not a JSON object", data)
    return payload


def error_from_data(data: str) -> str:
    """The message of an ``event: error``'s data, JSON or plain text."""
    try:
        payload = json.loads(data)
    except ValueError:
        return data.strip() or "error event"
    if isinstance(payload, Mapping) and payload.get("error"):
        return error_message(payload["error"])
    return error_message(payload)


def error_message(error: Any) -> str:
    if isinstance(error, Mapping):
        for key in ("message", "type", "code"):
            if nonempty(error.get(key)):
                return str(error[key])
        return json.dumps(error)
    return str(error) if error else "error"


def with_usage(facts: StreamFacts, payload: Mapping[str, Any]) -> StreamFacts:
    """``facts`` with the token counts and server timings ``payload`` carries, if any."""
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


def objects(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def nonempty(value: Any) -> bool:
    return isinstance(value, str) and value != ""
