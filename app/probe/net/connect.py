"""Connecting the probe's socket: a plain non-blocking socket, addresses raced only when a
name resolves to more than one (happy eyeballs, RFC 8305), a timeout per call. The moment
the name was resolved is kept: it splits ``connect`` into DNS and TCP (docs/phases.md)."""

from __future__ import annotations

import asyncio
import os
import select
import socket
from asyncio.staggered import staggered_race
from functools import partial
from ipaddress import ip_address
from typing import Any

from app import clock
from app.probe.compat import SOCKET_OPTION
from app.probe.net.resolver import Resolver

# RFC 8305's recommended head start of one address over the next.
HAPPY_EYEBALLS_DELAY_S = 0.25


async def connect(
    host: str,
    port: int,
    local_address: str | None,
    options: list[SOCKET_OPTION],
    resolver: Resolver,
) -> tuple[socket.socket, int]:
    """The connected socket, and when (``clock.now_ns``) its name was resolved."""
    addresses = await _resolve(host, port, resolver)
    resolved_ns = clock.now_ns()
    if len(addresses) == 1:
        return await _connect_one(addresses[0], local_address, options), resolved_ns
    return await race(addresses, local_address, options), resolved_ns


async def _resolve(host: str, port: int, resolver: Resolver) -> list[tuple[Any, ...]]:
    """(family, sockaddr) to try, in order; an IP literal needs no resolver (nor thread)."""
    try:
        literal = ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        return [(family, (str(literal), port))]
    addresses = await resolver.resolve(host, port)
    if not addresses:
        raise OSError(f"no address found for {host}")
    return _interleave(addresses)


def _interleave(addresses: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Alternate address families, first family first (RFC 8305, section 4)."""
    first = [a for a in addresses if a[0] == addresses[0][0]]
    other = [a for a in addresses if a[0] != addresses[0][0]]
    mixed = [a for pair in zip(first, other, strict=False) for a in pair]
    rest = first[len(other) :] if len(first) > len(other) else other[len(first) :]
    return mixed + rest


async def _connect_one(
    address: tuple[Any, ...], local_address: str | None, options: list[SOCKET_OPTION]
) -> socket.socket:
    family, sockaddr = address
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # asyncio sets TCP_NODELAY only on sockets made with proto=IPPROTO_TCP. Without it a
        # request body written after its headers waits for the server's ACK (Nagle), which
        # lands in the measured network phase.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        prepare(sock, local_address, options)
        if not _connected_at_once(sock, sockaddr):
            await asyncio.get_running_loop().sock_connect(sock, sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


def _connected_at_once(sock: socket.socket, sockaddr: Any) -> bool:
    """Start connecting; True if the handshake is already done (as it is on loopback or a
    LAN): then no loop turn, and no wake-up from the selector, is spent waiting for it."""
    try:
        sock.connect(sockaddr)
        return True
    except BlockingIOError:
        pass
    ready = select.poll()
    ready.register(sock, select.POLLOUT)
    if not ready.poll(0):
        return False  # asyncio's sock_connect waits for the rest (connect gives EALREADY)
    error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if error:
        raise OSError(error, os.strerror(error))
    return True


async def race(
    addresses: list[tuple[Any, ...]], local_address: str | None, options: list[SOCKET_OPTION]
) -> socket.socket:
    """Happy eyeballs: each address gets a head start over the next; the first in wins."""
    attempts = [partial(_connect_one, address, local_address, options) for address in addresses]
    winner, _, errors = await staggered_race(attempts, HAPPY_EYEBALLS_DELAY_S)
    if winner is None:
        raise OSError("; ".join(str(error) for error in errors if error is not None))
    assert isinstance(winner, socket.socket)
    return winner


def prepare(sock: socket.socket, local_address: str | None, options: list[SOCKET_OPTION]) -> None:
    sock.setblocking(False)
    for option in options:
        sock.setsockopt(*option)
    if local_address is not None:
        sock.bind((local_address, 0))
