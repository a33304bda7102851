"""The door every run passes before it is stored, wherever it comes from (an agent's push,
a flush of the spool, a CSV import): ``check_run`` is pure, a ``RunRecord`` and the
receiver's ``now`` in, the problems out (a field path and why, e.g.
``samples[3].phases.queue: -5.0 is negative``); no problems, the run may be stored.

The rules (docs/agents.md, "What a run must be"):

- the run's status is a ``RunStatus``, each sample's a probe ``Status``;
- ``total_ms`` and every phase are finite and not negative;
- a timed sample's phases (ok, deadline_exceeded) add up to its ``total_ms`` within
  ``PHASE_SUM_TOLERANCE_MS`` (``phase_sums``: not for a CSV import, whose layout lets
  another tool's history hold only some phases, or none);
- ``started_at`` and ``finished_at`` carry a time zone, are not before ``EARLIEST`` and not
  more than ``MAX_AHEAD`` after ``now``; ``finished_at`` is not before ``started_at``;
- at most ``MAX_SAMPLES`` samples; a complete run has at least one (an aborted run may
  have fewer, none included);
- ``slot``, when there is one, is a whole number of milliseconds since the epoch within the
  same window as the run's times, and not after ``scheduled_at`` (the slot holds it).

``Door`` is what a sink keeps: the check against its clock, each refusal counted (by the
vantage and the first problem's ``kind``, a bounded label) and logged once per kind.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import cast

from annotated_types import Le

from app.analysis.summary import TIMED
from app.config.targets import Target
from app.probe.sample import Status
from app.runs.slots import slot_time
from app.store.records import RunRecord, RunStatus, SampleRecord

log = logging.getLogger(__name__)

# The probe's own phases are slices of one time line and add up to the total exactly; its
# tests hold every sample to 0.01 ms (tests/probe: abs(sum(phases) - total_ms) < 0.01), which
# also covers a sample written by Sample.to_json (each of at most six phases rounded to
# 0.0001 ms) and a CSV written by another tool with a few decimals.
PHASE_SUM_TOLERANCE_MS = 0.01
# Older than any phasewatch run, and any latency history worth importing from another tool.
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
# An agent's clock may run ahead of the server's; NTP keeps it within seconds, a host
# without it drifts a few seconds a day. Five minutes passes any clock worth trusting and
# refuses a run that would stand in for the future (a 9999 run that "resolves" an alert).
MAX_AHEAD = timedelta(minutes=5)
SAMPLE_STATUSES = frozenset(status.value for status in Status)
RUN_STATUSES = frozenset(status.value for status in RunStatus)
MAX_LISTED = 5  # problems named in one refusal's reason


def _samples_cap() -> int:
    """The targets file's bound on ``samples`` per run: no probe makes more."""
    bounds = [cast(int, m.le) for m in Target.model_fields["samples"].metadata if isinstance(m, Le)]
    return min(bounds)


