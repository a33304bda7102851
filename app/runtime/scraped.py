"""The gauges ``/metrics`` reads from the database and the spool when Prometheus scrapes:
open alerts, the deadline SLOs, the spool's depth (``RunMetrics.watch`` registers them).
A part that cannot be read in time is left out of that scrape, never an error."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app import __version__
from app.alerts.rows import OPEN_STATES
from app.store.models import AlertRow
from app.store.reads.slo import SloRow

log = logging.getLogger(__name__)

# Each of the scrape's two database reads waits at most this: both together stay well
# inside Prometheus' default 10 s scrape timeout while the database is frozen, so the
# scrape still brings the spool and the run counters, which say what the outage costs.
DATABASE_BUDGET_S = 2.0
AlertCount = tuple[str, str, str, int]  # state, kind, target, how many
SERIES = ("target", "vantage")


class ServiceCollector(Collector):
    """Gauges read when scraped; a part that cannot be read is left out, never an error."""

    def __init__(
        self,
        alerts: Callable[[], list[AlertCount]],
        spooled: Callable[[], int],
        slos: Callable[[], list[SloRow]] = list,
    ):
        self.alerts = alerts
        self.spooled = spooled
        self.slos = slos

    def describe(self) -> Iterator[Metric]:
        # Without this the registry would call collect() (and the database) on register.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        alerts, spool, build, budget, burn = self._families()
        for state, kind, target, count in self._read("open alerts", self.alerts, []):
            alerts.add_metric([state, kind, target], count)
        spooled = self._read("the spool", self.spooled, None)
        if spooled is not None:
            spool.add_metric([], spooled)
        build.add_metric([__version__], 1)
        for target, vantage, status in self._read("the SLOs", self.slos, []):
            if status.budget_left is not None:
                budget.add_metric([target, vantage], status.budget_left)
            for window, rate in status.burn_rates.items():
                if rate is not None:
                    burn.add_metric([target, vantage, window], rate)
        yield from (alerts, spool, build, budget, burn)

    def _families(self) -> tuple[GaugeMetricFamily, ...]:
        return (
            GaugeMetricFamily(
                "phasewatch_alerts",
                "Open alerts by state (pending, firing, recovering), kind and target.",
                labels=["state", "kind", "target"],
            ),
            GaugeMetricFamily(
                "phasewatch_spooled_runs", "Runs waiting in the spool for the database."
            ),
            GaugeMetricFamily("phasewatch_build_info", "This phasewatch.", labels=["version"]),
            GaugeMetricFamily(
                "phasewatch_slo_error_budget_remaining_ratio",
                "Share of the deadline SLO's error budget left in its window (below 0: overspent).",
                labels=list(SERIES),
            ),
            GaugeMetricFamily(
                "phasewatch_slo_burn_rate",
                "Deadline misses over the SLO's allowed rate, per window (1: the budget lasts"
                " exactly its window).",
                labels=[*SERIES, "window"],
            ),
        )

    def _read(self, what: str, read: Callable[[], Any], fallback: Any) -> Any:
        try:
            return read()
        except TimeoutError:
            log.warning("metrics: %s left out: no answer within %.1f s", what, DATABASE_BUDGET_S)
        except Exception as exc:
            log.warning("metrics: %s left out: %s", what, exc)
        return fallback


def alert_counts(sessions: sessionmaker[Session]) -> list[AlertCount]:
    query = (
        select(AlertRow.state, AlertRow.kind, AlertRow.target, func.count())
        .where(AlertRow.state.in_(OPEN_STATES))
        .group_by(AlertRow.state, AlertRow.kind, AlertRow.target)
    )
    with sessions() as session:
        return [(state, kind, target, int(n)) for state, kind, target, n in session.execute(query)]
