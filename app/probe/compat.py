"""The private parts of httpx and httpcore the probe uses, reached from this module alone.

httpx takes no network backend and builds no redirect for a caller that follows redirects
itself; httpcore keeps its socket-option type and its readability check private. The probe
needs all four, so they are reached here, and ``CHECKED`` names the minor versions this was
checked on: pyproject.toml pins the same ones, and tests/probe/test_compat.py fails when the
pins or the installed versions leave them, or when one of these names stops working.
"""

from __future__ import annotations

import httpcore
import httpx
from httpcore._backends.base import SOCKET_OPTION
from httpcore._utils import is_socket_readable

CHECKED = {"httpx": "0.28", "httpcore": "1.0"}

__all__ = [
    "CHECKED",
    "SOCKET_OPTION",
    "build_redirect_request",
    "is_socket_readable",
    "use_network_backend",
]


def use_network_backend(
    transport: httpx.AsyncHTTPTransport, backend: httpcore.AsyncNetworkBackend
) -> None:
    """Make ``transport``'s connection pool (httpcore's) connect through ``backend``."""
    transport._pool._network_backend = backend  # noqa: SLF001


def build_redirect_request(
    client: httpx.AsyncClient, request: httpx.Request, response: httpx.Response
) -> httpx.Request:
    """The request httpx would send next for ``response``'s redirect: 303 (and 301/302
    after a POST) a GET without the body, Authorization dropped across origins, the
    client's cookies."""
    return client._build_redirect_request(request, response)  # noqa: SLF001
