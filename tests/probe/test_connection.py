"""``connect`` split into dns, tcp and tls: the formulas on recorded marks (table-driven), and
the marks of real connections — a loopback TLS server (trustme) reached by name, a slow
resolver, an IPv6 address, a TLS handshake that fails."""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import httpx
import pytest

from app.probe.client import USER_AGENT, probe_once
from app.probe.compat import use_network_backend
from app.probe.connection import address_family, connect_split
from app.probe.net.backend import AsyncioBackend
from app.probe.net.resolver import SystemResolver
from app.probe.sample import Marks, Sample, Status
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

MS = 1_000_000


@pytest.mark.parametrize(
    ("marks", "connect_ms", "split"),
    [
        # A fresh plain connection: the name resolved at 2 ms, TCP done at 3, sent at 3.5.
        (Marks(connect_start=0, dns_end=2 * MS, connect_end=3 * MS), 3.5, (2.0, 1.5, 0.0)),
        # Over TLS: the handshake and what follows it until the request goes out.
        (
            Marks(connect_start=0, dns_end=2 * MS, connect_end=3 * MS, tls_start=3 * MS),
            9.0,
            (2.0, 1.0, 6.0),
        ),
        # A pool wait before connecting is in dns: it comes first.
        (Marks(connect_start=4 * MS, dns_end=5 * MS, connect_end=6 * MS), 6.0, (5.0, 1.0, 0.0)),
        # Cut (or failed) while resolving: dns holds it all.
        (Marks(connect_start=0), 250.0, (250.0, 0.0, 0.0)),
        # Cut during the TCP handshake.
        (Marks(connect_start=0, dns_end=1 * MS), 100.0, (1.0, 99.0, 0.0)),
        # Cut during the TLS handshake (its end never came).
        (
            Marks(connect_start=0, dns_end=1 * MS, connect_end=2 * MS, tls_start=2 * MS),
            30.0,
            (1.0, 1.0, 28.0),
        ),
        # A backend that does not say when the name resolved: DNS stays in tcp.
        (Marks(connect_start=1 * MS, connect_end=3 * MS), 3.0, (1.0, 2.0, 0.0)),
        # Marks past the cut are held to it.
        (Marks(connect_start=0, dns_end=8 * MS, connect_end=9 * MS), 5.0, (5.0, 0.0, 0.0)),
    ],
)
def test_connect_split_adds_up_to_connect(
    marks: Marks, connect_ms: float, split: tuple[float, float, float]
) -> None:
    found = connect_split(marks, connect_ms)
    assert found is not None
    assert (found["dns"], found["tcp"], found["tls"]) == pytest.approx(split)
    assert sum(found.values()) == pytest.approx(connect_ms)


def test_a_reused_connection_has_no_split() -> None:
    assert connect_split(Marks(request_start=10_000), 0.01) is None


@pytest.mark.parametrize(
    ("address", "family"),
    [("127.0.0.1:443", "ipv4"), ("[::1]:8443", "ipv6"), (None, None)],
)
def test_address_family(address: str | None, family: str | None) -> None:
    assert address_family(address) == family


class SlowResolver(SystemResolver):
    """The system's answer, late: as a resolver on the far side of a slow link gives it."""

    def __init__(self, delay_s: float, family: int = socket.AF_UNSPEC) -> None:
        self.delay_s = delay_s
        self.family = family
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        self.asked.append(host)
        await asyncio.sleep(self.delay_s)
        found = await super().resolve(host, port)
        return [a for a in found if self.family in (socket.AF_UNSPEC, a[0])]


async def probe(url: str, resolver: SystemResolver, verify: bool | str = True) -> Sample:
    """One sample through the probe's backend, resolving names with ``resolver``."""
    spec = ProbeSpec(url=url, kind=Kind.HTTP, verify=verify, timeout_s=10)
    context: bool | ssl.SSLContext = verify
    if isinstance(verify, str):
        context = ssl.create_default_context(cafile=verify)
    transport = httpx.AsyncHTTPTransport(verify=context, trust_env=False)
    use_network_backend(transport, AsyncioBackend(resolver))
    async with httpx.AsyncClient(transport=transport, headers={"user-agent": USER_AGENT}) as client:
        sample = await probe_once(client, spec)
    assert abs(sum(sample.phases.values()) - sample.total_ms) < 0.01
    return sample


def by_name(url: str, name: str = "localhost") -> str:
    return url.replace("127.0.0.1", name)


def assert_split_is_connect(sample: Sample) -> dict[str, float]:
    split = sample.connect_split
    assert split is not None
    assert sum(split.values()) == pytest.approx(sample.phases["connect"], abs=1e-6)
    return split


@pytest.mark.anyio
async def test_a_tls_connection_by_name_is_split_into_dns_tcp_and_tls(
    server_tls: ssl.SSLContext, ca_file: str
) -> None:
    resolver = SlowResolver(0.0, socket.AF_INET)
    async with hostile.serve(hostile.status_500, tls=server_tls) as url:
        sample = await probe(by_name(url), resolver, verify=ca_file)
    assert sample.status is Status.HTTP_ERROR  # answered: the handshake went through
    assert resolver.asked == ["localhost"]
    marks = sample.marks
    assert marks.connect_start is not None and marks.dns_end is not None
    assert marks.connect_start <= marks.dns_end <= (marks.connect_end or 0)
    assert marks.tls_end is not None
    split = assert_split_is_connect(sample)
    assert split["tls"] > 0 and split["tcp"] > 0
    assert sample.address_family == "ipv4"
    assert sample.remote_address == f"127.0.0.1:{url.split(':')[2].split('/')[0]}"
    stored = sample.to_json()
    assert stored["connect_split"].keys() == {"dns", "tcp", "tls"}
    assert stored["address_family"] == "ipv4"


@pytest.mark.anyio
async def test_a_slow_resolver_shows_in_dns_not_in_tcp_or_tls(
    server_tls: ssl.SSLContext, ca_file: str
) -> None:
    resolver = SlowResolver(0.5, socket.AF_INET)
    async with hostile.serve(hostile.status_500, tls=server_tls) as url:
        sample = await probe(by_name(url), resolver, verify=ca_file)
    split = assert_split_is_connect(sample)
    # The resolver's wait is dns's alone, whatever the machine's load adds elsewhere.
    assert split["dns"] >= 500
    assert split["dns"] > split["tcp"] and split["dns"] > split["tls"]


@pytest.mark.anyio
async def test_a_failed_tls_handshake_keeps_the_address_and_holds_the_rest_in_tls(
    server_tls: ssl.SSLContext,
) -> None:
    # The probe trusts the system's CAs, not the test's: the handshake fails.
    async with hostile.serve(hostile.status_500, tls=server_tls) as url:
        sample = await probe(by_name(url), SlowResolver(0.0, socket.AF_INET))
    assert sample.status is Status.ERROR
    split = assert_split_is_connect(sample)
    assert split["tls"] > 0
    assert sample.address_family == "ipv4" and sample.remote_address is not None


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe_socket:
            probe_socket.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.anyio
@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
async def test_an_ipv6_connection_says_its_family_and_address() -> None:
    async def ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await hostile.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(ok, "::1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        sample = await probe(f"http://[::1]:{port}/", SystemResolver())
    finally:
        server.close()
        await server.wait_closed()
    assert sample.status is Status.OK
    assert sample.address_family == "ipv6" and sample.remote_address == f"[::1]:{port}"
    split = assert_split_is_connect(sample)
    assert split["tls"] == 0  # a literal resolves at once; plain HTTP has no handshake
