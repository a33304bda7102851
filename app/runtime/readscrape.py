"""Counts a part of the process keeps, on /metrics: one metric family per part, its samples
read from the part at each scrape (never copied into prometheus-client's own metrics, so
the part stays the one place the number lives).

The quarantine of the background loops (``app.store.quarantine``), the runs kept nowhere
(``app.runs.losses``) and the runs turned away from a taken slot (``app.runs.slots``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.runs.losses import Losses
from app.runs.slots import TakenSlots
from app.store.quarantine import Quarantine

Samples = Mapping[tuple[str, ...], float]  # label values → value


@dataclass(frozen=True)
class Family:
    name: str
    doc: str
    labels: tuple[str, ...] = ()
    counter: bool = False

    def empty(self) -> GaugeMetricFamily | CounterMetricFamily:
        kind = CounterMetricFamily if self.counter else GaugeMetricFamily
        return kind(self.name, self.doc, labels=list(self.labels))


class ReadAtScrape(Collector):
    """``family``, its samples ``read()`` at each scrape, in label order."""

    def __init__(self, family: Family, read: Callable[[], Samples]) -> None:
        self.family, self.read = family, read

    def describe(self) -> Iterator[Metric]:
        # Without this the registry would call collect() (and read) on register.
        yield self.family.empty()

    def collect(self) -> Iterator[Metric]:
        found = self.family.empty()
        for labels, value in sorted(self.read().items()):
            found.add_metric(list(labels), value)
        yield found


QUARANTINED = Family(
    "phasewatch_quarantined",
    "Items a background loop set aside after they failed (a run the rollups cannot"
    " add, a delivery the sender cannot read, a target whose evaluation fails): each"
    " named on /healthz, passed over until a restart or until it passes.",
    labels=("loop",),
)
RUNS_LOST = Family(
    "phasewatch_runs_lost",
    "Runs this process could keep nowhere: neither stored, nor spooled, nor held in"
    " memory (the disk and the memory backlog full while the store was away), or"
    " refused for good and not set aside in rejected.jsonl.",
    counter=True,
)
DUPLICATE_SLOT = Family(
    "phasewatch_runs_duplicate_slot",
    "Runs not stored because another run of their (target, vantage) held their"
    " scheduled slot already: two processes probed one schedule (replicas"
    " overlapping after an outage).",
    labels=("target", "vantage"),
    counter=True,
)


def quarantined(quarantine: Quarantine) -> ReadAtScrape:
    """``phasewatch_quarantined{loop}``: every loop named, 0 while it holds nothing."""
    return ReadAtScrape(
        QUARANTINED, lambda: {(loop,): n for loop, n in quarantine.counts().items()}
    )


def runs_lost(losses: Losses) -> ReadAtScrape:
    return ReadAtScrape(RUNS_LOST, lambda: {(): losses.total})


def duplicate_slots(taken: TakenSlots) -> ReadAtScrape:
    """A (target, vantage) appears with its first run turned away."""
    return ReadAtScrape(DUPLICATE_SLOT, lambda: dict(taken.snapshot().items()))
