"""The simulated endpoint, over real loopback: wire formats, delays and logged truths."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import trustme

from app.demo.sim.app import SimConfig, Truth
from app.demo.sim.server import SimServer
from app.demo.virtual import VirtualEventLoop
from tests.helpers import run_virtual

FAST = SimConfig(
    one_way_ms=10.0,
    queue_median_ms=20.0,
    queue_sigma=0.0,
    prefill_ms=10.0,
    tokens=3,
    tokens_per_s=200.0,
    seed=1,
)
CHAT = "/v1/chat/completions"
STREAM_BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "a b c"}]}
# The delays are checked on a virtual clock (app/demo/virtual.py): the sim and the client
# share one loop whose clock stands still while it works, so a simulated delay is exact
# however busy the machine is. How late real sleeps end under load is bench/'s question
# (bench/probe_accuracy.py); here it would only make the bounds guesses.
EXACT_MS = 0.01
T = TypeVar("T")

Serve = Callable[..., SimServer]


@pytest.fixture
def serve() -> Iterator[Serve]:
    with ExitStack() as stack:

        def start(**changes: Any) -> SimServer:
            return stack.enter_context(SimServer(replace(FAST, **changes)))

        yield start


@dataclass
class Streamed:
    response: httpx.Response
    headers_ms: float
    lines: list[tuple[float, str]] = field(default_factory=list)

    def events(self) -> list[dict[str, str]]:
        """SSE events as field dicts; a comment line is an event with a "comment" field."""
        events, current = [], {}
        for _, line in self.lines:
            if not line:
                events.append(current)
                current = {}
            elif line.startswith(":"):
                current["comment"] = line[1:].strip()
            else:
                name, _, value = line.partition(": ")
                current[name] = value
        return events

    def data(self) -> list[Any]:
        """The JSON payloads, with ``[DONE]`` kept as the string."""
        raw = [e["data"] for e in self.events() if "data" in e]
        return [r if r == "[DONE]" else json.loads(r) for r in raw]

    def first_line_ms(self, needle: str) -> float:
        return next(ms for ms, line in self.lines if needle in line)


def stream(client: httpx.Client, path: str, body: dict[str, Any]) -> Streamed:
    start = time.perf_counter()
    with client.stream("POST", path, json=body) as response:
        result = Streamed(response, _ms_since(start))
        for line in response.iter_lines():
            result.lines.append((_ms_since(start), line))
    return result


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


@dataclass
class Virtual:
    """The sim and an async client on one virtual-clock loop."""

    server: SimServer
    client: httpx.AsyncClient
    loop: VirtualEventLoop

    def ms(self) -> float:
        return self.loop.time() * 1000

    async def stream(self, path: str, body: dict[str, Any]) -> Streamed:
        start = self.ms()
        async with self.client.stream("POST", path, json=body) as response:
            result = Streamed(response, self.ms() - start)
            async for line in response.aiter_lines():
                result.lines.append((self.ms() - start, line))
        return result

    async def timed(self, method: str, path: str, **kwargs: Any) -> tuple[httpx.Response, float]:
        """A whole response and the virtual ms it took."""
        start = self.ms()
        response = await self.client.request(method, path, **kwargs)
        return response, self.ms() - start

    def last_truth(self) -> Truth:
        return _last_truth(self.server)


def on_virtual(main: Callable[[Virtual], Awaitable[T]], **changes: Any) -> T:
    async def run(loop: VirtualEventLoop) -> T:
        async with SimServer(replace(FAST, **changes), http2=False) as server:
            async with httpx.AsyncClient(base_url=server.url) as client:
                return await main(Virtual(server, client, loop))

    result: T = run_virtual(run)
    return result


def exactly(ms: float) -> Any:
    return pytest.approx(ms, abs=EXACT_MS)


def _last_truth(sim: SimServer) -> Truth:
    return sim.truths()[-1]


def _chunk_kinds(data: list[Any]) -> list[str]:
    kinds = []
    for chunk in data:
        if chunk == "[DONE]":
            kinds.append("done")
        elif not chunk["choices"]:
            kinds.append("usage")
        elif chunk["choices"][0]["finish_reason"] == "stop":
            kinds.append("finish")
        else:
            kinds.append("|".join(sorted(chunk["choices"][0]["delta"])))
    return kinds


def test_openai_stream_is_ping_role_reasoning_answer_finish_usage_done(serve: Serve) -> None:
    sim = serve(reasoning_tokens=2, tokens=3)
    with httpx.Client(base_url=sim.url) as client:
        streamed = stream(client, CHAT, STREAM_BODY)

    assert streamed.response.headers["content-type"].startswith("text/event-stream")
    assert streamed.events()[0] == {"comment": "ping"}
    data = streamed.data()
    assert _chunk_kinds(data) == [
        "content|role",
        *["reasoning_content"] * 2,
        *["content"] * 3,
        "finish",
        "usage",
        "done",
    ]
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert data[-3]["choices"][0]["delta"] == {}
    usage = data[-2]["usage"]
    assert usage["completion_tokens"] == 5
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 2}
    assert streamed.response.headers["x-request-id"] == _last_truth(sim).request_id


def test_client_sees_first_answer_token_after_round_trip_queue_and_prefill() -> None:
    async def main(sim: Virtual) -> list[tuple[float, Truth]]:
        seen = []
        for _ in range(3):
            streamed = await sim.stream(CHAT, STREAM_BODY)
            seen.append((streamed.first_line_ms('"content":"tok'), sim.last_truth()))
        return seen

    seen = on_virtual(main, one_way_ms=15.0, queue_median_ms=30.0, prefill_ms=12.0)
    for first_token_ms, truth in seen:
        assert (truth.network_ms, truth.queue_ms, truth.prefill_ms) == exactly((30, 30, 12))
        assert first_token_ms == exactly(30 + 30 + 12)


def test_every_write_reaches_the_client_one_way_after_it_was_emitted() -> None:
    async def main(sim: Virtual) -> tuple[float, Truth]:
        await sim.client.get("/health")  # connect outside the measurement
        _, ttfb_ms = await sim.timed("GET", "/health")
        return ttfb_ms, sim.last_truth()

    ttfb_ms, truth = on_virtual(main, one_way_ms=50.0)
    assert (truth.queue_ms, truth.prefill_ms, truth.generation_ms) == (0, 0, 0)
    assert ttfb_ms == exactly(100.0)


def test_a_client_that_names_itself_takes_its_own_route() -> None:
    async def main(sim: Virtual) -> dict[str | None, float]:
        trips = {}
        for client_name in ("far", "unknown", None):
            headers = {"X-Sim-Client": client_name} if client_name else {}
            await sim.client.get("/health", headers=headers)
            trips[client_name] = sim.last_truth().network_ms
        return trips

    trips = on_virtual(main, one_way_ms=5.0, paths={"far": 40.0})
    # "unknown" is not named in paths, and None names nothing: both take one_way_ms.
    assert trips == {"far": exactly(80.0), "unknown": exactly(10.0), None: exactly(10.0)}


def test_delayed_writes_keep_their_spacing() -> None:
    async def main(sim: Virtual) -> tuple[Streamed, Truth]:
        return await sim.stream(CHAT, STREAM_BODY), sim.last_truth()

    streamed, truth = on_virtual(main, tokens=4, tokens_per_s=40.0)
    token_ms = [ms for ms, line in streamed.lines if '"content":"tok' in line]
    gaps = [b - a for a, b in zip(token_ms, token_ms[1:], strict=False)]
    assert gaps == [exactly(25.0)] * 3
    assert truth.generation_ms == exactly(75.0)


def test_usage_chunk_carries_the_true_timing_in_seconds() -> None:
    async def main(sim: Virtual) -> tuple[Any, Truth]:
        return (await sim.stream(CHAT, STREAM_BODY)).data()[-2], sim.last_truth()

    usage_chunk, truth = on_virtual(main, server_timing="usage", reasoning_tokens=1)
    groq = usage_chunk["x_groq"]["usage"]
    assert groq["queue_time"] == pytest.approx(truth.queue_ms / 1000, abs=1e-9)
    assert groq["prompt_time"] == pytest.approx(truth.prefill_ms / 1000, abs=1e-9)
    assert groq["completion_time"] == pytest.approx(truth.generation_ms / 1000, abs=1e-9)
    total = (truth.queue_ms + truth.prefill_ms + truth.generation_ms) / 1000
    assert groq["total_time"] == pytest.approx(total, abs=1e-9)
    assert (groq["prompt_tokens"], groq["completion_tokens"]) == (3, 4)
    assert truth.transfer_ms == exactly(0.0)


def test_server_timing_header_carries_true_queue_and_prefill(serve: Serve) -> None:
    sim = serve(server_timing="header")
    with httpx.Client(base_url=sim.url) as client:
        streamed = stream(client, CHAT, STREAM_BODY)

    truth = _last_truth(sim)
    header = streamed.response.headers["server-timing"]
    durations = dict(part.strip().split(";dur=") for part in header.split(","))
    assert float(durations["queue"]) == pytest.approx(truth.queue_ms, abs=1e-3)
    assert float(durations["prefill"]) == pytest.approx(truth.prefill_ms, abs=1e-3)
    assert "x_groq" not in streamed.data()[-2]


@pytest.mark.parametrize(
    ("server_timing", "headers_wait_for_first_token"),
    [("usage", False), ("none", False), ("header", True)],
)
def test_stream_headers_leave_at_arrival_unless_they_carry_server_timing(
    server_timing: str, headers_wait_for_first_token: bool
) -> None:
    async def main(sim: Virtual) -> tuple[float, Truth]:
        await sim.client.get("/health")
        return (await sim.stream(CHAT, STREAM_BODY)).headers_ms, sim.last_truth()

    headers_ms, truth = on_virtual(main, server_timing=server_timing, queue_median_ms=40.0)
    if headers_wait_for_first_token:
        assert headers_ms == exactly(truth.network_ms + truth.queue_ms + truth.prefill_ms)
    else:
        assert headers_ms == exactly(truth.network_ms)


def test_http2_is_negotiated_over_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    pem = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    trust = ssl.create_default_context()
    ca.configure_trust(trust)

    with SimServer(FAST, certfile=str(pem), keyfile=str(pem)) as sim:
        assert sim.url.startswith("https://127.0.0.1:")
        with httpx.Client(base_url=sim.url, http2=True, verify=trust) as client:
            streamed = stream(client, CHAT, STREAM_BODY)
    assert streamed.response.http_version == "HTTP/2"
    assert streamed.data()[-1] == "[DONE]"


def test_http2_false_offers_only_http1_over_tls(tmp_path: Path) -> None:
    ca = trustme.CA()
    pem = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    trust = ssl.create_default_context()
    ca.configure_trust(trust)

    with SimServer(FAST, certfile=str(pem), keyfile=str(pem), http2=False) as sim:
        with httpx.Client(base_url=sim.url, http2=True, verify=trust) as client:
            response = client.get("/health")
    assert response.http_version == "HTTP/1.1"


def test_reconfigure_changes_the_next_request() -> None:
    async def main(sim: Virtual) -> tuple[list[Any], list[Any], Truth]:
        before = (await sim.stream(CHAT, STREAM_BODY)).data()
        changes = {"reasoning_tokens": 0, "tokens": 1, "server_timing": "none", "prefill_ms": 30.0}
        sim.server.reconfigure(**changes)
        after = (await sim.stream(CHAT, STREAM_BODY)).data()
        assert sim.server.config.tokens == 1
        return before, after, sim.last_truth()

    before, after, truth = on_virtual(main, reasoning_tokens=2, server_timing="usage")
    assert "x_groq" in before[-2] and "x_groq" not in after[-2]
    assert _chunk_kinds(after) == ["content|role", "content", "finish", "usage", "done"]
    assert truth.prefill_ms == exactly(30.0)


def test_reconfigure_rejects_bad_changes_and_keeps_the_config(serve: Serve) -> None:
    sim = serve()
    with pytest.raises(TypeError):
        sim.reconfigure(no_such_field=1)
    with pytest.raises(ValueError, match="one_way_ms"):
        sim.reconfigure(one_way_ms=-1.0)
    with pytest.raises(ValueError, match="server_timing"):
        sim.reconfigure(server_timing="trailer")
    assert sim.config == FAST


def test_cold_start_is_added_to_the_queue_only_after_idle() -> None:
    async def main(sim: Virtual) -> list[Truth]:
        body = {"messages": []}
        await sim.client.post(CHAT, json=body)  # the first request ever finds the model cold
        await sim.client.post(CHAT, json=body)
        await sim.client.get("/health")
        await asyncio.sleep(0.35)
        await sim.client.get("/health")  # a health check does not count as use of the model
        await sim.client.post(CHAT, json=body)
        return [t for t in sim.server.truths() if t.path == CHAT]

    llm = on_virtual(main, one_way_ms=0.0, cold_start_ms=40.0, cold_after_idle_s=0.3, tokens=1)
    assert [t.cold_start for t in llm] == [True, False, True]
    assert [t.queue_ms for t in llm] == [exactly(60.0), exactly(20.0), exactly(60.0)]


def test_anthropic_stream_has_thinking_then_text_blocks(serve: Serve) -> None:
    sim = serve(reasoning_tokens=2, tokens=2)
    body = {"model": "claude-x", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    with httpx.Client(base_url=sim.url) as client:
        streamed = stream(client, "/v1/messages", body)

    events = streamed.events()
    assert all(json.loads(e["data"])["type"] == e["event"] for e in events)
    deltas = [json.loads(e["data"]).get("delta", {}).get("type") for e in events]
    assert [e["event"] for e in events] == [
        "message_start",
        "content_block_start",
        "ping",
        *["content_block_delta"] * 3,
        "content_block_stop",
        "content_block_start",
        *["content_block_delta"] * 2,
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert deltas[3:6] == ["thinking_delta", "thinking_delta", "signature_delta"]
    assert deltas[8:10] == ["text_delta", "text_delta"]
    data = streamed.data()
    assert data[0]["message"]["usage"]["input_tokens"] == 1
    assert data[-2]["usage"]["output_tokens"] == 4
    assert streamed.response.headers["x-request-id"] == _last_truth(sim).request_id


def test_non_streaming_body_comes_whole_after_full_generation() -> None:
    async def main(sim: Virtual) -> tuple[httpx.Response, float, Truth]:
        await sim.client.get("/health")
        body = {"messages": [{"role": "user", "content": "x y"}]}
        response, elapsed_ms = await sim.timed("POST", CHAT, json=body)
        return response, elapsed_ms, sim.last_truth()

    response, elapsed_ms, truth = on_virtual(main, tokens=5, reasoning_tokens=1, tokens_per_s=100.0)
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "tok " * 5
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}
    assert body["x_groq"]["usage"]["completion_time"] == pytest.approx(truth.generation_ms / 1000)
    assert truth.generation_ms == exactly(50.0)
    server_ms = truth.queue_ms + truth.prefill_ms + truth.generation_ms + truth.transfer_ms
    assert elapsed_ms == exactly(truth.network_ms + server_ms)


def test_plain_http_endpoint_reports_its_server_time() -> None:
    async def main(sim: Virtual) -> tuple[httpx.Response, Truth]:
        response = await sim.client.get("/http", params={"server_ms": 30, "bytes": 500})
        return response, sim.last_truth()

    response, truth = on_virtual(main, one_way_ms=5.0)
    assert len(response.content) == 500
    assert response.headers["server-timing"] == f"app;dur={truth.queue_ms:.3f}"
    assert truth.queue_ms == exactly(30.0)
    assert (truth.prefill_ms, truth.generation_ms) == (0, 0)


@pytest.mark.parametrize(
    ("method", "path", "content", "status"),
    [
        ("POST", CHAT, b"{not json", 400),
        ("POST", "/v1/messages", b"[1, 2]", 400),
        ("GET", CHAT, b"", 405),
        ("GET", "/v2/nothing", b"", 404),
    ],
)
def test_bad_requests_get_json_errors(
    serve: Serve, method: str, path: str, content: bytes, status: int
) -> None:
    sim = serve()
    with httpx.Client(base_url=sim.url) as client:
        response = client.request(method, path, content=content)
    assert response.status_code == status
    assert "message" in response.json()["error"]


def test_abandoned_stream_stops_quietly_and_logs_no_truth(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    sim = serve(tokens=30, tokens_per_s=100.0)
    with httpx.Client(base_url=sim.url) as client:
        with client.stream("POST", CHAT, json=STREAM_BODY) as response:
            for line in response.iter_lines():
                if '"content":"tok' in line:
                    break
        client.close()  # a probe past its deadline drops the connection
        time.sleep(0.4)  # past the abandoned stream's last token
    with httpx.Client(base_url=sim.url) as client:
        client.get("/health")

    assert [t.path for t in sim.truths()] == ["/health"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_seeded_queue_delays_repeat() -> None:
    async def main(sim: Virtual) -> list[float]:
        for _ in range(4):
            await sim.client.post(CHAT, json={})
        return [t.queue_ms for t in sim.server.truths()]

    config = {"one_way_ms": 0.0, "queue_median_ms": 40.0, "queue_sigma": 1.0, "tokens": 1}
    first, second = (on_virtual(main, seed=7, **config) for _ in range(2))
    assert first == [exactly(ms) for ms in second]
    assert max(first) - min(first) > 30.0


def test_async_context_manager_serves_on_the_running_loop() -> None:
    async def main() -> tuple[str, list[Truth]]:
        async with SimServer(FAST) as sim, httpx.AsyncClient(base_url=sim.url) as client:
            response = await client.get("/health")
            return response.text, sim.truths()

    text, truths = asyncio.run(main())
    assert text == "ok"
    assert [t.path for t in truths] == ["/health"]
