"""The notifiers' one way out: every outbound request goes through ``post_json``.

Tests that cannot use a real receiver (Slack is someone else's service) replace
``transport`` with an ``httpx.MockTransport``; nothing else needs patching.

How an answer is judged::

    2xx                     delivered
    408, 429, 5xx           TransportError(permanent=False): tried again later
    other 4xx, 3xx          TransportError(permanent=True): the request itself is wrong
    timeout, refused, ...   TransportError(permanent=False)
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from app.notifiers.base import IDEMPOTENCY_HEADER, TransportError, scrub

# None: the network. Tests may put an ``httpx.MockTransport`` here.
transport: httpx.AsyncBaseTransport | None = None

RETRYABLE_4XX = frozenset({408, 425, 429})
_BODY_LIMIT = 64 * 1024
_SHOWN_BODY = 300
_RETRY_AFTER_CAP_S = 3600.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where to send, with what credentials; ``shown`` is all of it that errors may name."""

    url: str = field(repr=False)
    timeout_s: float
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    auth: tuple[str, str] | None = field(default=None, repr=False)
    # Secrets the body carries (PagerDuty's routing key): scrubbed from what errors quote.
    body_secrets: tuple[str, ...] = field(default=(), repr=False)

    @property
    def shown(self) -> str:
        parts = urlsplit(self.url)
        host = parts.hostname or "?"
        return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")

    def secrets(self) -> list[str]:
        parts = urlsplit(self.url)
        found = [self.url, parts.path, parts.query, parts.password or ""]
        found += self.headers.values()
        found += self.body_secrets
        if self.auth is not None:
            found.append(self.auth[1])
        return found


async def post_json(endpoint: Endpoint, body: Any, idempotency_key: str) -> httpx.Response:
    """POST ``body`` as JSON with the ``Idempotency-Key`` header; returns a 2xx response or
    raises ``TransportError``. The whole exchange, body included, is bounded by
    ``endpoint.timeout_s``.
    """
    try:
        async with asyncio.timeout(endpoint.timeout_s):
            response = await _exchange(endpoint, body, idempotency_key)
    except (TimeoutError, httpx.TimeoutException):
        message = f"{endpoint.shown}: no answer within {endpoint.timeout_s:g} s"
        raise TransportError(message) from None
    except httpx.InvalidURL as exc:
        reason = scrub(f"invalid URL: {exc}", endpoint.secrets())
        raise TransportError(f"{endpoint.shown}: {reason}", permanent=True) from None
    except httpx.HTTPError as exc:
        reason = scrub(f"{type(exc).__name__}: {exc}", endpoint.secrets())
        raise TransportError(f"{endpoint.shown}: {reason}") from None
    _judge(endpoint, response)
    return response


async def _exchange(endpoint: Endpoint, body: Any, idempotency_key: str) -> httpx.Response:
    async with httpx.AsyncClient(
        transport=transport,
        verify=_tls(),
        timeout=endpoint.timeout_s,
        follow_redirects=False,
        auth=endpoint.auth,
    ) as client:
        headers = {**endpoint.headers, IDEMPOTENCY_HEADER: idempotency_key}
        request = client.build_request("POST", endpoint.url, json=body, headers=headers)
        response = await client.send(request, stream=True)
        try:
            content = b""
            async for chunk in response.aiter_bytes():
                content += chunk
                if len(content) >= _BODY_LIMIT:
                    break
        finally:
            await response.aclose()
        return httpx.Response(response.status_code, headers=response.headers, content=content)


@functools.cache
def _tls() -> ssl.SSLContext:
    """Built once: loading the CA bundle is costly, a client per send need not pay it."""
    return httpx.create_ssl_context()


def _judge(endpoint: Endpoint, response: httpx.Response) -> None:
    status = response.status_code
    if 200 <= status < 300:
        return
    said = scrub(_text(response), endpoint.secrets())
    message = f"{endpoint.shown}: HTTP {status}" + (f": {said}" if said else "")
    if status >= 500 or status in RETRYABLE_4XX:
        raise TransportError(message, retry_after=_retry_after(response))
    if 300 <= status < 400:
        raise TransportError(f"{message} (redirects are not followed)", permanent=True)
    raise TransportError(message, permanent=True)


def _text(response: httpx.Response) -> str:
    text = response.content[:_SHOWN_BODY].decode("utf-8", "replace")
    return " ".join(text.split())


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after", "")
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), _RETRY_AFTER_CAP_S)
