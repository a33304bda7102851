"""A request body made afresh for every request: ``{{nonce}}`` and ``{{i}}`` in it.

A server with a prefix cache (llama.cpp, vLLM, SGLang, the hosted APIs) answers the second
request of a run from what the first one computed: the same body sent again skips the
prompt, so prefill is measured once per run, on sample 0, and every later sample reports a
queue that is really a cache hit. ``{{nonce}}`` (16 random hex digits, new for every
request) at the *start* of the prompt makes every prompt new from its first token; a prefix
cache reuses everything before the first token that differs, so a nonce at the end saves
only the end. ``{{i}}`` is the sample's index in its run (0, 1, …).

Only those two (spaces allowed inside the braces) are replaced, in every string of a JSON
body and in a body given as text or bytes; any other ``{{…}}`` stays as it is.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

_PLACEHOLDER = re.compile(r"\{\{\s*(nonce|i)\s*\}\}")
_PLACEHOLDER_BYTES = re.compile(rb"\{\{\s*(nonce|i)\s*\}\}")


def has_placeholders(body: Any) -> bool:
    """Whether ``body`` has anything to replace (most bodies have not: sent as they are)."""
    if isinstance(body, bytes):
        return _PLACEHOLDER_BYTES.search(body) is not None
    if isinstance(body, str):
        return _PLACEHOLDER.search(body) is not None
    if isinstance(body, dict):
        return any(has_placeholders(k) or has_placeholders(v) for k, v in body.items())
    if isinstance(body, list):
        return any(has_placeholders(item) for item in body)
    return False


def render(body: Any, index: int) -> Any:
    """``body`` for the request with index ``index``; one nonce for all its placeholders."""
    values = {"nonce": secrets.token_hex(8), "i": str(index)}
    return _render(body, values)


def _render(body: Any, values: dict[str, str]) -> Any:
    if isinstance(body, str):
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], body)
    if isinstance(body, bytes):
        return _PLACEHOLDER_BYTES.sub(lambda m: values[m.group(1).decode()].encode(), body)
    if isinstance(body, dict):
        return {_render(key, values): _render(value, values) for key, value in body.items()}
    if isinstance(body, list):
        return [_render(item, values) for item in body]
    return body
