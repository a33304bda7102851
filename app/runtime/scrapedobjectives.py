"""The objectives' gauges on ``/metrics`` (``alerts.objectives``, docs/slo.md): each
objective's budget left and burn rate per window, and goodput per window, read from the
database at each scrape within the scrape's budget (``RunMetrics.watch``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.store.reads.objectives import ObjectivesRow

log = logging.getLogger(__name__)
SERIES = ("target", "vantage")


class ObjectivesCollector(Collector):
    """Gauges read when scraped; objectives that cannot be read are left out."""

    def __init__(self, rows: Callable[[], list[ObjectivesRow]]) -> None:
        self.rows = rows

    def describe(self) -> Iterator[Metric]:
        yield from self._families()  # else the registry collects (the database) on register

    def collect(self) -> Iterator[Metric]:
        budget, burn, goodput = self._families()
        for target, vantage, status in self._read():
            for metric, slo in status.slos.items():
                if slo.budget_left is not None:
                    budget.add_metric([target, vantage, metric], slo.budget_left)
                for window, rate in slo.burn_rates.items():
                    if rate is not None:
                        burn.add_metric([target, vantage, metric, window], rate)
            for window, share in status.goodput.items():
                if share is not None:
                    goodput.add_metric([target, vantage, window], share)
        yield from (budget, burn, goodput)

    def _read(self) -> list[ObjectivesRow]:
        try:
            return self.rows()
        except TimeoutError:
            log.warning("metrics: the objectives left out: no answer in time")
        except Exception as exc:
            log.warning("metrics: the objectives left out: %s", exc)
        return []

    def _families(self) -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "phasewatch_objective_error_budget_remaining_ratio",
                "Share of an objective's error budget left in its window (below 0: overspent).",
                labels=[*SERIES, "objective"],
            ),
            GaugeMetricFamily(
                "phasewatch_objective_burn_rate",
                "An objective's bad share over its allowed rate, per window (1: the budget"
                " lasts exactly its window).",
                labels=[*SERIES, "objective", "window"],
            ),
            GaugeMetricFamily(
                "phasewatch_goodput_ratio",
                "Share of requests meeting every objective at once, per window.",
                labels=[*SERIES, "window"],
            ),
        )
