"""Names to addresses for the probe's connections: one seam (``Resolver``), the system's
resolver behind it (``SystemResolver``, getaddrinfo in asyncio's thread pool).

A test gives the backend its own resolver (a slow one, one that answers IPv6 first); the
time a resolver takes is the sample's ``dns`` (docs/phases.md).
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any, Protocol


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        """``(family, sockaddr)`` pairs for ``host``, in the order to try them (none:
        no address; an ``OSError`` for a name that does not resolve)."""
        ...


class SystemResolver:
    async def resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [(info[0], info[4]) for info in infos]
