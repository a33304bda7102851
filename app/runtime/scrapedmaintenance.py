"""``phasewatch_maintenance{target,vantage}`` on ``/metrics``: 1 while a maintenance window
(app.analysis.maintenance) holds a series, else 0, for every series this process stored a
run of. The shipped Prometheus alerting rules (docs/prometheus/alerts.yml) hold their alerts
with it, as phasewatch holds its own notifications."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.analysis.maintenance import MaintenanceWindow, in_any

log = logging.getLogger(__name__)
HeldRow = tuple[str, str, bool]  # target, vantage, inside an open window now


def held_series(
    series: Iterable[tuple[str, str]], windows: Sequence[MaintenanceWindow], now: datetime
) -> list[HeldRow]:
    return [(target, vantage, in_any(windows, target, vantage, now)) for target, vantage in series]


class MaintenanceCollector(Collector):
    """The gauge, read when scraped; left out of a scrape whose windows cannot be read (the
    stored ones are the database's)."""

    def __init__(self, rows: Callable[[], list[HeldRow]]) -> None:
        self.rows = rows

    def describe(self) -> Iterator[Metric]:
        yield self._family()  # else the registry collects (the database) on register

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for target, vantage, held in self._read():
            family.add_metric([target, vantage], 1.0 if held else 0.0)
        yield family

    def _read(self) -> list[HeldRow]:
        try:
            return self.rows()
        except TimeoutError:
            log.warning("metrics: maintenance left out: no answer in time")
        except Exception as exc:
            log.warning("metrics: maintenance left out: %s", exc)
        return []

    def _family(self) -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "phasewatch_maintenance",
            "1 while a maintenance window holds the series (its alerts not notified, its runs"
            " kept out of references and error budgets), else 0.",
            labels=["target", "vantage"],
        )
