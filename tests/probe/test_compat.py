"""The httpx and httpcore internals the probe uses (app.probe.compat): the pins cover exactly
the minor versions they were checked on, and each one still does what the probe needs."""

from __future__ import annotations

import asyncio
import socket
import tomllib
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path

import httpcore
import httpx
import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from app.probe.compat import (
    CHECKED,
    SOCKET_OPTION,
    build_redirect_request,
    is_socket_readable,
    use_network_backend,
)
from app.probe.net.backend import AsyncioBackend

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def pinned() -> dict[str, Requirement]:
    found = (
        Requirement(d) for d in tomllib.loads(PYPROJECT.read_text())["project"]["dependencies"]
    )
    return {r.name: r for r in found if r.name in CHECKED}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_the_pin_admits_the_checked_minor_and_no_other(name: str) -> None:
    spec = pinned()[name].specifier
    major, minor = (int(part) for part in CHECKED[name].split("."))
    assert Version(f"{major}.{minor}.99") in spec
    assert Version(f"{major}.{minor + 1}.0") not in spec
    assert Version(f"{major}.{minor - 1}.99") not in spec if minor else True


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_the_installed_version_is_the_checked_minor(name: str) -> None:
    installed = Version(version(name))
    assert f"{installed.major}.{installed.minor}" == CHECKED[name]
    assert installed in pinned()[name].specifier


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.readuntil(b"\r\n\r\n")
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
    await writer.drain()
    writer.close()


@asynccontextmanager
async def loopback() -> AsyncIterator[int]:
    server = await asyncio.start_server(_answer, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


class Counting(AsyncioBackend):
    def __init__(self) -> None:
        super().__init__()
        self.connects = 0

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        self.connects += 1
        return await super().connect_tcp(host, port, timeout, local_address, socket_options)


@pytest.mark.anyio
async def test_the_transport_connects_through_the_backend_it_is_given() -> None:
    backend = Counting()
    transport = httpx.AsyncHTTPTransport()
    use_network_backend(transport, backend)
    async with loopback() as port, httpx.AsyncClient(transport=transport) as client:
        response = await client.get(f"http://127.0.0.1:{port}/")
    assert response.text == "ok"
    assert backend.connects == 1


def test_a_socket_with_data_or_an_end_waiting_reads_as_readable() -> None:
    near, far = socket.socketpair()
    with near, far:
        assert not is_socket_readable(near)
        far.send(b"x")
        assert is_socket_readable(near)


def redirect(status: int, location: str, method: str = "POST") -> httpx.Request:
    client = httpx.AsyncClient()
    request = httpx.Request(
        method, "https://a.example/v1", content=b"{}", headers={"Authorization": "Bearer s"}
    )
    response = httpx.Response(status, headers={"location": location}, request=request)
    return build_redirect_request(client, request, response)


@pytest.mark.parametrize(
    ("status", "location", "method", "body", "authorization"),
    [
        (303, "/next", "GET", b"", True),
        (302, "/next", "GET", b"", True),
        (307, "/next", "POST", b"{}", True),
        (308, "https://b.example/v1", "POST", b"{}", False),
    ],
)
def test_a_redirect_is_built_by_httpx_rules(
    status: int, location: str, method: str, body: bytes, authorization: bool
) -> None:
    follow = redirect(status, location)
    assert follow.method == method
    assert follow.read() == body
    assert ("authorization" in follow.headers) is authorization
