"""Redirects: ``kind: http`` follows them up to its limit, and a loop or a chain past the
limit is an error sample, never an ``ok`` one for the last 302. The LLM kinds never follow.
A hop's time is the server's (docs/phases.md). Real loopback servers, raw HTTP/1.1."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from app.config import ConfigError, load_targets
from app.probe.client import make_client, probe_once
from app.probe.sample import Provenance, Sample, Status
from app.probe.spec import Kind, ProbeSpec
from tests import hostile

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

KEYS = {"Authorization": "Bearer sk-redirect-test-0123", "x-api-key": "sk-redirect-test-0123"}
Route = Callable[[str], bytes]


def redirect(location: str, status: bytes = b"302 Found") -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\nlocation: " + location.encode()
    return head + b"\r\ncontent-length: 5\r\n\r\nmoved"


def final(status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 " + status + b"\r\ncontent-length: 2\r\n\r\nok"


class Site:
    """A loopback server answering by path; it keeps each request's path and headers."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self.seen: list[tuple[str, dict[str, str]]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():  # keep-alive: the next hop may come on this connection
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            request_line, *lines = head.decode("latin-1").split("\r\n")
            pairs = [line.split(": ", 1) for line in lines if ": " in line]
            headers = {name.lower(): value for name, value in pairs}
            if "content-length" in headers:
                await reader.readexactly(int(headers["content-length"]))
            path = request_line.split(" ")[1]
            self.seen.append((path, headers))
            writer.write(self.route(path))
            await writer.drain()


@asynccontextmanager
async def site(route: Route) -> AsyncIterator[tuple[Site, str]]:
    """The site and its origin (``http://127.0.0.1:PORT``)."""
    served = Site(route)
    async with hostile.serve(served.handle) as url:
        yield served, url.removesuffix("/v1/chat/completions")


async def probe(url: str, **spec: object) -> Sample:
    probe_spec = ProbeSpec(url=url, headers=KEYS, **spec)  # type: ignore[arg-type]
    async with make_client(probe_spec) as client:
        return await probe_once(client, probe_spec)


def loop(path: str) -> bytes:
    return redirect("/b" if path == "/a" else "/a")


def endless(path: str) -> bytes:
    return redirect(f"/hop/{int(path.rsplit('/', 1)[-1]) + 1}")


def two_hops(path: str) -> bytes:
    return {
        "/start": redirect("/middle", b"301 Moved Permanently"),
        "/middle": redirect("/end"),
    }.get(path, final())


async def test_a_redirect_loop_is_an_error_sample_not_an_ok_302() -> None:
    async with site(loop) as (served, origin):
        sample = await probe(f"{origin}/a", deadline_ms=5000)
    assert sample.status is Status.ERROR and sample.error_class == "RedirectLoop"
    assert sample.http_status == 302
    assert sample.error == "redirect loop: 302 to /a asked for before"
    assert [path for path, _ in served.seen] == ["/a", "/b"]


async def test_a_chain_past_the_limit_is_an_error_after_exactly_the_limit() -> None:
    async with site(endless) as (served, origin):
        sample = await probe(f"{origin}/hop/0", deadline_ms=5000, max_redirects=3)
    assert sample.status is Status.ERROR and sample.error_class == "TooManyRedirects"
    assert sample.error == "more than 3 redirects; the last: 302 to /hop/4"
    assert [path for path, _ in served.seen] == ["/hop/0", "/hop/1", "/hop/2", "/hop/3"]


