"""Header values never leave the process: what a server repeats of them is cut from the
error text a sample keeps (OpenAI's 401 says "Incorrect API key provided: sk-...")."""

from __future__ import annotations

from collections.abc import Mapping

REDACTED = "<redacted>"
CONTROL_CHARACTER_PROBLEM = (
    "the value has a control character, such as the line break a secret read from a file "
    "often ends with; HTTP cannot send it"
)
# Shorter parts ("Bearer", "Basic") are words, not secrets, and would garble messages.
MIN_SECRET_LENGTH = 8


def secret_parts(headers: Mapping[str, str]) -> list[str]:
    """Each header value and each of its words that could be a secret, longest first."""
    parts = {value.strip() for value in headers.values()}
    parts |= {word for value in headers.values() for word in value.split()}
    return sorted((p for p in parts if len(p) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def scrub_secrets(text: str | None, headers: Mapping[str, str]) -> str | None:
    """``text`` with every header value (or word of one) replaced by ``<redacted>``."""
    if not text:
        return text
    for part in secret_parts(headers):
        text = text.replace(part, REDACTED)
    return text


def has_control_character(value: str) -> bool:
    """A header value HTTP cannot carry (httpx would refuse it, quoting it in the error)."""
    return any((ord(char) < 32 and char != "\t") or ord(char) == 127 for char in value)
