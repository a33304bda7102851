"""The numbers LLM users name — TTFT, TPOT, ITL, stalls, tokens — for one sample, and
their percentiles over a run: the one place every surface reads them from.

Pure: a sample's marks (ns from the request's start), its ``details`` (``tokens`` from the
usage block, ``stream`` from ``app.probe.cadence``) and status in; plain numbers out.
``LLM_METRICS`` is the registry, in display order; docs/metrics.md gives each formula and
where vLLM's and AIPerf's differ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.analysis.summary import QUANTILES, list_percentiles
from app.probe.sample import Status


class LlmSample(Protocol):
    """A stored sample (``SampleRecord``, ``SampleRow``): what the metrics are read from."""

    @property
    def status(self) -> str: ...

    @property
    def total_ms(self) -> float: ...

    @property
    def marks(self) -> Mapping[str, int]: ...

    @property
    def details(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, slots=True)
class _View:
    """One sample's facts, read once for every metric."""

    ok: bool
    total_ms: float
    marks: Mapping[str, int]
    usage: Mapping[str, Any]
    stream: Mapping[str, Any] | None

    def mark_ms(self, name: str) -> float | None:
        value = self.marks.get(name)
        return None if value is None else value / 1e6

    def first_token_ms(self) -> float | None:
        found = [
            m
            for m in (self.mark_ms("first_reasoning_token"), self.mark_ms("first_answer_token"))
            if m is not None
        ]
        return min(found) if found and self.stream is not None else None

    def last_token_ms(self) -> float | None:
        found = [
            m
            for m in (self.mark_ms("last_reasoning_token"), self.mark_ms("last_answer_token"))
            if m is not None
        ]
        return max(found) if found and self.stream is not None else None

    def output_tokens(self) -> int | None:
        counted = self.usage.get("completion")
        if counted is None and self.stream is not None:
            counted = self.stream["answer_tokens"] + self.stream["reasoning_tokens"]
        return None if counted is None else int(counted)


@dataclass(frozen=True, slots=True)
class LlmMetric:
    name: str
    unit: str  # "ms", "tokens" or "tokens/s"
    help: str  # one line: the surfaces' tooltip and /metrics' help
    value: Callable[[_View], float | None]


def _ttft(view: _View) -> float | None:
    return view.first_token_ms()


def _ttfat(view: _View) -> float | None:
    return view.mark_ms("first_answer_token") if view.stream is not None else None


def _tpot(view: _View) -> float | None:
    first, last, tokens = view.first_token_ms(), view.last_token_ms(), view.output_tokens()
    if not view.ok or first is None or last is None or tokens is None or tokens < 2:
        return None
    return (last - first) / (tokens - 1)


def _itl(name: str) -> Callable[[_View], float | None]:
    def value(view: _View) -> float | None:
        if not view.ok or view.stream is None:
            return None
        found = view.stream.get("itl_ms", {}).get(name)
        return None if found is None else float(found)

    return value


def _stall(view: _View) -> float | None:
    if (
        view.stream is None
        or view.stream.get("arrivals", 0) < 2
        and not view.stream.get("stall_open")
    ):
        return None
    return float(view.stream["stall_ms"])


def _output_rate(view: _View) -> float | None:
    tokens = view.output_tokens()
    if not view.ok or tokens is None or view.total_ms <= 0:
        return None
    return tokens / (view.total_ms / 1000.0)


def _count(field: str, streamed: str | None = None) -> Callable[[_View], float | None]:
    def value(view: _View) -> float | None:
        found = view.usage.get(field)
        if found is None and streamed is not None and view.stream is not None:
            found = view.stream.get(streamed)
        return None if found is None else float(found)

    return value


