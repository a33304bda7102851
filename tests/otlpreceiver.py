"""A loopback OTLP/HTTP receiver: accepts POST /v1/metrics and /v1/traces and decodes them
with the official opentelemetry-proto messages, as a collector would.

Decoded data is flattened into plain values a test can compare: ``Histogram`` points by
metric (name, unit, attributes, count, sum) and ``ReceivedSpan``s (ids as hex).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue


@dataclass(frozen=True)
class HistogramPoint:
    name: str
    unit: str
    attributes: dict[str, Any]
    count: int
    sum: float
    bounds: tuple[float, ...]
    resource: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    start_ns: int
    end_ns: int
    kind: int
    status_code: int
    status_message: str
    attributes: dict[str, Any]
    resource: dict[str, Any]


def attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv) for kv in pairs}


def _value(kv: KeyValue) -> Any:
    which = kv.value.WhichOneof("value")
    return getattr(kv.value, which) if which else None


class OtlpReceiver:
    def __init__(self) -> None:
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.traces: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def histograms(self) -> list[HistogramPoint]:
        with self._lock:
            requests = list(self.metrics)
        return [
            HistogramPoint(
                metric.name,
                metric.unit,
                attributes(point.attributes),
                point.count,
                point.sum,
                tuple(point.explicit_bounds),
                attributes(resource_metrics.resource.attributes),
            )
            for request in requests
            for resource_metrics in request.resource_metrics
            for scope in resource_metrics.scope_metrics
            for metric in scope.metrics
            for point in metric.histogram.data_points
        ]

    def latest(self) -> dict[tuple[str, tuple[tuple[str, Any], ...]], HistogramPoint]:
        """The last point of each (metric, attributes): cumulative, so the fullest."""
        found = {}
        for point in self.histograms():
            found[point.name, tuple(sorted(point.attributes.items()))] = point
        return found

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            requests = list(self.traces)
        return [
            ReceivedSpan(
                span.name,
                span.trace_id.hex(),
                span.span_id.hex(),
                span.parent_span_id.hex(),
                span.start_time_unix_nano,
                span.end_time_unix_nano,
                span.kind,
                span.status.code,
                span.status.message,
                attributes(span.attributes),
                attributes(resource_spans.resource.attributes),
            )
            for request in requests
            for resource_spans in request.resource_spans
            for scope in resource_spans.scope_spans
            for span in scope.spans
        ]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                answer = receiver.receive(self.path, body)
                self.send_response(200 if answer is not None else 404)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", str(len(answer or b"")))
                self.end_headers()
                self.wfile.write(answer or b"")

            def log_message(self, *_args: object) -> None:
                pass

        return Handler

    def receive(self, path: str, body: bytes) -> bytes | None:
        with self._lock:
            self.paths.append(path)
            if path == "/v1/metrics":
                self.metrics.append(ExportMetricsServiceRequest.FromString(body))
                return ExportMetricsServiceResponse().SerializeToString()
            if path == "/v1/traces":
                self.traces.append(ExportTraceServiceRequest.FromString(body))
                return ExportTraceServiceResponse().SerializeToString()
        return None
