"""``RunExporter`` over OTLP/HTTP with the OpenTelemetry SDK: histograms on a
``PeriodicExportingMetricReader`` (``OTEL_METRIC_EXPORT_INTERVAL``), spans through a
``BatchSpanProcessor`` (``OTEL_BSP_*``: a bounded queue that drops when full). Exports run
on the SDK's own threads: ``export`` records and enqueues, never waits on the network.

The SDK honours the standard variables (``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``…_TIMEOUT``,
``…_COMPRESSION``, ``…_CERTIFICATE``). Spans are built whole (``ReadableSpan``) from
the stored run rather than timed live: their times are the sample's, and their ids the
``traceparent`` the probe sent.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.metrics import Histogram
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import OTELResourceDetector, Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from app import __version__
from app.config import Target
from app.export.facts import TargetFacts
from app.export.mapping import INSTRUMENTS, SpanSpec, points, spans
from app.export.outcome import ExportOutcome
from app.store.records import RunRecord

log = logging.getLogger(__name__)
# The SDK logs each failed attempt and each retry, and each span a full queue drops:
# ExportOutcome says it once instead (and counts every failure).
QUIETED = ("opentelemetry.exporter.otlp", "opentelemetry.sdk._shared_internal")
SCOPE = InstrumentationScope("phasewatch", __version__)
SAMPLED = TraceFlags(TraceFlags.SAMPLED)


class OtlpExporter:
    def __init__(self, endpoints: dict[str, str]) -> None:
        """``endpoints``: the signals to export (metrics, traces) and their URLs."""
        for name in QUIETED:
            logging.getLogger(name).setLevel(logging.CRITICAL)
        # Ours by default; OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win.
        defaults = {"service.name": "phasewatch", "service.version": __version__}
        self.resource = Resource.create(defaults).merge(OTELResourceDetector().detect())
        self.outcomes = {signal: ExportOutcome(signal, url) for signal, url in endpoints.items()}
        self._closed = False
        self._meters: MeterProvider | None = None
        self._histograms: dict[str, Histogram] = {}
        self._spans: BatchSpanProcessor | None = None
        if "metrics" in endpoints:
            self._start_metrics(WatchedMetrics(self.outcomes["metrics"], endpoints["metrics"]))
        if "traces" in endpoints:
            watched = WatchedSpans(self.outcomes["traces"], endpoints["traces"])
            self._spans = BatchSpanProcessor(watched)

    def _start_metrics(self, exporter: WatchedMetrics) -> None:
        reader = PeriodicExportingMetricReader(exporter)
        # No exit hook: ``close`` is bounded by the service's stop; an atexit flush to a
        # collector that does not answer would hold the process for the exporter's timeout.
        self._meters = MeterProvider(
            metric_readers=[reader], resource=self.resource, shutdown_on_exit=False
        )
        meter = self._meters.get_meter(SCOPE.name, SCOPE.version)
        self._histograms = {
            name: meter.create_histogram(
                name,
                unit=spec.unit,
                description=spec.description,
                explicit_bucket_boundaries_advisory=list(spec.buckets),
            )
            for name, spec in INSTRUMENTS.items()
        }

    def export(self, run: RunRecord, target: Target | None) -> None:
        if self._closed or target is None:
            return
        try:
            facts = TargetFacts.of(target)
            if self._histograms:
                for point in points(run, facts):
                    self._histograms[point.instrument].record(point.value, point.attributes)
            if self._spans is not None:
                for spec in spans(run, facts, random.getrandbits):
                    self._spans.on_end(self._readable(spec))
        except Exception:  # the contract: never raises into the store's road
            log.exception("OpenTelemetry: run %s of %s not exported", run.id, run.target)

    def _readable(self, spec: SpanSpec) -> ReadableSpan:
        def context(span_id: int) -> SpanContext:
            return SpanContext(spec.trace_id, span_id, is_remote=False, trace_flags=SAMPLED)

        root = spec.parent_id is None
        status = Status(StatusCode.UNSET)
        if spec.error is not None:
            status = Status(StatusCode.ERROR, spec.error)
        return ReadableSpan(
            name=spec.name,
            context=context(spec.span_id),
            parent=None if spec.parent_id is None else context(spec.parent_id),
            resource=self.resource,
            attributes=spec.attributes,
            kind=SpanKind.CLIENT if root else SpanKind.INTERNAL,
            status=status,
            start_time=spec.start_ns,
            end_time=spec.end_ns,
            instrumentation_scope=SCOPE,
        )

    def close(self) -> None:
        self._closed = True
        if self._spans is not None:
            self._spans.shutdown()  # type: ignore[no-untyped-call]
        if self._meters is not None:
            self._meters.shutdown()

    def failures(self) -> dict[str, int]:
        return {signal: outcome.failures for signal, outcome in self.outcomes.items()}

    def problems(self) -> list[str]:
        found = (outcome.problem() for outcome in self.outcomes.values())
        return [problem for problem in found if problem is not None]


class WatchedSpans(OTLPSpanExporter):
    """The SDK's span exporter, each attempt's result told to ``outcome``."""

    def __init__(self, outcome: ExportOutcome, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.outcome = outcome

    def export(self, spans: Any) -> SpanExportResult:
        try:
            result = super().export(spans)
        except Exception:
            result = SpanExportResult.FAILURE
        self.outcome.record(result is SpanExportResult.SUCCESS)
        return result


class WatchedMetrics(OTLPMetricExporter):
    """The SDK's metric exporter, each attempt's result told to ``outcome``."""

    def __init__(self, outcome: ExportOutcome, endpoint: str) -> None:
        super().__init__(endpoint=endpoint)
        self.outcome = outcome

    def export(
        self, metrics_data: MetricsData, timeout_millis: float | None = 10_000, **kwargs: Any
    ) -> MetricExportResult:
        try:
            result = super().export(metrics_data, timeout_millis, **kwargs)
        except Exception:
            result = MetricExportResult.FAILURE
        self.outcome.record(result is MetricExportResult.SUCCESS)
        return result
