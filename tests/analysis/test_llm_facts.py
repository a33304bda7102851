"""A sample without LLM facts is passed over by the LLM summary (``has_llm_facts``): each
such sample has no metric at all, and the summary of any mix is what working every
metric out for every sample gives."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from app.analysis.llmmetrics import (
    METRIC_NAMES,
    has_llm_facts,
    llm_some,
    llm_summary,
    llm_values,
)
from app.analysis.summary import QUANTILES, list_percentiles

STREAM = {"answer_tokens": 40, "reasoning_tokens": 8, "itl_ms": {"p50": 3.0}, "arrivals": 30,
          "stall_ms": 12.0}  # fmt: skip
MARKS = {"first_answer_token": 90_000_000, "last_answer_token": 400_000_000}
DETAILS: list[dict[str, Any]] = [
    {},
    {"tokens": None, "stream": None, "llm": None},
    {"tokens": {}, "stream": {}},
    {"tokens": {"prompt": None, "completion": None, "reasoning": None}},
    {"tokens": {"cached": 12, "total": None}},  # counts no metric reads
    {"tokens": ["prompt", 3]},
    {"tokens": {"prompt": 12}},
    {"tokens": {"completion": 0}},
    {"tokens": {"reasoning": 5}},
    {"stream": STREAM},
    {"stream": STREAM, "tokens": {"prompt": 7, "completion": 41, "reasoning": 8}},
    {"llm": {"ttft_ms": 80.0, "tpot_ms": None}},
    {"llm": "not a mapping"},
]


@dataclass(frozen=True)
class Sample:
    details: dict[str, Any]
    status: str = "ok"
    total_ms: float = 450.0
    marks: dict[str, int] = field(default_factory=lambda: dict(MARKS))


@pytest.mark.parametrize("details", DETAILS)
def test_a_sample_without_llm_facts_has_no_metric(details: dict[str, Any]) -> None:
    values = llm_values("ok", 450.0, MARKS, details)
    if not has_llm_facts(details):
        assert set(values.values()) == {None}
    else:
        assert set(values.values()) != {None}


@pytest.mark.parametrize("details", DETAILS)
@pytest.mark.parametrize("status", ["ok", "deadline_exceeded", "error"])
def test_some_metrics_read_are_those_worked_out(details: dict[str, Any], status: str) -> None:
    names = list(METRIC_NAMES)
    worked_out = llm_values(status, 450.0, MARKS, details)
    assert llm_some(names, status, 450.0, MARKS, details) == [worked_out[n] for n in names]


def _every_metric_worked_out(samples: list[Sample]) -> dict[str, dict[str, float]]:
    columns: dict[str, list[float]] = {name: [] for name in METRIC_NAMES}
    for sample in samples:
        for name, value in llm_values(
            sample.status, sample.total_ms, sample.marks, sample.details
        ).items():
            if value is not None:
                columns[name].append(value)
    return {
        name: {
            **{q: round(v, 3) for q, v in zip(QUANTILES, list_percentiles(values), strict=True)},
            "n": len(values),
        }
        for name, values in columns.items()
        if values
    }


@pytest.mark.parametrize("start", range(0, len(DETAILS), 3))
def test_the_summary_is_every_metric_worked_out(start: int) -> None:
    samples = [Sample(details) for details in DETAILS[start:] + DETAILS[:start]]
    assert llm_summary(samples) == _every_metric_worked_out(samples)