MAX_SAMPLES = _samples_cap()


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a run. ``kind`` is bounded (a metric label); ``sample`` is the
    index in ``samples`` of the sample it is about, None for the run itself."""

    field: str
    reason: str
    kind: str
    sample: int | None = None

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


KINDS = (
    "status",
    "sample_status",
    "total",
    "phase",
    "phase_sum",
    "time",
    "order",
    "samples",
    "slot",
)


def check_run(record: RunRecord, now: datetime, *, phase_sums: bool = True) -> list[Problem]:
    """Everything wrong with ``record`` as a run received at ``now``; empty: it may be stored.
    ``phase_sums``: hold each timed sample's phases to its total (a probe's run)."""
    problems = _run_problems(record, now)
    for position, sample in enumerate(record.samples):
        if not _plainly_fine(sample, phase_sums):
            problems.extend(_sample_problems(position, sample, phase_sums))
    return problems


def _plainly_fine(sample: SampleRecord, phase_sums: bool) -> bool:
    """True only where ``_sample_problems`` finds nothing: the usual sample (floats), checked
    with a few calls instead of several a number; anything less plain takes the long way."""
    status, phases = sample.status, sample.phases
    if type(status) is not str or status not in SAMPLE_STATUSES or type(phases) is not dict:
        return False
    values = [sample.total_ms, *phases.values()]
    if set(map(type, values)) != {float} or not all(map(math.isfinite, values)):
        return False
    if min(values) < 0:
        return False
    if not phase_sums or status not in TIMED:
        return True
    return abs(math.fsum(phases.values()) - sample.total_ms) <= PHASE_SUM_TOLERANCE_MS


def _run_problems(record: RunRecord, now: datetime) -> list[Problem]:
    problems: list[Problem] = []
    if not _one_of(record.status, RUN_STATUSES):
        reason = f"{record.status!r} is not one of {', '.join(sorted(RUN_STATUSES))}"
        problems.append(Problem("status", reason, "status"))
    problems.extend(_count_problems(record))
    problems.extend(_time_problems("started_at", record.started_at, now))
    if record.finished_at is not None:
        problems.extend(_time_problems("finished_at", record.finished_at, now))
        if not problems and record.finished_at < record.started_at:
            reason = f"{record.finished_at.isoformat()} is before started_at"
            problems.append(Problem("finished_at", reason, "order"))
    if record.slot is not None:
        problems.extend(_slot_problems(record, now))
    return problems


def _slot_problems(record: RunRecord, now: datetime) -> list[Problem]:
    slot = record.slot
    if not isinstance(slot, int) or isinstance(slot, bool):
        return [Problem("slot", f"{slot!r} is not a whole number (ms since the epoch)", "slot")]
    try:
        at = slot_time(slot)
    except OverflowError:
        return [Problem("slot", f"{slot} is beyond any date", "slot")]
    for problem in _time_problems("slot", at, now):
        return [Problem("slot", f"{slot}: {problem.reason}", "slot")]
    scheduled = record.scheduled_at
    if isinstance(scheduled, datetime) and scheduled.tzinfo is not None and at > scheduled:
        reason = f"{slot} ({at.isoformat()}) is after scheduled_at {scheduled.isoformat()}"
        return [Problem("slot", reason, "slot")]
    return []


def _one_of(value: object, vocabulary: frozenset[str]) -> bool:
    return isinstance(value, str) and value in vocabulary  # JSON may hold a list: unhashable


def _count_problems(record: RunRecord) -> list[Problem]:
    count = len(record.samples)
    if count > MAX_SAMPLES:
        return [Problem("samples", f"{count} samples, more than {MAX_SAMPLES}", "samples")]
    if count == 0 and record.status == RunStatus.COMPLETE:
        return [Problem("samples", "a complete run with no sample", "samples")]
    return []


def _time_problems(name: str, value: datetime, now: datetime) -> list[Problem]:
    if value.tzinfo is None:
        return [Problem(name, f"{value.isoformat()} has no time zone", "time")]
    if value < EARLIEST:
        return [Problem(name, f"{value.isoformat()} is before {EARLIEST.date()}", "time")]
    if value > now + MAX_AHEAD:
        ahead = f"more than {MAX_AHEAD} ahead of the receiver's clock ({now.isoformat()})"
        return [Problem(name, f"{value.isoformat()} is {ahead}", "time")]
    return []


def _sample_problems(position: int, sample: SampleRecord, phase_sums: bool) -> list[Problem]:
    where = f"samples[{position}]"
    problems: list[Problem] = []
    if not _one_of(sample.status, SAMPLE_STATUSES):
        reason = f"{sample.status!r} is not one of {', '.join(sorted(SAMPLE_STATUSES))}"
        problems.append(Problem(f"{where}.status", reason, "sample_status", position))
    total = _number_problem(f"{where}.total_ms", sample.total_ms, "total", position)
    if not isinstance(sample.phases, dict):  # JSON from an agent: any shape
        return [*problems, Problem(f"{where}.phases", "not an object", "phase", position)]
    phases = [
        _number_problem(f"{where}.phases.{name}", value, "phase", position)
        for name, value in sample.phases.items()
    ]
    problems.extend(p for p in (total, *phases) if p is not None)
    if phase_sums and not problems and sample.status in TIMED:
        problems.extend(_sum_problems(where, position, sample))
    return problems


def _number_problem(path: str, value: object, kind: str, position: int) -> Problem | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return Problem(path, f"{value!r} is not a number", kind, position)
    if not math.isfinite(value):
        return Problem(path, f"{value!r} is not finite", kind, position)
    if value < 0:
        return Problem(path, f"{value!r} is negative", kind, position)
    return None


def _sum_problems(where: str, position: int, sample: SampleRecord) -> list[Problem]:
    added = math.fsum(sample.phases.values())
    if abs(added - sample.total_ms) <= PHASE_SUM_TOLERANCE_MS:
        return []
    reason = (
        f"the phases add up to {added!r}, not total_ms {sample.total_ms!r}"
        f" (within {PHASE_SUM_TOLERANCE_MS} ms)"
    )
    return [Problem(f"{where}.phases", reason, "phase_sum", position)]


def refusal_of(problems: list[Problem]) -> str:
    """One refusal's reason: its first problems, and how many more."""
    named = "; ".join(str(problem) for problem in problems[:MAX_LISTED])
    more = len(problems) - MAX_LISTED
    return f"{named}; and {more} more" if more > 0 else named


Counted = Callable[[str, str], None]  # vantage, kind


class Door:
    """A sink's check of each run against its clock; a refused run is passed to ``counted``
    (its vantage and first problem's kind) and logged the first time its (vantage, kind) is
    seen — a flood of one kind of bad run is one line and a counter, not a line a run."""

    def __init__(self, clock: Callable[[], datetime], counted: Counted | None = None) -> None:
        self.clock = clock
        self.counted = counted
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def refusal(self, record: RunRecord) -> str | None:
        """None: the run may be stored; else why not (field paths and reasons)."""
        problems = check_run(record, self.clock())
        if not problems:
            return None
        kind, reason = problems[0].kind, refusal_of(problems)
        if self.counted is not None:
            self.counted(record.vantage, kind)
        with self._lock:
            first = (record.vantage, kind) not in self._logged
            self._logged.add((record.vantage, kind))
        if first:
            log.warning(
                "refused a run of %s from vantage %s (%s; further refusals of this kind are"
                " only counted): %s",
                record.target,
                record.vantage,
                kind,
                reason,
            )
        return reason
