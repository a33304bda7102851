"""``phasewatch serve`` exporting to a loopback OTLP/HTTP receiver that decodes the protobuf
with opentelemetry-proto: a simulated LLM target and a plain HTTP one, both sending a
``traceparent``. Then a collector that refuses and one that never answers: probing goes
on, the failure is counted and said once, and SIGTERM still ends serve."""

from __future__ import annotations

import re
import signal
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from app.demo.sim.server import SimServer
from app.export.mapping import (
    DURATION,
    FIRST_CHUNK,
    GENAI_SECONDS,
    HTTP_DURATION,
    HTTP_SECONDS,
    PER_CHUNK,
    TOKEN_USAGE,
)
from tests.faults.support import STOP_HARD_S
from tests.helpers import eventually, free_port
from tests.otlpreceiver import OtlpReceiver, ReceivedSpan
from tests.pgcluster import Serve

pytestmark = pytest.mark.process

TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-01$")
SPAN_KIND_INTERNAL, SPAN_KIND_CLIENT = 1, 3


class HeaderRecorder:
    """A loopback HTTP endpoint answering 200 to GET, keeping each request's traceparent."""

    def __init__(self) -> None:
        self.traceparents: list[str | None] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                recorder.traceparents.append(self.headers.get("traceparent"))
                self.send_response(200)
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/ok"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def config(tmp_path: Path, sim: SimServer, plain_url: str) -> Path:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        "targets:\n"
        "  - name: chat\n"
        "    kind: openai\n"
        f"    url: {sim.url}/v1/chat/completions\n"
        '    body: {model: m, stream: true, messages: [{role: user, content: "hi"}]}\n'
        "    interval: 1s\n    samples: 2\n    timeout: 10s\n    propagate: true\n"
        "  - name: plain\n"
        f"    url: {plain_url}\n"
        "    interval: 1s\n    samples: 2\n    propagate: true\n"
    )
    return path


@contextmanager
def serving(tmp_path: Path, path: Path, **otel: str) -> Iterator[Serve]:
    env = {
        "PHASEWATCH_DATABASE_URL": f"sqlite:///{tmp_path}/pw.db",
        "PHASEWATCH_VANTAGE": "test-vantage",
        "OTEL_METRIC_EXPORT_INTERVAL": "300",
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    server = Serve(tmp_path, path, env | otel)
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()


def test_serve_exports_genai_and_http_metrics_and_a_span_tree_per_sample(
    tmp_path: Path, sim: SimServer
) -> None:
    plain = HeaderRecorder()
    with OtlpReceiver() as receiver:
        otel = {
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
            "OTEL_SERVICE_NAME": "pw-otel-test",
            "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
        }
        with serving(tmp_path, config(tmp_path, sim, plain.url), **otel) as server:
            wanted = {DURATION, FIRST_CHUNK, PER_CHUNK, TOKEN_USAGE, HTTP_DURATION}
            eventually(lambda: wanted <= {p.name for p in receiver.histograms()}, 60, "metrics")
            eventually(lambda: {"chat m", "GET"} <= names(receiver.spans()), 60, "spans")
            metrics_are_by_the_conventions(receiver, httpx.URL(sim.url).port)
            every_sample_is_a_span_tree(receiver.spans())
            sent = [tp for tp in plain.traceparents if tp is not None]
            assert sent and len(sent) == len(plain.traceparents)  # every request carried one
            assert all(TRACEPARENT.match(tp) for tp in sent), sent
            eventually(lambda: joins(sent[0], receiver.spans()), 30, "the sent ids exported")
            assert server.terminate(STOP_HARD_S) < STOP_HARD_S
    plain.close()


def names(spans: list[ReceivedSpan]) -> set[str]:
    return {span.name for span in spans}


def joins(traceparent: str, spans: list[ReceivedSpan]) -> bool:
    """The sample span that sent ``traceparent`` was exported with its ids."""
    found = TRACEPARENT.match(traceparent)
    assert found is not None
    ids = (found[1], found[2])
    return any((s.trace_id, s.span_id) == ids and not s.parent_id for s in spans)


def metrics_are_by_the_conventions(receiver: OtlpReceiver, sim_port: int | None) -> None:
    points = receiver.histograms()
    units = {p.name: p.unit for p in points}
    assert {
        n: units[n] for n in (DURATION, FIRST_CHUNK, PER_CHUNK, HTTP_DURATION)
    } == dict.fromkeys((DURATION, FIRST_CHUNK, PER_CHUNK, HTTP_DURATION), "s")
    assert units[TOKEN_USAGE] == "{token}"
    chat = next(p for p in points if p.name == DURATION)
    assert chat.attributes == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
        "server.port": sim_port,
        "phasewatch.target": "chat",
        "phasewatch.vantage": "test-vantage",
    }
    assert chat.bounds == GENAI_SECONDS and chat.count >= 2 and chat.sum > 0
    assert chat.resource["service.name"] == "pw-otel-test"
    assert chat.resource["deployment.environment.name"] == "test"
    tokens = {p.attributes["gen_ai.token.type"] for p in points if p.name == TOKEN_USAGE}
    assert tokens == {"input", "output"}
    plain = next(p for p in points if p.name == HTTP_DURATION)
    assert set(plain.attributes) == {
        "http.request.method",
        "http.response.status_code",
        "network.protocol.version",
        "server.address",
        "server.port",
        "phasewatch.target",
        "phasewatch.vantage",
    }
    assert (plain.attributes["http.request.method"], plain.attributes["phasewatch.target"]) == (
        "GET",
        "plain",
    )
    assert plain.attributes["http.response.status_code"] == 200
    assert plain.bounds == HTTP_SECONDS


