"""The probe's asyncio network backend, against real loopback servers."""

from __future__ import annotations

import asyncio
import gc
import select
import socket
import ssl
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpcore
import pytest
import trustme

from app.demo.sim.server import SimServer
from app.probe.client import make_client, probe_once
from app.probe.net import connect as netconnect
from app.probe.net import stream as netstream
from app.probe.net.backend import AsyncioBackend
from app.probe.net.stream import AsyncioStream
from app.probe.sample import Status
from app.probe.spec import Kind, ProbeSpec
from tests import hostile
from tests.probe.test_accuracy import ACCEPTANCE, chat_spec

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
MB = 1024 * 1024


@asynccontextmanager
async def server(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[int]:
    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(guarded, "127.0.0.1", 0, ssl=tls)
    try:
        yield listener.sockets[0].getsockname()[1]
    finally:
        listener.close()
        await asyncio.wait_for(listener.wait_closed(), 5)


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()


async def connect(port: int, host: str = "127.0.0.1") -> AsyncioStream:
    stream = await AsyncioBackend().connect_tcp(host, port, timeout=5)
    assert isinstance(stream, AsyncioStream)
    return stream


async def test_stream_writes_and_reads_back_and_names_both_ends() -> None:
    async with server(echo) as port:
        stream = await connect(port)
        await stream.write(b"hello", timeout=5)
        assert await stream.read(65536, timeout=5) == b"hello"
        assert stream.get_extra_info("server_addr") == ("127.0.0.1", port)
        assert stream.get_extra_info("client_addr")[0] == "127.0.0.1"
        assert isinstance(stream.get_extra_info("socket"), socket.socket)
        assert stream.get_extra_info("ssl_object") is None
        assert stream.get_extra_info("is_readable") is False
        await stream.aclose()


async def test_tcp_streams_send_without_waiting_for_acks() -> None:
    async with server(echo) as port:
        stream = await connect(port)
        sock = stream.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        await stream.aclose()


@pytest.mark.parametrize("then", ["read", "next loop turn"])
async def test_writes_before_a_read_or_a_loop_turn_leave_together(then: str) -> None:
    # A request's headers and body, written apart by httpcore, reach the server as one
    # segment (as curl sends them), not as two that each wake the server.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        stream = await connect(listener.getsockname()[1])
        peer, _ = listener.accept()
        with peer:
            await stream.write(b"POST / HTTP/1.1\r\n\r\n", timeout=5)
            await stream.write(b"body", timeout=5)
            assert select.select([peer], [], [], 0)[0] == []  # nothing has left yet
            if then == "read":
                with pytest.raises(httpcore.ReadTimeout):
                    await stream.read(100, timeout=0.01)
            else:
                await asyncio.sleep(0)
            assert select.select([peer], [], [], 5)[0] == [peer]
            assert peer.recv(65536) == b"POST / HTTP/1.1\r\n\r\nbody"
        await stream.aclose()


async def test_a_large_write_leaves_at_once() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        stream = await connect(listener.getsockname()[1])
        peer, _ = listener.accept()
        with peer:
            await stream.write(b"x" * netstream.HOLD_LIMIT, timeout=5)
            assert select.select([peer], [], [], 5)[0] == [peer]
        await stream.aclose()


async def test_read_returns_no_more_than_asked_and_keeps_the_rest() -> None:
    async def send_ten(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"0123456789")
        await writer.drain()
        await reader.read()

    async with server(send_ten) as port:
        stream = await connect(port)
        received = b""
        while len(received) < 10:
            part = await stream.read(4, timeout=5)
            assert 0 < len(part) <= 4
            received += part
        assert received == b"0123456789"
        await stream.aclose()


async def test_server_closing_reads_as_end_of_stream_and_marks_the_connection_readable() -> None:
    async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"bye")
        await writer.drain()

    async with server(close_at_once) as port:
        stream = await connect(port)
        assert await stream.read(100, timeout=5) == b"bye"
        assert await stream.read(100, timeout=5) == b""
        # httpcore asks this of an idle pooled connection: a dropped one must not be reused.
        assert stream.get_extra_info("is_readable") is True
        with pytest.raises(httpcore.WriteError):
            await stream.write(b"more", timeout=5)
        await stream.aclose()


