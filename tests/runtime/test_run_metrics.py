"""A stored run's samples on /metrics: each sample counted and timed once, whatever the mix
of outcomes, error classes and phases in its run."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest

from app.runtime.metrics import RunMetrics
from app.store.records import RunRecord, SampleRecord

T0 = datetime(2026, 12, 7, 23, 0, tzinfo=UTC)
SERIES = {"target": "api", "vantage": "eu-1"}
PLAIN = {"http_version": "HTTP/1.1", "tokens": {"prompt": None, "completion": None}}
LLM = {"tokens": {"prompt": 12, "completion": 51}}


def sample(status: str, phases: dict[str, float], **fields: Any) -> SampleRecord:
    given: dict[str, Any] = {"details": PLAIN, "http_status": 200} | fields
    total = sum(phases.values()) or 5.0
    return SampleRecord(0, T0, status, total_ms=total, phases=phases, **given)


OK = sample("ok", {"connect": 2.0, "server": 30.0})
OK_TRANSFER = sample("ok", {"connect": 1.0, "server": 20.0, "transfer": 4.0})
CUT = sample("deadline_exceeded", {"server": 900.0})
REFUSED = sample("error", {}, error_class="ConnectError", http_status=None)
HTTP_500 = sample("http_error", {}, error_class="HTTP500", http_status=500)
CHAT = sample("ok", {"server": 40.0}, details=LLM)

CASES = {
    "all ok, one phase set": [OK, OK, OK],
    "phases differing by sample": [OK, OK_TRANSFER, OK],
    "a deadline cut is timed": [OK, CUT],
    "failures counted, not timed": [REFUSED, OK, HTTP_500, REFUSED],
    "nothing timed": [REFUSED, HTTP_500],
    "an llm sample among plain ones": [OK, CHAT, OK],
    "no samples": [],
}


def value(metrics: RunMetrics, name: str, **labels: str) -> float:
    found = metrics.registry.get_sample_value(name, SERIES | labels)
    return 0.0 if found is None else found


@pytest.mark.parametrize("samples", CASES.values(), ids=CASES.keys())
def test_each_sample_is_counted_and_timed_once(samples: list[SampleRecord]) -> None:
    metrics = RunMetrics()
    runs = [RunRecord(uuid.uuid4(), "api", "eu-1", T0, "complete", samples=samples)] * 2
    for run in runs:
        metrics.observe_run(run)
    for status, count in Counter(s.status for s in samples).items():
        counted = value(metrics, "phasewatch_samples_total", status=status, maintenance="false")
        assert counted == 2 * count
    for error_class, count in Counter(s.error_class for s in samples if s.error_class).items():
        assert value(metrics, "phasewatch_probe_errors_total", error_class=error_class) == 2 * count
    timed = [s for s in samples if s.status in ("ok", "deadline_exceeded")]
    for name in ("phasewatch_request_duration_seconds", "phasewatch_request_seconds"):
        assert value(metrics, f"{name}_count") == 2 * len(timed)
        total_s = 2 * sum(s.total_ms for s in timed) / 1000
        assert value(metrics, f"{name}_sum") == pytest.approx(total_s)
    for phase in {p for s in samples for p in s.phases}:
        times = [s.phases[phase] for s in timed if phase in s.phases]
        assert value(metrics, "phasewatch_phase_seconds_count", phase=phase) == 2 * len(times)
        assert value(metrics, "phasewatch_phase_seconds_sum", phase=phase) == pytest.approx(
            2 * sum(times) / 1000
        )
    prompts = sum(s.details["tokens"]["prompt"] or 0 for s in samples)
    assert value(metrics, "phasewatch_input_tokens_total") == 2 * prompts
