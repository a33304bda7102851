"""``connect`` split into ``dns``, ``tcp`` and ``tls``, and the address it reached.

Pure but for ``describe``, which fills a finished sample in from its marks and the
connection's stream. The three parts are slices of ``connect`` itself and add up to it
exactly, so the phases, their shares and the detectors are what they were; docs/phases.md
has the formulas:

* ``dns``: from the request's start until the name resolved (``dns_end``; an IP literal
  resolves at once). A wait for the pool, if any, is in it: it comes first.
* ``tcp``: then until the TCP handshake is done (``connect_end``), or until the request
  goes out (``request_start``) on a plain connection.
* ``tls``: then until the request goes out, the TLS handshake in it.

A request sent on a connection the pool kept (``connection_reused``) made none: its
connect, the pool's hand-over, has no split (None).
"""

from __future__ import annotations

from typing import Any

from app.probe.sample import Marks, Sample

SUB_PHASES = ("dns", "tcp", "tls")
_NS_PER_MS = 1_000_000


def connect_split(marks: Marks, connect_ms: float | None) -> dict[str, float] | None:
    """``connect_ms`` (the sample's connect phase) split by ``marks``; None if it made no
    connection. A mark not reached is the end: the part it ends holds the rest."""
    if marks.connect_start is None or connect_ms is None:
        return None
    resolved = marks.dns_end
    if resolved is None and marks.connect_end is not None:
        resolved = marks.connect_start  # a backend that does not say: DNS stays in tcp
    dns_end = _at(resolved, 0.0, connect_ms)
    tcp_end = connect_ms if marks.tls_start is None else _at(marks.connect_end, dns_end, connect_ms)
    return {"dns": dns_end, "tcp": tcp_end - dns_end, "tls": connect_ms - tcp_end}


def _at(mark_ns: int | None, floor_ms: float, end_ms: float) -> float:
    if mark_ns is None:
        return end_ms
    return min(max(mark_ns / _NS_PER_MS, floor_ms), end_ms)


def address_family(address: str | None) -> str | None:
    """``ipv6`` for ``[::1]:443``, ``ipv4`` for ``127.0.0.1:443``."""
    if address is None:
        return None
    return "ipv6" if address.startswith("[") else "ipv4"


def stream_address(stream: Any) -> str | None:
    """``host:port`` (``[host]:port`` for IPv6) of the server a network stream reached."""
    address = None if stream is None else stream.get_extra_info("server_addr")
    if not address:
        return None
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def describe(sample: Sample, fresh_stream: Any) -> None:
    """The sample's connect split, and the address and family it reached: the answer's
    connection's, else that of the connection made for it (a TLS failure has no answer)."""
    sample.connect_split = connect_split(sample.marks, sample.phases.get("connect"))
    if sample.remote_address is None:
        sample.remote_address = stream_address(fresh_stream)
    sample.address_family = address_family(sample.remote_address)
