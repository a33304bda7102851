"""Raw marks from httpcore's ``trace`` extension.

httpcore announces each step of a request as ``<module>.<step>.started|complete|failed``.
Those names are not a stable API (pyproject pins httpcore's minor for that reason); this
module is the only place that knows them. DNS happens inside ``connect_tcp``: the stream
it returns says when the name was resolved (``resolved_ns``, app.probe.net.backend).
"""

from __future__ import annotations

from typing import Any

from app import clock
from app.probe.sample import Marks

# event name -> Marks field set the first time the event is seen
_EVENT_MARKS = {
    "connection.connect_tcp.started": "connect_start",
    "connection.connect_tcp.complete": "connect_end",
    "connection.start_tls.started": "tls_start",
    "connection.start_tls.complete": "tls_end",
    "http11.send_request_headers.started": "request_start",
    "http2.send_request_headers.started": "request_start",
    "http11.send_request_body.complete": "request_sent",
    "http2.send_request_body.complete": "request_sent",
    "http11.receive_response_headers.complete": "response_headers",
    "http2.receive_response_headers.complete": "response_headers",
    # The last body byte is in: later work (closing the response) is not the server's.
    "http11.receive_response_body.complete": "stream_end",
    "http2.receive_response_body.complete": "stream_end",
}

_STREAM_EVENTS = frozenset({"connection.connect_tcp.complete", "connection.start_tls.complete"})


class TraceRecorder:
    """Turns trace events into marks, in nanoseconds since ``start_ns``."""

    def __init__(self, start_ns: int) -> None:
        self.start_ns = start_ns
        self.marks = Marks()
        # The network stream of a connection made for this request (TLS over it, if any).
        self.fresh_stream: Any = None

    def now(self) -> int:
        return clock.now_ns() - self.start_ns

    async def __call__(self, event: str, info: dict[str, Any]) -> None:
        field_name = _EVENT_MARKS.get(event)
        if field_name is not None and getattr(self.marks, field_name) is None:
            setattr(self.marks, field_name, self.now())
        if event in _STREAM_EVENTS:
            self.fresh_stream = info.get("return_value")
            self._resolved(self.fresh_stream)

    def _resolved(self, stream: Any) -> None:
        resolved_ns = None if stream is None else stream.get_extra_info("resolved_ns")
        if isinstance(resolved_ns, int) and self.marks.dns_end is None:
            self.marks.dns_end = resolved_ns - self.start_ns

    def mark(self, field_name: str) -> int:
        """Set a mark from our own read loop, once; returns the time it holds."""
        value: int | None = getattr(self.marks, field_name)
        if value is None:
            value = self.now()
            setattr(self.marks, field_name, value)
        return value

    def redirected(self) -> None:
        """The next request follows a redirect: the answer's marks start again, and the
        chain so far ends now (``redirect_end``)."""
        marks = self.marks
        marks.request_sent = marks.response_headers = marks.first_byte = None
        marks.stream_end = None
        marks.redirect_end = self.now()

    @property
    def connection_reused(self) -> bool:
        return self.marks.connect_start is None and self.marks.request_start is not None