async def test_reset_is_a_read_error_after_the_data_before_it() -> None:
    async def data_then_reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"partial")
        await writer.drain()
        await asyncio.sleep(0.05)
        hostile.reset(writer)

    async with server(data_then_reset) as port:
        stream = await connect(port)
        assert await stream.read(100, timeout=5) == b"partial"
        with pytest.raises(httpcore.ReadError):
            await stream.read(100, timeout=5)
        await stream.aclose()


async def test_silent_server_is_a_read_timeout() -> None:
    async with server(echo) as port:
        stream = await connect(port)
        with pytest.raises(httpcore.ReadTimeout):
            await stream.read(100, timeout=0.1)
        await stream.write(b"still usable", timeout=5)
        assert await stream.read(100, timeout=5) == b"still usable"
        await stream.aclose()


async def test_cancellation_passes_through_as_cancellation_not_a_timeout() -> None:
    async with server(echo) as port:
        stream = await connect(port)
        with pytest.raises(TimeoutError) as caught:
            async with asyncio.timeout(0.1):
                await stream.read(100, timeout=30)
        assert not isinstance(caught.value, httpcore.ReadTimeout)
        await stream.aclose()


async def test_refused_connection_is_a_connect_error() -> None:
    with socket.socket() as placeholder:
        placeholder.bind(("127.0.0.1", 0))
        port = placeholder.getsockname()[1]  # bound, never listening: refused
        with pytest.raises(httpcore.ConnectError):
            await AsyncioBackend().connect_tcp("127.0.0.1", port, timeout=5)


async def test_race_skips_an_address_that_refuses_for_the_next() -> None:
    async with server(echo) as port:
        with socket.socket() as placeholder:
            placeholder.bind(("127.0.0.1", 0))
            refused = placeholder.getsockname()[1]
            addresses = [
                (socket.AF_INET, ("127.0.0.1", refused)),
                (socket.AF_INET, ("127.0.0.1", port)),
            ]
            sock = await netconnect.race(addresses, None, [])
        assert sock.getpeername() == ("127.0.0.1", port)
        sock.close()


async def test_a_name_is_resolved_and_connected() -> None:
    async with server(echo) as port:
        stream = await connect(port, host="localhost")
        await stream.write(b"ping", timeout=5)
        assert await stream.read(100, timeout=5) == b"ping"
        await stream.aclose()


async def test_reading_pauses_while_a_flood_is_not_read_then_everything_arrives() -> None:
    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x" * (8 * MB))
        await writer.drain()

    async with server(flood) as port:
        stream = await connect(port)
        await asyncio.sleep(0.3)  # the server writes as fast as the kernel lets it
        buffered = stream._protocol.size
        assert 0 < buffered <= netstream.HIGH_WATER + 256 * 1024
        total = 0
        while part := await stream.read(65536, timeout=5):
            total += len(part)
        assert total == 8 * MB
        await stream.aclose()


async def test_start_tls_negotiates_alpn_and_keeps_the_raw_socket(
    server_tls: ssl.SSLContext, ca_file: str
) -> None:
    server_tls.set_alpn_protocols(["h2", "http/1.1"])
    async with server(echo, tls=server_tls) as port:
        plain = await connect(port)
        client = ssl.create_default_context(cafile=ca_file)
        client.set_alpn_protocols(["h2", "http/1.1"])
        stream = await plain.start_tls(client, server_hostname="127.0.0.1", timeout=5)
        assert stream.get_extra_info("ssl_object").selected_alpn_protocol() == "h2"
        assert stream.get_extra_info("socket") is plain.get_extra_info("socket")
        await stream.write(b"secret", timeout=5)
        assert await stream.read(100, timeout=5) == b"secret"
        await stream.aclose()


