"""What a sample keeps of a response's own words: the error text, the request id, the names
of its server timings. A server can repeat a target's header values in any of them, so
each is scrubbed of them (``app.probe.redact``) before it is cut to its limit.
"""

from __future__ import annotations

import httpx

from app.probe.connection import stream_address
from app.probe.redact import Redactor
from app.probe.sample import Sample, ServerTiming, Status
from app.probe.sse import StreamFormatError

ERROR_TEXT_LIMIT = 500
REQUEST_ID_LIMIT = 200
_REQUEST_ID_HEADERS = ("x-request-id", "request-id", "x-amzn-requestid", "cf-ray")


def describe(
    sample: Sample,
    response: httpx.Response | None,
    body_error: str | None,
    error: BaseException | None,
    redactor: Redactor,
) -> None:
    """Fill in the sample's error class and text."""
    if error is not None:
        sample.error_class = type(error).__name__
        sample.error = error_text(error, redactor)
    elif sample.status is Status.HTTP_ERROR:
        assert response is not None
        sample.error_class = f"HTTP{sample.http_status}"
        sample.error = http_error_text(response, body_error, redactor)


def error_text(error: BaseException, redactor: Redactor) -> str:
    if isinstance(error, StreamFormatError):
        # Its own message quotes the bad data cut short, before anything was scrubbed.
        return redactor.cut(error.describe(redactor.cut), ERROR_TEXT_LIMIT)
    return redactor.cut(str(error) or repr(error), ERROR_TEXT_LIMIT)


def http_error_text(response: httpx.Response, body_error: str | None, redactor: Redactor) -> str:
    """``401 Unauthorized: <the body's message> (retry-after 7)``."""
    text = f"{response.status_code} {response.reason_phrase}".strip()
    if body_error:
        text = f"{text}: {body_error}"
    retry_after = response.headers.get("retry-after")
    if retry_after:
        text = f"{text} (retry-after {retry_after})"
    return redactor.cut(text, ERROR_TEXT_LIMIT)


def request_id(response: httpx.Response | None, redactor: Redactor) -> str | None:
    if response is None:
        return None
    for name in _REQUEST_ID_HEADERS:
        value: str | None = response.headers.get(name)
        if value:
            return redactor.cut(value, REQUEST_ID_LIMIT)
    return None


def scrub_timing(timing: ServerTiming, redactor: Redactor) -> ServerTiming:
    """Server-Timing names are the server's to choose: a key can be one of them."""
    timing.raw = {redactor.scrub(name): ms for name, ms in timing.raw.items()}
    return timing


def remote_address(response: httpx.Response | None) -> str | None:
    stream = None if response is None else response.extensions.get("network_stream")
    return stream_address(stream)
