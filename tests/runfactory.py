"""Constructed runs for detector, evaluator and alert-engine tests.

A run's samples draw each phase around a median (log-normal), times a factor the whole run
shares (the server's load at that moment): runs, not samples, are the independent units,
as in real traffic. Extra slow samples, censored and failed samples are opt-in.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.runs import RunData, phase_order
from app.store.db import write_transaction
from app.store.ingest import store_run
from app.store.records import RunRecord, SampleRecord

T0 = datetime(2026, 3, 2, tzinfo=UTC)  # a Monday, midnight UTC
EVERY = timedelta(minutes=15)
# An LLM endpoint where the queue holds the most time; generation comes second.
LLM = {
    "connect": 5.0,
    "network": 30.0,
    "queue": 120.0,
    "prefill": 40.0,
    "generation": 80.0,
    "transfer": 5.0,
}
_ids = itertools.count(1)


def make_run(
    rng: np.random.Generator,
    at: datetime = T0,
    medians: Mapping[str, float] = LLM,
    *,
    n: int = 20,
    sigma: float = 0.15,
    run_sigma: float = 0.05,
    slow: float = 0.0,
    slow_ms: float = 0.0,
    censored: int = 0,
    failed: int = 0,
    target: str = "chat",
    vantage: str = "eu",
    run_id: str | None = None,
) -> RunData:
    """``n`` timed samples (the last ``censored`` of them cut at the deadline) and
    ``failed`` more without latency; a share ``slow`` of samples gets ``slow_ms`` extra
    in the queue."""
    names = phase_order(medians)
    base = np.array([medians[name] for name in names])
    factor = float(np.exp(rng.normal(0.0, run_sigma)))
    phases = base * factor * np.exp(rng.normal(0.0, sigma, size=(n, len(names))))
    if slow and "queue" in names:
        hit = rng.random(n) < slow
        phases[hit, names.index("queue")] += slow_ms
    return RunData(
        run_id=run_id or f"run-{next(_ids)}",
        target=target,
        vantage=vantage,
        at=at,
        phase_names=names,
        phases=phases,
        totals=phases.sum(axis=1),
        censored=censored,
        failed=failed,
        samples=n + failed,
    )


def failed_run(
    at: datetime = T0, *, failed: int = 5, target: str = "chat", vantage: str = "eu"
) -> RunData:
    return RunData(
        run_id=f"run-{next(_ids)}",
        target=target,
        vantage=vantage,
        at=at,
        phase_names=(),
        phases=np.empty((0, 0)),
        totals=np.empty(0),
        censored=0,
        failed=failed,
        samples=failed,
    )


def streamed_sample(
    idx: int, first_ms: float, last_ms: float, tokens: int, stall_ms: float, at: datetime = T0
) -> SampleRecord:
    """An ok streamed answer as the probe stores it: answer tokens from ``first_ms`` to
    ``last_ms``, the usage block's counts (20 in, ``tokens`` out), its rhythm in
    ``details["stream"]`` (ITL p50 9 ms, p90 12 ms, the longest stall ``stall_ms``)."""
    marks = {"first_answer_token": int(first_ms * 1e6), "last_answer_token": int(last_ms * 1e6)}
    stream = {"answer_tokens": tokens, "reasoning_tokens": 0, "arrivals": tokens,
              "itl_ms": {"p50": 9.0, "p90": 12.0, "max": stall_ms}, "stall_ms": stall_ms,
              "stall_at_ms": last_ms, "stall_token": 3, "stall_open": False}  # fmt: skip
    details = {"tokens": {"prompt": 20, "completion": tokens, "reasoning": None}, "stream": stream}
    phases = {"prefill": first_ms, "generation": last_ms - first_ms + 1}
    return SampleRecord(idx, at, "ok", last_ms + 1, phases, marks=marks, details=details)


def record_of(run: RunData) -> RunRecord:
    """The run as the pipeline stores it: ok, deadline-exceeded and error samples."""
    samples = []
    for idx, (row, total) in enumerate(zip(run.phases, run.totals, strict=True)):
        status = "deadline_exceeded" if idx >= run.timed - run.censored else "ok"
        phases = {name: float(value) for name, value in zip(run.phase_names, row, strict=True)}
        at = run.at + timedelta(milliseconds=100 * idx)
        samples.append(SampleRecord(idx, at, status, float(total), phases))
    for idx in range(run.timed, run.samples):
        at = run.at + timedelta(milliseconds=100 * idx)
        samples.append(SampleRecord(idx, at, "error", 0.0, {}, error_class="ConnectError"))
    return RunRecord(
        id=uuid.UUID(run.run_id) if _is_uuid(run.run_id) else uuid.uuid4(),
        target=run.target,
        vantage=run.vantage,
        started_at=run.at,
        status="complete",
        samples=tuple(samples),
        finished_at=run.at + timedelta(seconds=5),
    )


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def store_records(
    sessions: sessionmaker[Session], records: Iterable[RunRecord], now: datetime
) -> list[bool]:
    """Store runs as the pipeline does (``store_run`` in a write transaction), all in one;
    for each, whether it was new."""
    with write_transaction(sessions) as session:
        return [store_run(session, record, now) for record in records]
