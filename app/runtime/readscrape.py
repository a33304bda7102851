"""Counts a part of the process keeps, on /metrics: one metric family per part, its samples
read from the part at each scrape (never copied into prometheus-client's own metrics, so
the part stays the one place the number lives).

The quarantine of the background loops (``app.store.quarantine``), the runs kept nowhere
(``app.runs.losses``), the due runs never started (``app.runtime.skips``), the runs turned
away from a taken slot (``app.runs.slots``), this replica's share of the targets
(``app.replicas``) and where the rollups' catch-up found its runs' samples
(``app.store.rollups.inhand``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.replicas.evaluation import OwnerEvaluation
from app.replicas.membership import Replicas
from app.runs.losses import Losses
from app.runs.slots import TakenSlots
from app.runtime.skips import Skips
from app.store.quarantine import Quarantine
from app.store.rollups.inhand import InHand

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


RUNS_SKIPPED = Family(
    "phasewatch_runs_skipped",
    "Due runs the scheduler did not start, by reason: running (the previous run still"
    " going), late (past the misfire grace), turn (waited its interval for a turn),"
    " woke_late (the scheduler woke after the slot's cell: the process had no CPU, or a"
    " busy loop, for an interval). At this process's vantage, and each agent's as it last"
    " reported (counted from the agent's start).",
    labels=("target", "vantage", "reason"),
    counter=True,
)


def runs_skipped(skips: Skips, vantage: str, agents: Callable[[], Samples]) -> ReadAtScrape:
    """This process's skips at its own vantage, and each agent's at its, as last reported."""
    return ReadAtScrape(RUNS_SKIPPED, lambda: {**agents(), **skips.counts(vantage)})


def quarantined(quarantine: Quarantine) -> ReadAtScrape:
    """``phasewatch_quarantined{loop}``: every loop named, 0 while it holds nothing."""
    return ReadAtScrape(
        QUARANTINED, lambda: {(loop,): n for loop, n in quarantine.counts().items()}
    )


def runs_lost(losses: Losses) -> ReadAtScrape:
    return ReadAtScrape(RUNS_LOST, lambda: {(): losses.total})


ROLLUP_CAUGHT_UP = Family(
    "phasewatch_rollup_runs_caught_up",
    "Runs this replica's rollup catch-up took up (of the targets it owns), by where their"
    " samples came from: in_hand (stored by this process, kept in memory) or read (back"
    " from the database: stored by another replica or an agent's push, or before a start).",
    labels=("samples",),
    counter=True,
)


def caught_up(in_hand: InHand) -> ReadAtScrape:
    return ReadAtScrape(
        ROLLUP_CAUGHT_UP, lambda: {("in_hand",): in_hand.hits, ("read",): in_hand.misses}
    )


def duplicate_slots(taken: TakenSlots) -> ReadAtScrape:
    """A (target, vantage) appears with its first run turned away."""
    return ReadAtScrape(DUPLICATE_SLOT, lambda: dict(taken.snapshot().items()))


REPLICAS_LIVE = Family(
    "phasewatch_replicas_live",
    "Replicas of serve on this database live now, as this one reads their leases (itself"
    " included; 1 on SQLite, 0 until the leases are first read).",
)
REPLICA_TARGETS = Family(
    "phasewatch_replica_targets",
    "Targets of the file this replica owns now: it probes their slots and evaluates their"
    " runs, whoever stored them.",
)
REPLICA_CURRENT = Family(
    "phasewatch_replica_leases_current",
    "1 while the leases were read lately enough to believe their expiries; 0 when the"
    " database has not answered (this replica keeps its share, takes over nobody's).",
)
REPLICA_PASSED = Family(
    "phasewatch_replica_slots_passed",
    "Scheduled slots this replica passed because another replica owned them.",
    counter=True,
)
REPLICA_EVALUATIONS = Family(
    "phasewatch_replica_evaluations",
    "Evaluations of runs whose target another replica owns: asked of the owner, or"
    " claimed here (asked by another).",
    labels=("way",),
    counter=True,
)


def replica_share(
    replicas: Replicas, passed: Callable[[], int], evaluation: OwnerEvaluation,
    names: Callable[[], list[str]],
) -> list[ReadAtScrape]:  # fmt: skip
    """This replica's share on /metrics: never silent about which targets it holds."""
    return [
        ReadAtScrape(REPLICAS_LIVE, lambda: {(): replicas.live()}),
        ReadAtScrape(REPLICA_TARGETS, lambda: {(): len(replicas.share(names()))}),
        ReadAtScrape(
            REPLICA_CURRENT,
            lambda: {(): float(not replicas.waiting and replicas.stale_s() is None)},
        ),
        ReadAtScrape(REPLICA_PASSED, lambda: {(): passed()}),
        ReadAtScrape(
            REPLICA_EVALUATIONS,
            lambda: {("asked",): evaluation.asked, ("claimed",): evaluation.claimed},
        ),
    ]
