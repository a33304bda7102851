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
from dataclasses import dataclass
from typing import Any

import httpx

from app.probe.sample import Provenance, Sample, Status

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


def stream_rtt_ms(stream: Any) -> float | None:
    """The RTT of a network stream's socket: ours keep it past the close (a cut request's
    connection is closed before anyone can ask); any other is asked while it is open."""
    if stream is None:
        return None
    kept = stream.get_extra_info("tcp_rtt_ms")
    if isinstance(kept, float):
        return kept
    return tcp_rtt_ms(stream.get_extra_info("socket"))


def response_stream(response: httpx.Response | None) -> Any:
    return None if response is None else response.extensions.get("network_stream")


def fastest(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


@dataclass(frozen=True, slots=True)
class Earlier:
    """What a run's earlier samples measured, for a sample that cannot measure it itself."""

    rtt_ms: float | None = None  # the kernel's RTT of the client's connection, last read
    # The last network split off against the server's own account of its time (measured).
    network_ms: float | None = None

    def after(self, sample: Sample) -> Earlier:
        rtt_ms = self.rtt_ms if sample.rtt_ms is None else sample.rtt_ms
        network_ms = self.network_ms
        measured = sample.provenance.get("network") is Provenance.MEASURED
        if sample.status is Status.OK and measured:
            network_ms = sample.phases["network"]
        return Earlier(rtt_ms, network_ms)
