"""The background loops' quarantine (``app.store.quarantine``) on /metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.store.quarantine import Quarantine


class QuarantineCollector(Collector):
    """``phasewatch_quarantined{loop}``: the items each loop holds set aside, read at each
    scrape; every loop named, 0 while it holds nothing."""

    def __init__(self, quarantine: Quarantine) -> None:
        self.quarantine = quarantine

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for loop, count in sorted(self.quarantine.counts().items()):
            family.add_metric([loop], count)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "phasewatch_quarantined",
            "Items a background loop set aside after they failed (a run the rollups cannot"
            " add, a delivery the sender cannot read, a target whose evaluation fails): each"
            " named on /healthz, passed over until a restart or until it passes.",
            labels=["loop"],
        )
