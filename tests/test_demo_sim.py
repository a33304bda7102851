"""The simulated endpoint, over real loopback: wire formats, delays and logged truths."""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme

from app.demo.sim import SimConfig, Truth
from app.demo.simserver import SimServer
from tests.helpers import ThreadLag

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
# Every sleep ends at or after its deadline, never before: a measured time is at least what
# it simulates. How much later depends on load: about a millisecond on an idle machine, and
# on a busy one as late as this process's threads wake (``lag``, measured meanwhile), which
# every upper bound adds.
SLACK_MS = 5.0  # for the accuracy claim itself
LOOSE_MS = 15.0  # for bounds that only need to tell one behaviour from another

Serve = Callable[..., SimServer]


@pytest.fixture
def serve(lag: ThreadLag) -> Iterator[Serve]:
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


def _time_to_first_byte_ms(client: httpx.Client, path: str) -> float:
    start = time.perf_counter()
    with client.stream("GET", path):
        return _ms_since(start)


def assert_late_by_at_most(
    actual: float, nominal: float, lag: ThreadLag, slack: float = LOOSE_MS
) -> None:
    """Never early; late by at most ``slack`` and the worst wake-up lag seen so far."""
    late = lag.worst_ms()
    assert nominal - 1e-3 <= actual < nominal + slack + late, (actual, nominal, late)


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


def test_client_sees_first_answer_token_after_round_trip_queue_and_prefill(
    serve: Serve, lag: ThreadLag
) -> None:
    sim = serve(one_way_ms=15.0, queue_median_ms=30.0, prefill_ms=12.0)
    excess = []
    with httpx.Client(base_url=sim.url) as client:
        for _ in range(3):
            first_token_ms = stream(client, CHAT, STREAM_BODY).first_line_ms('"content":"tok')
            truth = _last_truth(sim)
            excess.append(first_token_ms - truth.network_ms - truth.queue_ms - truth.prefill_ms)

    assert_late_by_at_most(truth.network_ms, 30.0, lag)
    assert_late_by_at_most(truth.queue_ms, 30.0, lag)
    assert all(e >= 0 for e in excess), excess
    assert sorted(excess)[1] < SLACK_MS + lag.worst_ms(), (excess, lag.worst_ms())


def test_every_write_reaches_the_client_one_way_after_it_was_emitted(
    serve: Serve, lag: ThreadLag
) -> None:
    sim = serve(one_way_ms=50.0)
    with httpx.Client(base_url=sim.url) as client:
        client.get("/health")  # connect outside the measurement
        ttfb_ms = _time_to_first_byte_ms(client, "/health")

    truth = _last_truth(sim)
    assert (truth.queue_ms, truth.prefill_ms, truth.generation_ms) == (0, 0, 0)
    assert_late_by_at_most(ttfb_ms, 100.0, lag)


