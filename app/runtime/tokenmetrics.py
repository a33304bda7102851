"""The LLM metrics on ``/metrics`` (docs/metrics.md): each stored sample's TTFT, TPOT, ITL
p90 and longest stall as histograms in seconds, its token counts as counters.

The values are ``app.analysis.llmmetrics``' (one definition for every surface); a sample
without a value (a whole answer has no TTFT, a failed one no TPOT) is not observed.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

from app.analysis.llmmetrics import has_llm_facts, sample_llm_values
from app.runtime.scraped import SERIES
from app.store.records import SampleRecord

# Seconds: a first token from tens of milliseconds to minutes; a stall likewise.
FIRST_TOKEN_BUCKETS_S = (
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
# Seconds a token: 1,000 tokens/s to under one.
TOKEN_GAP_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip

# Metric name (``LLM_METRICS``) → its histogram: name, help, buckets.
HISTOGRAMS = {
    "ttft_ms": (
        "phasewatch_ttft_seconds",
        "Time to the first token of a streamed answer, reasoning or answer.",
        FIRST_TOKEN_BUCKETS_S,
    ),
    "ttfat_ms": (
        "phasewatch_ttfat_seconds",
        "Time to the first answer token of a streamed answer (reasoning apart).",
        FIRST_TOKEN_BUCKETS_S,
    ),
    "tpot_ms": (
        "phasewatch_tpot_seconds",
        "Time per output token after the first, of each ok streamed answer.",
        TOKEN_GAP_BUCKETS_S,
    ),
    "itl_p90_ms": (
        "phasewatch_itl_p90_seconds",
        "The 90th percentile gap between tokens, of each ok streamed answer.",
        TOKEN_GAP_BUCKETS_S,
    ),
    "stall_ms": (
        "phasewatch_stall_seconds",
        "The longest wait between two arrivals of tokens, of each streamed answer.",
        FIRST_TOKEN_BUCKETS_S,
    ),
}
# Metric name → its counter (exposed with ``_total``): name, help.
COUNTERS = {
    "input_tokens": ("phasewatch_input_tokens", "Prompt tokens of probe requests (usage)."),
    "output_tokens": ("phasewatch_output_tokens", "Output tokens of probe requests."),
    "reasoning_tokens": ("phasewatch_reasoning_tokens", "Reasoning tokens of probe requests."),
}


class TokenMetrics:
    """The LLM metrics' series in ``registry``, fed one stored sample at a time."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.histograms = {
            key: Histogram(name, doc, SERIES, buckets=buckets, registry=registry)
            for key, (name, doc, buckets) in HISTOGRAMS.items()
        }
        self.counters = {
            key: Counter(name, doc, SERIES, registry=registry)
            for key, (name, doc) in COUNTERS.items()
        }

    def observe(self, series: tuple[str, str], sample: SampleRecord) -> None:
        if not has_llm_facts(sample.details):  # a plain HTTP sample: every value None
            return
        values = sample_llm_values(sample)
        for key, histogram in self.histograms.items():
            value = values[key]
            if value is not None:
                histogram.labels(*series).observe(value / 1000.0)
        for key, counter in self.counters.items():
            value = values[key]
            if value:
                counter.labels(*series).inc(value)
