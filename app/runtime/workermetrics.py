"""``WorkersCollector``: what the what-if workers (app.runtime.workers) are doing, read at
each scrape of /metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.runtime.workers import Workers


class WorkersCollector(Collector):
    def __init__(self, workers: Workers) -> None:
        self.workers = workers

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        admitted, refused, lost = self._families()
        admitted.add_metric([], self.workers.admitted)
        refused.add_metric([], self.workers.refused)
        lost.add_metric([], self.workers.lost)
        yield from (admitted, refused, lost)

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, CounterMetricFamily, CounterMetricFamily]:
        return (
            GaugeMetricFamily(
                "phasewatch_whatif_admitted",
                "What-ifs and levers computing or waiting for a worker now.",
            ),
            CounterMetricFamily(
                "phasewatch_whatif_refused",
                "What-ifs and levers refused with 429: every worker busy and the queue full.",
            ),
            CounterMetricFamily(
                "phasewatch_whatif_workers_lost",
                "Worker processes that died during a call (killed, out of memory): a 503 each.",
            ),
        )