def test_a_client_that_names_itself_takes_its_own_route(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(one_way_ms=5.0, paths={"far": 40.0})
    trips = {}
    with httpx.Client(base_url=sim.url) as client:
        for client_name in ("far", "unknown", None):
            headers = {"X-Sim-Client": client_name} if client_name else {}
            client.get("/health", headers=headers)
            trips[client_name] = _last_truth(sim).network_ms

    assert_late_by_at_most(trips["far"], 80.0, lag)
    assert_late_by_at_most(trips["unknown"], 10.0, lag)  # not named in paths: one_way_ms
    assert_late_by_at_most(trips[None], 10.0, lag)


def test_delayed_writes_keep_their_spacing(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(tokens=4, tokens_per_s=40.0)
    with httpx.Client(base_url=sim.url) as client:
        streamed = stream(client, CHAT, STREAM_BODY)

    token_ms = [ms for ms, line in streamed.lines if '"content":"tok' in line]
    gaps = [b - a for a, b in zip(token_ms, token_ms[1:], strict=False)]
    # Each write is due on the stream's own grid (25 ms apart), so a write read late is
    # followed by a shorter gap: the grid holds over the stream, whoever was descheduled.
    assert all(gap > 0 for gap in gaps), gaps
    assert sum(gaps) == pytest.approx(75.0, abs=SLACK_MS + lag.worst_ms())
    assert_late_by_at_most(_last_truth(sim).generation_ms, 75.0, lag)


def test_usage_chunk_carries_the_true_timing_in_seconds(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(server_timing="usage", reasoning_tokens=1)
    with httpx.Client(base_url=sim.url) as client:
        usage_chunk = stream(client, CHAT, STREAM_BODY).data()[-2]

    truth = _last_truth(sim)
    groq = usage_chunk["x_groq"]["usage"]
    assert groq["queue_time"] == pytest.approx(truth.queue_ms / 1000, abs=1e-9)
    assert groq["prompt_time"] == pytest.approx(truth.prefill_ms / 1000, abs=1e-9)
    assert groq["completion_time"] == pytest.approx(truth.generation_ms / 1000, abs=1e-9)
    total = (truth.queue_ms + truth.prefill_ms + truth.generation_ms) / 1000
    assert groq["total_time"] == pytest.approx(total, abs=1e-9)
    assert (groq["prompt_tokens"], groq["completion_tokens"]) == (3, 4)
    assert truth.transfer_ms < 1.0 + lag.worst_ms()


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
    serve: Serve, lag: ThreadLag, server_timing: str, headers_wait_for_first_token: bool
) -> None:
    sim = serve(server_timing=server_timing, queue_median_ms=40.0)
    with httpx.Client(base_url=sim.url) as client:
        client.get("/health")
        headers_ms = stream(client, CHAT, STREAM_BODY).headers_ms

    truth = _last_truth(sim)
    # The truth's network_ms holds the token's way back, which a loaded machine can delay
    # more than the headers'; the least two crossings take is what the config says.
    crossings_ms = 2 * sim.config.one_way_ms
    if headers_wait_for_first_token:
        assert headers_ms >= crossings_ms + truth.queue_ms + truth.prefill_ms
    else:
        before_queue_ends = truth.network_ms + truth.queue_ms / 2 + lag.worst_ms()
        assert crossings_ms <= headers_ms < before_queue_ends


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


def test_reconfigure_changes_the_next_request(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(reasoning_tokens=2, server_timing="usage")
    with httpx.Client(base_url=sim.url) as client:
        before = stream(client, CHAT, STREAM_BODY).data()
        sim.reconfigure(reasoning_tokens=0, tokens=1, server_timing="none", prefill_ms=30.0)
        after = stream(client, CHAT, STREAM_BODY).data()

    assert "x_groq" in before[-2] and "x_groq" not in after[-2]
    assert _chunk_kinds(after) == ["content|role", "content", "finish", "usage", "done"]
    assert_late_by_at_most(sim.truths()[-1].prefill_ms, 30.0, lag)
    assert sim.config.tokens == 1


def test_reconfigure_rejects_bad_changes_and_keeps_the_config(serve: Serve) -> None:
    sim = serve()
    with pytest.raises(TypeError):
        sim.reconfigure(no_such_field=1)
    with pytest.raises(ValueError, match="one_way_ms"):
        sim.reconfigure(one_way_ms=-1.0)
    with pytest.raises(ValueError, match="server_timing"):
        sim.reconfigure(server_timing="trailer")
    assert sim.config == FAST


def test_cold_start_is_added_to_the_queue_only_after_idle(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(one_way_ms=0.0, cold_start_ms=40.0, cold_after_idle_s=0.3, tokens=1)
    body = {"messages": []}
    with httpx.Client(base_url=sim.url) as client:
        client.post(CHAT, json=body)  # the first request ever finds the model cold
        client.post(CHAT, json=body)
        client.get("/health")
        time.sleep(0.35)
        client.get("/health")  # a health check does not count as use of the model
        client.post(CHAT, json=body)

    llm = [t for t in sim.truths() if t.path == CHAT]
    assert [t.cold_start for t in llm] == [True, False, True]
    for truth, nominal in zip(llm, [60.0, 20.0, 60.0], strict=True):
        assert_late_by_at_most(truth.queue_ms, nominal, lag)


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


def test_non_streaming_body_comes_whole_after_full_generation(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(tokens=5, reasoning_tokens=1, tokens_per_s=100.0)
    with httpx.Client(base_url=sim.url) as client:
        client.get("/health")
        start = time.perf_counter()
        response = client.post(CHAT, json={"messages": [{"role": "user", "content": "x y"}]})
        elapsed_ms = _ms_since(start)

    truth = _last_truth(sim)
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "tok " * 5
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 1}
    assert body["x_groq"]["usage"]["completion_time"] == pytest.approx(truth.generation_ms / 1000)
    assert_late_by_at_most(truth.generation_ms, 50.0, lag)
    server_ms = truth.queue_ms + truth.prefill_ms + truth.generation_ms + truth.transfer_ms
    assert_late_by_at_most(elapsed_ms, truth.network_ms + server_ms, lag)


def test_plain_http_endpoint_reports_its_server_time(serve: Serve, lag: ThreadLag) -> None:
    sim = serve(one_way_ms=5.0)
    with httpx.Client(base_url=sim.url) as client:
        response = client.get("/http", params={"server_ms": 30, "bytes": 500})

    truth = _last_truth(sim)
    assert len(response.content) == 500
    assert response.headers["server-timing"] == f"app;dur={truth.queue_ms:.3f}"
    assert_late_by_at_most(truth.queue_ms, 30.0, lag)
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


def test_seeded_queue_delays_repeat(serve: Serve, lag: ThreadLag) -> None:
    config = {"one_way_ms": 0.0, "queue_median_ms": 40.0, "queue_sigma": 1.0, "tokens": 1}
    runs = []
    for _ in range(2):
        sim = serve(seed=7, **config)
        with httpx.Client(base_url=sim.url) as client:
            for _ in range(4):
                client.post(CHAT, json={})
        runs.append([t.queue_ms for t in sim.truths()])
    assert runs[0] == pytest.approx(runs[1], abs=SLACK_MS + lag.worst_ms())
    assert max(runs[0]) - min(runs[0]) > 2 * LOOSE_MS


def test_async_context_manager_serves_on_the_running_loop() -> None:
    async def main() -> tuple[str, list[Truth]]:
        async with SimServer(FAST) as sim, httpx.AsyncClient(base_url=sim.url) as client:
            response = await client.get("/health")
            return response.text, sim.truths()

    text, truths = asyncio.run(main())
    assert text == "ok"
    assert [t.path for t in truths] == ["/health"]