LLM_METRICS: tuple[LlmMetric, ...] = (
    LlmMetric("ttft_ms", "ms", "Time to the first token, reasoning or answer.", _ttft),
    LlmMetric("ttfat_ms", "ms", "Time to the first answer token (reasoning apart).", _ttfat),
    LlmMetric(
        "tpot_ms", "ms", "Time per output token after the first: (last - first) / (N - 1).", _tpot
    ),
    LlmMetric("itl_p50_ms", "ms", "Median gap between tokens (a read's gap shared).", _itl("p50")),
    LlmMetric("itl_p90_ms", "ms", "90th percentile gap between tokens.", _itl("p90")),
    LlmMetric("itl_max_ms", "ms", "Largest gap between tokens.", _itl("max")),
    LlmMetric("stall_ms", "ms", "Longest wait between two arrivals of tokens.", _stall),
    LlmMetric(
        "output_tokens_per_s", "tokens/s", "Output tokens over end-to-end time.", _output_rate
    ),
    LlmMetric(
        "input_tokens", "tokens", "Prompt tokens, as the usage block says.", _count("prompt")
    ),
    LlmMetric(
        "output_tokens",
        "tokens",
        "Output tokens: the usage block's, else the token events seen.",
        lambda view: _float(view.output_tokens()),
    ),
    LlmMetric(
        "reasoning_tokens",
        "tokens",
        "Reasoning tokens: the usage block's, else the reasoning events seen.",
        _count("reasoning", "reasoning_tokens"),
    ),
)
METRIC_NAMES = tuple(metric.name for metric in LLM_METRICS)
_BY_NAME = {metric.name: metric for metric in LLM_METRICS}


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def llm_values(
    status: str, total_ms: float, marks: Mapping[str, int], details: Mapping[str, Any]
) -> dict[str, float | None]:
    """Every metric of one sample by name; None where the sample does not have it (a
    whole answer has no TTFT, a failed one no TPOT). An imported sample's are the file's
    (``details["llm"]``, app.csvio)."""
    imported = details.get("llm")
    if isinstance(imported, Mapping):
        return {name: _number(imported.get(name)) for name in METRIC_NAMES}
    view = _view_of(status, total_ms, marks, details)
    return {metric.name: metric.value(view) for metric in LLM_METRICS}


def llm_value(
    name: str, status: str, total_ms: float, marks: Mapping[str, int], details: Mapping[str, Any]
) -> float | None:
    """One metric of one sample (``llm_values``' entry ``name``), the others not worked out:
    what an objective over that metric reads (app.analysis.objectives)."""
    return llm_some((name,), status, total_ms, marks, details)[0]


def llm_some(
    names: Sequence[str],
    status: str,
    total_ms: float,
    marks: Mapping[str, int],
    details: Mapping[str, Any],
) -> list[float | None]:
    """``llm_value`` of each of ``names``, the sample's facts read once (the what-if reads
    TPOT and the longest stall of every sample of a window)."""
    if not has_llm_facts(details):  # a plain HTTP sample: every stored run's objectives read
        return [None] * len(names)
    imported = details.get("llm")
    if isinstance(imported, Mapping):
        return [_number(imported.get(name)) for name in names]
    view = _view_of(status, total_ms, marks, details)
    return [_BY_NAME[name].value(view) for name in names]


def _view_of(
    status: str, total_ms: float, marks: Mapping[str, int], details: Mapping[str, Any]
) -> _View:
    tokens = details.get("tokens")
    return _View(
        ok=status == Status.OK,
        total_ms=total_ms,
        marks=marks,
        usage=tokens if isinstance(tokens, Mapping) else {},
        stream=details.get("stream") or None,
    )


def has_llm_facts(details: Mapping[str, Any]) -> bool:
    """False: every metric of the sample is None, so a summary need not work them out one
    by one (a plain HTTP sample's ``tokens`` are all null). Every metric reads the imported
    ``llm`` values, the stream, or the usage's prompt, completion or reasoning count."""
    get = details.get
    if get("stream") or isinstance(get("llm"), Mapping):
        return True
    usage = get("tokens")
    if not usage or not isinstance(usage, Mapping):
        return False
    count = usage.get
    return (
        count("prompt") is not None
        or count("completion") is not None
        or count("reasoning") is not None
    )


def sample_llm_values(sample: LlmSample) -> dict[str, float | None]:
    """``llm_values`` of a stored sample: what objectives and exports read."""
    return llm_values(sample.status, sample.total_ms, sample.marks, sample.details)


def llm_summary(samples: Iterable[LlmSample]) -> dict[str, dict[str, float]]:
    """Each metric's percentiles (``QUANTILES``) over the samples that have it, with
    their count ``n``; metrics no sample has are left out (an HTTP target has none)."""
    columns: dict[str, list[float]] = {name: [] for name in METRIC_NAMES}
    for sample in samples:
        if not has_llm_facts(sample.details):
            continue
        for name, value in sample_llm_values(sample).items():
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
