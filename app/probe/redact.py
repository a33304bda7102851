"""Header values never leave the process: what a server repeats of them is cut from every
text a sample keeps (OpenAI's 401 says "Incorrect API key provided: sk-...").

Every header value of a target counts as a secret. A text is scrubbed *before* it is cut
to its limit, so a cut can never split a whole secret and keep its first characters; and
the end of every text is checked for the start of a secret, because the text may have been
cut before it reached us (by the server, or by our own cap on what we read of a body).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

REDACTED = "<redacted>"
CONTROL_CHARACTER_PROBLEM = (
    "the value has a control character, such as the line break a secret read from a file "
    "often ends with; HTTP cannot send it"
)
# Shorter parts ("Bearer", "Basic") are words, not secrets, and would garble messages.
MIN_SECRET_LENGTH = 8
# The start of a secret left at the end of a text somebody else may have cut: from this
# many characters on it is taken for one. Shorter, it would eat the last letters of
# ordinary messages ("…s" for a key that starts "sk-").
MIN_FRAGMENT = 4


def _parts(values: Iterable[str]) -> list[str]:
    values = list(values)
    parts = {value.strip() for value in values} | {w for value in values for w in value.split()}
    return sorted((p for p in parts if len(p) >= MIN_SECRET_LENGTH), key=len, reverse=True)


@dataclass(frozen=True, slots=True)
class Redactor:
    """Scrubs one target's header values out of texts; matching ignores case, since a
    server may echo a key lower-cased (Server-Timing names are kept that way)."""

    pattern: re.Pattern[str] | None
    # Parts without whitespace, lower-cased: a cut can leave any prefix of one.
    words: tuple[str, ...]

    @classmethod
    def of(cls, headers: Mapping[str, str]) -> Redactor:
        return _redactor(tuple(sorted(headers.values())))

    def scrub(self, text: str, *, cut_here: bool = False) -> str:
        """``text`` with every secret replaced by ``<redacted>``, and the start of one at
        its end too: from ``MIN_FRAGMENT`` characters on, or from one when ``cut_here``
        (we cut the text there ourselves, so whatever secret it ended with is a prefix)."""
        if self.pattern is None or not text:
            return text
        text = self.pattern.sub(REDACTED, text)
        return self._scrub_end(text, 1 if cut_here else MIN_FRAGMENT)

    def cut(self, text: str, limit: int) -> str:
        """``text`` scrubbed, then cut to ``limit`` characters: scrubbing first means the
        cut cannot keep the start of a whole secret; the new end is checked for the start
        of a partial one (a server that echoed half a key)."""
        text = self.scrub(text)
        if len(text) <= limit:
            return text
        return self._scrub_end(text[:limit], MIN_FRAGMENT)[:limit]

    def _scrub_end(self, text: str, shortest: int) -> str:
        """``text`` with the longest start of a secret it ends with replaced."""
        tail = text[-len(self.words[0]) :].lower() if self.words else ""
        found = 0
        for word in self.words:
            for size in range(min(len(word), len(tail)), max(shortest, found + 1) - 1, -1):
                if word.startswith(tail[-size:]):
                    found = size
                    break
        return text[:-found] + REDACTED if found else text


@functools.lru_cache(maxsize=256)
def _redactor(values: tuple[str, ...]) -> Redactor:
    # One per set of header values: probes of a target share it instead of compiling
    # a pattern per sample.
    parts = _parts(values)
    if not parts:
        return Redactor(None, ())
    pattern = re.compile("|".join(re.escape(part) for part in parts), re.IGNORECASE)
    words = {part.lower() for part in parts if not any(char.isspace() for char in part)}
    return Redactor(pattern, tuple(sorted(words, key=len, reverse=True)))


def scrub_secrets(text: str | None, headers: Mapping[str, str]) -> str | None:
    """``text`` with every header value (or word of one) replaced by ``<redacted>``."""
    if not text:
        return text
    return Redactor.of(headers).scrub(text)


def has_control_character(value: str) -> bool:
    """A header value HTTP cannot carry (httpx would refuse it, quoting it in the error)."""
    return any((ord(char) < 32 and char != "\t") or ord(char) == 127 for char in value)
