"""Targets the file names that are not probed where it says, and why: never silent.

A target goes unprobed at a vantage when this server refuses it (a ``${VARIABLE}`` its
environment lacks, a control character in a header), when an agent reports refusing it,
or when a reload is refused and the file's new targets are not the running ones. Each
such fact is a problem on /healthz (``Health`` asks ``problems``), a row on the overview
and the target's page, a ``phasewatch_target_unprobed`` gauge on /metrics, and one log
line when it starts (not one per check).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.config import TargetsFile
from app.config.placement import runs_at

log = logging.getLogger(__name__)

# vantage -> {target: why the agent there refused it}, as the agents last reported.
AgentRefusals = Callable[[], Mapping[str, Mapping[str, str]]]


@dataclass(frozen=True, slots=True)
class Unprobed:
    target: str
    vantage: str
    reason: str

    def line(self) -> str:
        return f"target {self.target} not probed at {self.vantage}: {self.reason}"


@dataclass
class Coverage:
    """What is not probed: the server's refusals (``refused_here``, set on each
    (re)load), the agents' (asked when needed), and a refused reload."""

    vantage: str  # this server's
    targets: Callable[[], TargetsFile]  # the running targets file
    agents: AgentRefusals = lambda: {}
    here: dict[str, str] = field(default_factory=dict)
    reload_problem: str | None = None

    def refused_here(self, refused: Mapping[str, str]) -> None:
        """The targets this server refuses to probe now; a new refusal is logged once."""
        for name, reason in refused.items():
            if self.here.get(name) != reason:
                log.error("%s", Unprobed(name, self.vantage, reason).line())
        self.here = dict(refused)

    def reload_refused(self, problem: str) -> None:
        log.error("reload refused, keeping the running targets: %s", problem)
        self.reload_problem = f"reload refused, keeping the running targets: {problem}"

    def reloaded(self) -> None:
        self.reload_problem = None

    def unprobed(self) -> list[Unprobed]:
        """Every (target, vantage) the running file asks for and nobody probes, sorted."""
        found = [Unprobed(name, self.vantage, why) for name, why in self.here.items()]
        by_name = {t.name: t for t in self.targets().targets}
        for vantage, refused in self.agents().items():
            for name, why in refused.items():
                target = by_name.get(name)
                # An agent's report may predate a reload that moved the target away.
                if target is not None and runs_at(target, vantage, server=False):
                    found.append(Unprobed(name, vantage, why))
        return sorted(found, key=lambda u: (u.target, u.vantage))

    def problems(self) -> list[str]:
        lines = [u.line() for u in self.unprobed()]
        return lines + ([self.reload_problem] if self.reload_problem else [])

    def by_target(self) -> dict[str, list[Unprobed]]:
        found: dict[str, list[Unprobed]] = {}
        for one in self.unprobed():
            found.setdefault(one.target, []).append(one)
        return found


class CoverageCollector(Collector):
    """``phasewatch_target_unprobed{target, vantage}`` 1 for each, and whether the last
    reload was refused, read at each scrape."""

    def __init__(self, coverage: Coverage) -> None:
        self.coverage = coverage

    def describe(self) -> Iterator[Metric]:
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        unprobed, refused = self._families()
        for one in self.coverage.unprobed():
            unprobed.add_metric([one.target, one.vantage], 1)
        refused.add_metric([], 1 if self.coverage.reload_problem else 0)
        yield unprobed
        yield refused

    @staticmethod
    def _families() -> tuple[GaugeMetricFamily, GaugeMetricFamily]:
        return (
            GaugeMetricFamily(
                "phasewatch_target_unprobed",
                "1 for each target the targets file asks to probe at a vantage where nobody"
                " does (a variable unset there, an agent that refused it).",
                labels=["target", "vantage"],
            ),
            GaugeMetricFamily(
                "phasewatch_reload_refused",
                "1 while the last reload of the targets file was refused (the previous"
                " targets keep running).",
            ),
        )
