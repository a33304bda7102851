"""``phasewatch_runs_lost_total``: the runs this process could keep nowhere
(``app.runs.losses``), read at each scrape."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from app.runs.losses import Losses


class LostRunsCollector(Collector):
    def __init__(self, losses: Losses) -> None:
        self.losses = losses

    def describe(self) -> Iterator[Metric]:
        yield _family()

    def collect(self) -> Iterator[Metric]:
        lost = _family()
        lost.add_metric([], self.losses.total)
        yield lost


def _family() -> CounterMetricFamily:
    return CounterMetricFamily(
        "phasewatch_runs_lost",
        "Runs this process could keep nowhere: neither stored, nor spooled, nor held in"
        " memory (the disk and the memory backlog full while the store was away), or"
        " refused for good and not set aside in rejected.jsonl.",
    )