async def test_untrusted_certificate_is_a_connect_error(server_tls: ssl.SSLContext) -> None:
    async with server(echo, tls=server_tls) as port:
        plain = await connect(port)
        untrusting = ssl.create_default_context(cadata=trustme.CA().cert_pem.bytes().decode())
        with pytest.raises(httpcore.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await plain.start_tls(untrusting, server_hostname="127.0.0.1", timeout=5)


async def test_probe_reads_the_kernels_rtt_and_the_remote_address() -> None:
    with SimServer(ACCEPTANCE) as sim:
        spec = chat_spec(sim.url)
        async with make_client(spec) as client:
            first = await probe_once(client, spec)
            second = await probe_once(client, spec)
    assert first.status is Status.OK and second.status is Status.OK
    assert first.rtt_ms is not None and 0 <= first.rtt_ms < 100  # loopback
    assert second.connection_reused and second.rtt_ms is not None
    assert first.remote_address == f"127.0.0.1:{sim.url.rsplit(':', 1)[1]}"


async def test_probe_over_h2_with_tls_marks_the_handshake_and_reads_the_rtt(
    tls_ca: trustme.CA, ca_file: str, tmp_path: Path
) -> None:
    cert = tls_ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    with SimServer(ACCEPTANCE, certfile=str(certfile), keyfile=str(keyfile)) as sim:
        spec = chat_spec(sim.url, http2=True, verify=ca_file)
        async with make_client(spec) as client:
            sample = await probe_once(client, spec)
    assert sample.status is Status.OK, sample.error
    assert sample.http_version == "HTTP/2"
    assert sample.marks.tls_start is not None and sample.marks.tls_end is not None
    assert sample.rtt_ms is not None


@pytest.mark.parametrize("tls", [False, True], ids=["http/1.1", "h2-over-tls"])
async def test_the_probes_client_talks_through_our_backend_not_httpcores(
    tls: bool, tls_ca: trustme.CA, ca_file: str, tmp_path: Path
) -> None:
    """make_client installs AsyncioBackend on a private httpx attribute; an httpx or
    httpcore upgrade that ignored it would fall back to httpcore's anyio backend silently.
    httpcore hands the connection's stream to every response (its public
    ``network_stream`` extension): it must be ours, and answer what only ours knows."""
    certs: dict[str, str] = {}
    if tls:
        cert = tls_ca.issue_cert("127.0.0.1")
        certs = {"certfile": str(tmp_path / "cert.pem"), "keyfile": str(tmp_path / "key.pem")}
        cert.cert_chain_pems[0].write_to_path(certs["certfile"])
        cert.private_key_pem.write_to_path(certs["keyfile"])
    with SimServer(ACCEPTANCE, **certs) as sim:
        spec = chat_spec(sim.url, http2=tls, verify=ca_file if tls else True)
        async with make_client(spec) as client:
            response = await client.get(f"{sim.url}/health")
            stream = response.extensions["network_stream"]
            assert isinstance(stream, AsyncioStream), type(stream)
            assert stream.get_extra_info("tcp_rtt_ms") is not None  # httpcore's: None
    assert response.http_version == ("HTTP/2" if tls else "HTTP/1.1")


async def test_closed_client_is_freed_without_the_cyclic_collector() -> None:
    async with hostile.serve(hostile.status_429) as url:
        spec = ProbeSpec(url=url, kind=Kind.OPENAI, method="POST", body={})
        gc.collect()
        gc.disable()
        try:
            client = make_client(spec)
            for _ in range(2):
                await probe_once(client, spec)
            await client.aclose()
            # httpx's pool: holds every connection the client made.
            pool = weakref.ref(client._transport._pool)  # type: ignore[attr-defined]
            del client
            await asyncio.sleep(0.05)  # closed transports let go on the next loop turns
            assert pool() is None
        finally:
            gc.enable()
