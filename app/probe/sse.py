"""A text/event-stream decoder: byte chunks as they arrive in, events out.

It sits in the probe's read loop, so each event is decoded once and memory is bounded
however the server misbehaves. What an event means is the probe kind's business
(``app.probe.kinds``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

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