def every_sample_is_a_span_tree(spans: list[ReceivedSpan]) -> None:
    roots = [span for span in spans if not span.parent_id]
    assert {root.kind for root in roots} == {SPAN_KIND_CLIENT}
    for root in roots:
        children = sorted(
            (s for s in spans if s.parent_id == root.span_id), key=lambda s: s.start_ns
        )
        phases = [child.name for child in children]
        expected = {"chat m": {"queue", "prefill", "generation"}, "GET": {"server"}}[root.name]
        assert expected <= set(phases), phases
        assert {(c.trace_id, c.kind) for c in children} == {(root.trace_id, SPAN_KIND_INTERNAL)}
        assert children[0].start_ns == root.start_ns and children[-1].end_ns == root.end_ns
        assert all(a.end_ns == b.start_ns for a, b in pairwise(children))
        assert {c.attributes["phasewatch.phase"] for c in children} == set(phases)
        assert root.attributes["phasewatch.sample.status"] == "ok"


def blackhole() -> socket.socket:
    """A listening socket that never accepts: connections complete, nothing answers."""
    return socket.create_server(("127.0.0.1", 0), backlog=64)


def test_a_collector_away_costs_a_counter_and_one_log_line_and_never_stops_probing(
    tmp_path: Path, sim: SimServer
) -> None:
    refused = f"http://127.0.0.1:{free_port()}/v1/metrics"
    with blackhole() as hole:
        otel = {
            "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": refused,
            "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT": "1",
            # Never answers: each attempt waits the default 10 s on the SDK's thread.
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"http://127.0.0.1:{hole.getsockname()[1]}/",
            "OTEL_BSP_MAX_QUEUE_SIZE": "8",
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
        }
        plain = HeaderRecorder()
        with serving(tmp_path, config(tmp_path, sim, plain.url), **otel) as server:
            scrape = f"{server.base_url}/metrics"
            failed = re.compile(r'phasewatch_otel_export_failures_total\{signal="metrics"\} (\d+)')

            def failures() -> int:
                found = failed.search(httpx.get(scrape, timeout=5).text)
                return int(float(found[1])) if found else 0

            eventually(lambda: failures() >= 2, 60, "two failed metric exports counted")
            # Probing went on meanwhile: runs every second, each stored.
            eventually(lambda: len(plain.traceparents) >= 8, 60, "four runs of plain")
            problems = (server.health() or {}).get("problems", [])
            assert f"OpenTelemetry metrics export to {refused} failing" in " ".join(problems)
            said = server.output().count("OpenTelemetry metrics export to")
            assert said == 1, server.output()
            assert "Transient error" not in server.output()  # the SDK's own lines: quieted
            assert server.terminate(STOP_HARD_S) < STOP_HARD_S
            assert server.process.returncode in (0, -signal.SIGTERM)
        plain.close()
