"""What the server knows of each agent between pushes: last seen, clock skew, version,
runs pushed, runs it says are waiting in its spool, and targets it refused. In memory: an
agent that reports again after a restart fills it anew."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentSeen:
    """What the server has seen of one agent (not the evaluator's per-vantage memory)."""

    vantage: str
    last_seen: datetime | None = None  # any request
    last_pushed: datetime | None = None  # a run
    # Server receive time minus the agent's send time, at the last push: its clock's
    # lead (negative) or lag, plus the push's transit.
    skew_s: float | None = None
    version: str | None = None
    runs: int = 0
    pending: int | None = None
    refused: dict[str, str] = field(default_factory=dict)
    # Due runs its scheduler did not start since it began: target → reason → count.
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class PushLimit:
    """Pushes a vantage may make: ``per_s`` sustained, ``burst`` at once (a spool flushed
    after an outage goes at ``per_s``; the agent retries a refused push with backoff)."""

    per_s: float = 50.0
    burst: float = 1000.0


@dataclass
class VantageBook:
    since: datetime = field(default_factory=lambda: datetime.now(UTC))
    limit: PushLimit = field(default_factory=PushLimit)
    _states: dict[str, AgentSeen] = field(default_factory=dict)
    _buckets: dict[str, tuple[float, float]] = field(default_factory=dict)  # tokens, at
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def admit(self, vantage: str, monotonic_s: float) -> bool:
        """Take one push from ``vantage``'s bucket; False: over its limit, refuse it."""
        with self._lock:
            tokens, at = self._buckets.get(vantage, (self.limit.burst, monotonic_s))
            tokens = min(self.limit.burst, tokens + (monotonic_s - at) * self.limit.per_s)
            admitted = tokens >= 1.0
            self._buckets[vantage] = (tokens - 1.0 if admitted else tokens, monotonic_s)
            return admitted

    def pushed(
        self,
        vantage: str,
        now: datetime,
        sent_at: datetime | None,
        version: str | None,
        runs: int = 1,
    ) -> AgentSeen:
        skew = None if sent_at is None else (now - sent_at).total_seconds()
        with self._lock:
            old = self._states.get(vantage) or AgentSeen(vantage)
            new = replace(
                old,
                last_seen=now,
                last_pushed=now,
                skew_s=skew if skew is not None else old.skew_s,
                version=version or old.version,
                runs=old.runs + runs,
            )
            self._states[vantage] = new
            return new

    def reported(
        self,
        vantage: str,
        now: datetime,
        refused: dict[str, str],
        pending: int | None,
        version: str | None,
        skipped: dict[str, dict[str, int]] | None = None,
    ) -> AgentSeen:
        with self._lock:
            old = self._states.get(vantage) or AgentSeen(vantage)
            for name, why in refused.items():
                if old.refused.get(name) != why:  # one line when it starts, not per report
                    log.error("target %s not probed at %s: %s", name, vantage, why)
            new = replace(
                old,
                last_seen=now,
                refused=dict(refused),
                pending=pending,
                version=version or old.version,
                skipped=old.skipped if skipped is None else skipped,
            )
            self._states[vantage] = new
            return new

    def get(self, vantage: str) -> AgentSeen:
        with self._lock:
            return self._states.get(vantage) or AgentSeen(vantage)

    def skipped(self) -> dict[tuple[str, ...], int]:
        """Each agent's skipped due runs as ``/metrics`` labels them: (target, vantage,
        reason), as it last reported."""
        with self._lock:
            return {
                (target, vantage, reason): n
                for vantage, state in self._states.items()
                for target, reasons in state.skipped.items()
                for reason, n in reasons.items()
            }

    def refusals(self) -> dict[str, dict[str, str]]:
        """Each vantage's refused targets (name: why), as its agent last reported."""
        with self._lock:
            return {v: dict(state.refused) for v, state in self._states.items() if state.refused}

    def all(self) -> list[AgentSeen]:
        with self._lock:
            return sorted(self._states.values(), key=lambda state: state.vantage)
