"""/metrics per agent vantage, read from the server's ``VantageBook`` at each scrape.

``phasewatch_agent_runs_pushed_total`` was a gauge named ``phasewatch_agent_runs_pushed``
until it became a counter; the old name cannot stay beside it: in OpenMetrics (what
Prometheus asks for first) the counter's family is ``phasewatch_agent_runs_pushed``, and
two families of one name fail the whole scrape. docs/api.md says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.agents.server.book import VantageBook
from app.alerts.silent import DEFAULT_AFTER, Heard, is_silent
from app.clock import utcnow


class VantageCollector(Collector):
    def __init__(
        self,
        book: VantageBook,
        shortest: Callable[[str], float | None],
        after: Callable[[], int] = lambda: DEFAULT_AFTER,
    ) -> None:
        self.book = book
        self.shortest = shortest  # a vantage's shortest assigned interval
        self.after = after  # vantage_silent_after, as the targets file says now

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        seen, skew, pushed, pending, refused, silent = families = self._families()
        now = utcnow()
        for state in self.book.all():
            labels = [state.vantage]
            if state.last_pushed is not None:
                seen.add_metric(labels, state.last_pushed.timestamp())
            if state.skew_s is not None:
                skew.add_metric(labels, state.skew_s)
            pushed.add_metric(labels, state.runs)
            if state.pending is not None:
                pending.add_metric(labels, state.pending)
            refused.add_metric(labels, len(state.refused))
            # vantage_silent's rule on what this server was pushed (a scrape reads no table).
            heard = Heard(state.vantage, self.shortest(state.vantage), state.last_pushed)
            quiet = is_silent(heard, self.book.since, now, self.after())
            silent.add_metric(labels, quiet)
        yield from families

    def _families(self) -> tuple[GaugeMetricFamily | CounterMetricFamily, ...]:
        def gauge(name: str, doc: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"phasewatch_agent_{name}", doc, labels=["vantage"])

        return (
            gauge("last_push_timestamp_seconds", "When the agent last pushed a run."),
            gauge("clock_skew_seconds", "Server receive time minus agent send time, last push."),
            CounterMetricFamily(
                "phasewatch_agent_runs_pushed",  # exposed as ..._total
                "Runs the agent pushed since the server started.",
                labels=["vantage"],
            ),
            gauge("pending_runs", "Runs the agent said wait in its spool."),
            gauge("refused_targets", "Targets the agent refused (a variable it lacks)."),
            gauge(
                "silent",
                "1 when the agent pushed nothing for vantage_silent_after (3) of its shortest"
                " intervals, counted from a minute after the server's start (vantage_silent's"
                " rule).",
            ),
        )
