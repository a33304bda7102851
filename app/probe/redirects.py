"""Redirects: ``kind: http`` follows them, hop by hop, up to the target's limit; the LLM
kinds never do. docs/phases.md says where a redirect's time goes (``server``).

A loop (a URL asked for twice in one chain) or a chain longer than the limit is an error
sample, never an ``ok`` one for the last 3xx. With ``follow_redirects: false`` the 3xx
itself is the answer. The LLM kinds POST their body: a 301, 302 or 303 would turn that
into a GET (what browsers and httpx do), so a redirect there is an error sample that
says where it pointed.
"""

from __future__ import annotations

import httpx

from app.probe.compat import build_redirect_request
from app.probe.kinds import KINDS
from app.probe.readers import ProbeError
from app.probe.spec import ProbeSpec

# A hop's body is read (so its connection can be used again) up to this, else dropped.
HOP_BODY_LIMIT = 64 * 1024


class TooManyRedirects(ProbeError):
    pass


class RedirectLoop(ProbeError):
    pass


class RedirectNotFollowed(ProbeError):
    """A redirect answered a target kind that does not follow them."""


def is_hop(spec: ProbeSpec, response: httpx.Response) -> bool:
    """``response`` is a redirect the probe must follow, or fail on."""
    if not response.has_redirect_location:
        return False
    return not KINDS[spec.kind].follows_redirects or spec.max_redirects > 0


def next_request(
    client: httpx.AsyncClient,
    request: httpx.Request,
    response: httpx.Response,
    spec: ProbeSpec,
    seen: list[httpx.URL],
) -> httpx.Request:
    """The request that follows ``response``; raises when the chain must stop there.

    ``seen`` holds the URLs of the chain so far, the first request's included.
    """
    hop = f"{response.status_code} to {response.headers['location']}"
    if not KINDS[spec.kind].follows_redirects:
        raise RedirectNotFollowed(f"{hop}: {spec.kind.value} targets do not follow redirects")
    if len(seen) > spec.max_redirects:
        raise TooManyRedirects(f"more than {spec.max_redirects} redirects; the last: {hop}")
    follow = build_redirect_request(client, request, response)  # httpx's own rules
    if follow.url in seen:
        raise RedirectLoop(f"redirect loop: {hop} asked for before")
    if not _keeps_headers(request.url, follow.url):
        # Every header value of a target counts as a secret, not only Authorization.
        for name in spec.headers:
            follow.headers.pop(name, None)
    seen.append(follow.url)
    return follow


async def drain(response: httpx.Response) -> None:
    """Read a hop's short body so its connection can serve the next hop; close it."""
    try:
        read = 0
        async for chunk in response.aiter_raw():
            read += len(chunk)
            if read > HOP_BODY_LIMIT:
                break
    finally:
        await response.aclose()


def _keeps_headers(url: httpx.URL, location: httpx.URL) -> bool:
    """Same origin, or the same host moving from http to https."""
    if url.host != location.host:
        return False
    ports = (_port(url), _port(location))
    if url.scheme == location.scheme:
        return ports[0] == ports[1]
    return url.scheme == "http" and location.scheme == "https" and ports == (80, 443)


def _port(url: httpx.URL) -> int | None:
    return url.port or {"http": 80, "https": 443}.get(url.scheme)
