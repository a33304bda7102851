"""/metrics' account of the OpenTelemetry export: failed attempts by signal, read when
scraped (present only while export is on)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from app.export.exporter import RunExporter


class ExportCollector(Collector):
    def __init__(self, exporter: RunExporter) -> None:
        self.exporter = exporter

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for signal, failures in sorted(self.exporter.failures().items()):
            family.add_metric([signal], failures)
        yield family

    def _family(self) -> CounterMetricFamily:
        return CounterMetricFamily(
            "phasewatch_otel_export_failures",
            "OpenTelemetry export attempts that failed (after the SDK's retries), by signal;"
            " their data is dropped.",
            labels=["signal"],
        )
