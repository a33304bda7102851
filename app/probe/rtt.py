"""Round-trip estimates for the ``network`` phase when the server reports no timing.

``tcp``: the kernel's smoothed RTT of the very socket the request used (Linux ``TCP_INFO``),
which it keeps from the handshake and every ACK since, so a pooled connection has one too.
It is the transport's round trip: behind a CDN or a TLS-terminating proxy it stops at the
edge, not at the inference server.
"""

from __future__ import annotations

import socket
import struct
import sys
from typing import Any

import httpx

# struct tcp_info: 8 one-byte fields, then 32-bit fields; tcpi_rtt (µs) is the 16th of those.
_TCPI_RTT_OFFSET = 8 + 15 * 4
_TCP_INFO_LEN = 104


def tcp_rtt_ms(sock: Any) -> float | None:
    """Smoothed RTT of a connected TCP socket in ms, or None where the OS does not say."""
    if not isinstance(sock, socket.socket) or not sys.platform.startswith("linux"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:
        return None
    if len(info) < _TCPI_RTT_OFFSET + 4:
        return None
    (rtt_us,) = struct.unpack_from("I", info, _TCPI_RTT_OFFSET)
    return float(rtt_us) / 1000


def response_socket(response: httpx.Response) -> Any:
    stream = response.extensions.get("network_stream")
    return None if stream is None else stream.get_extra_info("socket")


def fastest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None