async def test_a_chain_within_the_limit_ends_at_the_final_answer_its_hops_in_server() -> None:
    async with site(two_hops) as (served, origin):
        sample = await probe(f"{origin}/start", deadline_ms=5000, max_redirects=2)
    assert sample.status is Status.OK and sample.http_status == 200
    assert [path for path, _ in served.seen] == ["/start", "/middle", "/end"]
    marks = sample.marks
    assert marks.request_start is not None and marks.redirect_end is not None
    assert marks.response_headers is not None and marks.response_headers > marks.redirect_end
    # The final server reports nothing: network is the round trip and server the rest of
    # the head, every hop before the final request included (with a report, server is the
    # report plus the hops: tests/probe/test_phases.py).
    hops_ms = (marks.redirect_end - marks.request_start) / 1e6
    head_ms = (marks.response_headers - marks.request_start) / 1e6
    final_ms = (marks.response_headers - marks.redirect_end) / 1e6
    assert sample.rtt_ms is not None
    assert sample.phases["network"] == pytest.approx(min(sample.rtt_ms, final_ms))
    assert sample.phases["server"] == pytest.approx(head_ms - sample.phases["network"])
    assert sample.phases["server"] >= hops_ms
    assert sample.provenance["server"] is Provenance.ESTIMATED
    assert sum(sample.phases.values()) == pytest.approx(sample.total_ms)


async def test_follow_redirects_false_keeps_the_redirect_as_the_answer() -> None:
    async with site(loop) as (served, origin):
        sample = await probe(f"{origin}/a", deadline_ms=5000, max_redirects=0)
    assert sample.status is Status.OK and sample.http_status == 302
    assert sample.marks.redirect_end is None
    assert len(served.seen) == 1


async def test_header_values_never_follow_a_redirect_to_another_origin() -> None:
    async with site(lambda path: final()) as (elsewhere, other):
        hops = {"/same": redirect("/there"), "/there": redirect(f"{other}/landing")}
        async with site(lambda path: hops.get(path, final())) as (served, origin):
            sample = await probe(f"{origin}/same", deadline_ms=5000)
    assert sample.status is Status.OK
    assert [path for path, _ in served.seen] == ["/same", "/there"]
    for _, headers in served.seen:  # the same origin: as configured
        assert headers["authorization"] == KEYS["Authorization"]
        assert headers["x-api-key"] == KEYS["x-api-key"]
    [(path, headers)] = elsewhere.seen
    assert path == "/landing"
    assert "authorization" not in headers and "x-api-key" not in headers


async def test_the_deadline_covers_the_whole_chain() -> None:
    async def slow_hops(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await hostile.read_request(reader)
            await asyncio.sleep(0.05)
            writer.write(redirect("/again-" + str(asyncio.get_running_loop().time())))
            await writer.drain()

    async with hostile.serve(slow_hops) as url:
        sample = await probe(url, deadline_ms=120, max_redirects=10)
    assert sample.status is Status.DEADLINE_EXCEEDED
    assert sample.total_ms == 120


@pytest.mark.parametrize("kind", [Kind.OPENAI, Kind.ANTHROPIC])
async def test_llm_kinds_do_not_follow_a_redirect_and_say_where_it_pointed(kind: Kind) -> None:
    async with site(lambda path: redirect("/v2/chat", b"307 Temporary Redirect")) as (served, o):
        body = {"model": "m", "stream": True, "messages": []}
        sample = await probe(f"{o}/v1/chat", kind=kind, method="POST", body=body)
    assert sample.status is Status.ERROR and sample.error_class == "RedirectNotFollowed"
    assert sample.error == f"307 to /v2/chat: {kind.value} targets do not follow redirects"
    assert len(served.seen) == 1


def test_follow_redirects_is_refused_on_an_llm_target(tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        "targets:\n"
        "  - {name: chat, kind: openai, url: 'https://api.example.com/v1', follow_redirects: 3}\n"
        "  - {name: page, url: 'https://example.com/', follow_redirects: 3}\n"
        "  - {name: quiet, kind: anthropic, url: 'https://api.example.com/',"
        " follow_redirects: no}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_targets(path, {})
    [problem] = caught.value.problems
    assert "chat" in problem and "openai targets do not follow redirects" in problem
    path.write_text(path.read_text().replace("follow_redirects: 3}", "follow_redirects: 0}", 1))
    page = load_targets(path, {}).targets[1]
    assert page.probe_spec().max_redirects == 3
