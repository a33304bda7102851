"""What ``/metrics`` exposes, in one registry per app (never prometheus-client's global one,
so tests and replicas in one process never share counters).

Each stored run is observed once (``RunMetrics.observe_run``, in the ``Service.after_store``
road, called in a worker thread; prometheus-client is thread-safe). Alert states and the
spool are read when Prometheus scrapes (``runtime.scraped``). Labels are bounded: target,
vantage, phase, status, error class, alert state and kind; never a run id or a message.

Counters and histograms start at zero with the process, as Prometheus expects; the last
run's gauges appear with the first run a process stores.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.maintenance import MaintenanceWindow, in_any
from app.analysis.summary import TIMED, summarize
from app.clock import utcnow
from app.runs.threads import Check
from app.runtime.promcompat import observe_many
from app.runtime.scraped import (
    DATABASE_BUDGET_S,
    SERIES,
    AlertCount,
    ServiceCollector,
    alert_counts,
)
from app.runtime.scrapedmaintenance import HeldRow, MaintenanceCollector, held_series
from app.runtime.scrapedobjectives import ObjectivesCollector
from app.runtime.tokenmetrics import TokenMetrics
from app.store.reads.objectives import ObjectivesRow, objective_statuses
from app.store.reads.slo import SloRow, slo_statuses
from app.store.records import RunRecord, SampleRecord

log = logging.getLogger(__name__)

# Seconds: sub-millisecond connects on a LAN up to two-minute LLM generations.
LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 90.0, 120.0, 180.0, 300.0,
)  # fmt: skip
LATENESS_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


class RunMetrics:
    """Metrics fed by stored runs, and the registry ``/metrics`` renders."""

    def __init__(self) -> None:
        # ``*_created`` series would double what Prometheus stores for nothing it uses.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=True)
        self._phases_seen: dict[tuple[str, str], set[str]] = {}
        self._stored_series: set[tuple[str, str]] = set()
        # Until ``watch`` is given the service's windows, no run is held.
        self._windows: Callable[[], Sequence[MaintenanceWindow]] = list
        self._lock = threading.Lock()  # the last-run gauges of a series change together
        self._declare(self.registry)

    def _declare(self, registry: CollectorRegistry) -> None:
        def histogram(name: str, doc: str, labels: Sequence[str], buckets: Any) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=registry)

        self.phase_seconds = histogram(
            "phasewatch_phase_seconds",
            "Time a probe request spent in each phase (ok and deadline-cut samples).",
            (*SERIES, "phase"),
            LATENCY_BUCKETS_S,
        )
        self.request_seconds = histogram(
            "phasewatch_request_duration_seconds",
            "End-to-end time of a probe request (a deadline-cut sample counts its deadline).",
            SERIES,
            LATENCY_BUCKETS_S,
        )
        # The name before Prometheus' convention was followed, kept for one release so
        # dashboards can move; the same observations.
        self.request_seconds_deprecated = histogram(
            "phasewatch_request_seconds",
            "DEPRECATED, removed in the next release: use phasewatch_request_duration_seconds"
            " (the same observations).",
            SERIES,
            LATENCY_BUCKETS_S,
        )
        self.lateness_seconds = histogram(
            "phasewatch_schedule_lateness_seconds",
            "How late a run started after its scheduled time.",
            SERIES,
            LATENESS_BUCKETS_S,
        )
        self.phase_share = Gauge(
            "phasewatch_phase_share_ratio",
            "Each phase's share of the sum of phase medians, in the last run.",
            (*SERIES, "phase"),
            registry=registry,
        )
        self.dominant_phase = Gauge(
            "phasewatch_dominant_phase",
            "1 for the phase that dominated the last run, 0 for the other phases.",
            (*SERIES, "phase"),
            registry=registry,
        )
        self.samples = Counter(
            "phasewatch_samples",
            "Probe requests by outcome: ok, deadline_exceeded, timeout, error, http_error,"
            " invalid_answer; maintenance is true for a run a maintenance window held (the"
            " shipped burn-rate rules leave those out, as phasewatch's error budgets do).",
            (*SERIES, "status", "maintenance"),
            registry=registry,
        )
        self.probe_errors = Counter(
            "phasewatch_probe_errors",
            "Failed probe requests by error class (an exception name or HTTP<status>).",
            (*SERIES, "error_class"),
            registry=registry,
        )
        self.runs_stored = Counter(
            "phasewatch_runs_stored",
            "Complete runs this process stored.",
            SERIES,
            registry=registry,
        )
        self.runs_refused = Counter(
            "phasewatch_runs_refused",
            "Runs refused at the door (pushed or spooled) by vantage and the kind of their"
            " first problem: status, sample_status, total, phase, phase_sum, time, order,"
            " samples.",
            ("vantage", "reason"),
            registry=registry,
        )
        self.last_run = Gauge(
            "phasewatch_last_run_timestamp_seconds",
            "When the last stored run started (Unix time).",
            SERIES,
            registry=registry,
        )
        self.tokens = TokenMetrics(registry)  # TTFT, TPOT, stalls, tokens (docs/metrics.md)

    def observe_run(self, run: RunRecord) -> None:
        series = (run.target, run.vantage)
        self._observe_samples(series, run.samples, self._held(run))
        if run.scheduled_at is not None:
            late = (run.started_at - run.scheduled_at).total_seconds()
            self.lateness_seconds.labels(*series).observe(max(0.0, late))
        self.runs_stored.labels(*series).inc()
        self.last_run.labels(*series).set(run.started_at.timestamp())
        with self._lock:
            self._stored_series.add(series)
        self._set_last_breakdown(series, run.samples)

    def observe_refusal(self, vantage: str, reason: str) -> None:
        """A run the door refused (``app.runs.validate``): ``reason`` is a bounded kind."""
        self.runs_refused.labels(vantage, reason).inc()

    def _held(self, run: RunRecord) -> str:
        """The ``maintenance`` label: whether a window held the run's series as it started."""
        try:
            inside = in_any(self._windows(), run.target, run.vantage, run.started_at)
        except Exception as exc:  # the windows are the database's too: never lose the count
            log.warning("metrics: a run counted as outside maintenance: %s", exc)
            inside = False
        return "true" if inside else "false"

    def _observe_samples(
        self, series: tuple[str, str], samples: Sequence[SampleRecord], held: str
    ) -> None:
        """The samples' counts, then their times. A label set's child is looked up once a
        run, not once a sample: prometheus-client's ``labels`` was a third of observing
        (bench/README.md, "Pushes: a run's observations and seeks")."""
        outcomes: dict[str, int] = {}
        errors: dict[str, int] = {}
        for sample in samples:
            outcomes[sample.status] = outcomes.get(sample.status, 0) + 1
            if sample.error_class is not None:
                errors[sample.error_class] = errors.get(sample.error_class, 0) + 1
            self.tokens.observe(series, sample)
        for status, count in outcomes.items():
            self.samples.labels(*series, status, held).inc(count)
        for error_class, count in errors.items():
            self.probe_errors.labels(*series, error_class).inc(count)
        self._observe_times(series, [s for s in samples if s.status in TIMED])

    def _observe_times(self, series: tuple[str, str], timed: Sequence[SampleRecord]) -> None:
        """The timed samples' times, each histogram's counted in one go (``observe_many``)."""
        if not timed:
            return
        totals = [sample.total_ms / 1000.0 for sample in timed]
        observe_many(self.request_seconds.labels(*series), totals)
        observe_many(self.request_seconds_deprecated.labels(*series), totals)
        phases: dict[str, list[float]] = {}
        for sample in timed:
            for phase, ms in sample.phases.items():
                phases.setdefault(phase, []).append(ms / 1000.0)
        for phase, seconds in phases.items():
            observe_many(self.phase_seconds.labels(*series, phase), seconds)

    def _set_last_breakdown(self, series: tuple[str, str], samples: Iterable[SampleRecord]) -> None:
        summary = summarize(samples)
        with self._lock:
            seen = self._phases_seen.setdefault(series, set())
            for gone in seen - summary.phases.keys():
                self.phase_share.remove(*series, gone)  # not measured now: no share, not 0
            seen.update(summary.phases)
            for phase in seen:
                self.dominant_phase.labels(*series, phase).set(phase == summary.dominant)
            for phase, stats in summary.phases.items():
                self.phase_share.labels(*series, phase).set(stats.share)

    def watch(
        self,
        sessions: sessionmaker[Session],
        spooled: Callable[[], int],
        windows: Callable[[], Sequence[MaintenanceWindow]] = list,
    ) -> None:
        """Also expose alert states, the deadline SLOs and the objectives (from the
        database), which series a maintenance window holds, and the spool, read at each
        scrape; a database read that does not answer within
        ``DATABASE_BUDGET_S`` is left out of that scrape, not waited for."""
        alerts = Check(lambda: alert_counts(sessions), "metrics-alerts")
        slos = Check(lambda: slo_statuses(sessions, windows), "metrics-slos")
        objectives = Check(lambda: objective_statuses(sessions, windows), "metrics-objectives")
        held = Check(lambda: held_series(self.series(), windows(), utcnow()), "metrics-held")
        self._windows = windows
        deadline = [0.0]  # the scrape's, set by its first read

        def open_alerts() -> list[AlertCount]:
            # Read first in a scrape: both reads go out now and share one deadline, so a
            # frozen database costs the scrape one budget, not two in a row.
            deadline[0] = time.monotonic() + DATABASE_BUDGET_S
            slos.start()
            objectives.start()
            held.start()
            return alerts.wait(DATABASE_BUDGET_S)

        def slo_rows() -> list[SloRow]:
            return slos.wait(max(0.0, deadline[0] - time.monotonic()))

        def objective_rows() -> list[ObjectivesRow]:
            return objectives.wait(max(0.0, deadline[0] - time.monotonic()))

        def held_rows() -> list[HeldRow]:
            return held.wait(max(0.0, deadline[0] - time.monotonic()))

        self.registry.register(ServiceCollector(open_alerts, spooled, slo_rows))
        self.registry.register(ObjectivesCollector(objective_rows))
        self.registry.register(MaintenanceCollector(held_rows))

    def series(self) -> list[tuple[str, str]]:
        """Every (target, vantage) this process stored a run of."""
        with self._lock:
            return sorted(self._stored_series)


def then(
    first: Callable[[RunRecord], object], second: Callable[[RunRecord], object]
) -> Callable[[RunRecord], None]:
    """One ``after_store`` hook calling two: the second runs even if the first fails."""

    def both(run: RunRecord) -> None:
        try:
            first(run)
        finally:
            second(run)

    return both
