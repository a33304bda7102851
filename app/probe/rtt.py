"""Round-trip estimates for the ``network`` phase when the server reports no timing.

``tcp``: the kernel's RTT of the very socket the request used (Linux ``TCP_INFO``), which it
keeps from the handshake and every ACK since, so a pooled connection has one too: the
least it has seen (``tcpi_min_rtt``), not the smoothed one (``tcpi_rtt``). A server ACKs a
request only with its answer once the connection is past its first exchanges (delayed ACK,
up to 40 ms), so each request of a pooled connection adds its server's time to the smoothed
RTT: through nginx, to a 30 ms upstream, it climbed from 0.02 to 12.7 ms in five requests
while the least stayed 0.02. It is the transport's round trip: behind a CDN or a
TLS-terminating proxy it stops at the edge, not at the inference server.
"""

from __future__ import annotations

import socket
import struct
import sys
from dataclasses import dataclass
from typing import Any

import httpx

from app.probe.sample import Provenance, Sample, Status

# struct tcp_info: 8 one-byte fields, then 32-bit fields: tcpi_rtt (µs) is the 16th; after
# 24 of them, four 64-bit counters and three more 32-bit fields come before tcpi_min_rtt
# (Linux 4.6 on; an older kernel gives a shorter struct, and the smoothed RTT is used).
_TCPI_RTT_OFFSET = 8 + 15 * 4
_TCPI_MIN_RTT_OFFSET = 8 + 24 * 4 + 4 * 8 + 3 * 4
_TCP_INFO_LEN = _TCPI_MIN_RTT_OFFSET + 4


def tcp_rtt_ms(sock: Any) -> float | None:
    """The least RTT a connected TCP socket has seen, in ms (its smoothed RTT where the
    kernel keeps no least one), or None where the OS does not say."""
    if not isinstance(sock, socket.socket) or not sys.platform.startswith("linux"):
        return None
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
    except OSError:
        return None
    if len(info) < _TCPI_RTT_OFFSET + 4:
        return None
    (rtt_us,) = struct.unpack_from("I", info, _TCPI_RTT_OFFSET)
    if len(info) >= _TCPI_MIN_RTT_OFFSET + 4:
        (least_us,) = struct.unpack_from("I", info, _TCPI_MIN_RTT_OFFSET)
        if 0 < least_us <= rtt_us:  # ~0 (0xFFFFFFFF) until a first sample
            rtt_us = least_us
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
