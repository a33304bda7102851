"""Runs not stored because another run held their slot (``app.runs.slots.TakenSlots``) on
/metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from app.runs.slots import TakenSlots


class TakenSlotsCollector(Collector):
    """``phasewatch_runs_duplicate_slot_total{target, vantage}``, read at each scrape; a
    (target, vantage) appears with its first run turned away."""

    def __init__(self, taken: TakenSlots) -> None:
        self.taken = taken

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        for (target, vantage), count in sorted(self.taken.snapshot().items()):
            family.add_metric([target, vantage], count)
        yield family

    @staticmethod
    def _family() -> CounterMetricFamily:
        return CounterMetricFamily(
            "phasewatch_runs_duplicate_slot",
            "Runs not stored because another run of their (target, vantage) held their"
            " scheduled slot already: two processes probed one schedule (replicas"
            " overlapping after an outage).",
            labels=["target", "vantage"],
        )
