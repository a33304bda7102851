"""The read API's response models: separate from the ORM, so a column never leaks by accident.

Secrets: a target's header values never appear (only header names), and a URL's userinfo
and the values of query parameters that look like credentials (``key``, ``token``,
``secret``, ``password``, ``sig``, ``auth`` …) are replaced by ``<redacted>``, in URLs and
in free text such as error messages.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field

REDACTED = "<redacted>"
SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|sig|auth|credential|session", re.I)
URL_IN_TEXT = re.compile(r"https?://[^\s'\"<>]+")


def redacted_url(url: str) -> str:
    """``url`` with its userinfo and credential-like query values redacted."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return REDACTED
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{REDACTED}@{host}" if "@" in parts.netloc else host
    query = [
        (name, REDACTED if SECRET_NAME.search(name) else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="<>"), ""))


def redacted_text(text: str | None) -> str | None:
    """Free text (an error message) with every URL in it redacted."""
    if text is None:
        return None
    return URL_IN_TEXT.sub(lambda match: redacted_url(match.group(0)), text)


class Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class VersionOut(Out):
    version: str
    database: str = Field(description="sqlite or postgresql")
    schema_revision: str | None = Field(description="Alembic revision the database is at")


class IndexOut(Out):
    version: str
    openapi: str = Field(description="The OpenAPI document: every endpoint, its parameters")
    docs: str = Field(description="The same, to read in a browser")
    endpoints: list[str] = Field(description="Every GET of this API, as `/api/v1/...` paths")


class PhaseOut(Out):
    phase: str
    p50: float
    p90: float
    p95: float
    p99: float
    n: int = Field(description="timed samples (a sample without the phase counts as 0 ms)")
    share: float = Field(description="this phase's median over the sum of all phase medians")
    provenance: str = Field(description="how most samples measured it: measured|server|estimated")


class SloOut(Out):
    objective: float = Field(description="share of timed requests within the deadline, e.g. 0.99")
    budget_window: str = Field(description="the error budget's window, e.g. 30d")
    budget_left: float | None = Field(
        description="share of the window's error budget not yet spent (below 0: overspent); "
        "null: no timed request in the window"
    )
    burn_rates: dict[str, float | None] = Field(
        description="per window (5m, 30m, 1h, 6h, 3d): the miss rate over the budget's rate "
        "(1 = the budget lasts exactly its window); null: no request in that window"
    )
    burning: list[str] = Field(
        description="severities whose long window burns at its factor: critical (page), "
        "warning (ticket)"
    )


class ConnectSplitOut(Out):
    n: int = Field(description="samples that made a new connection")
    medians: dict[str, float] = Field(description="dns, tcp and tls: each part's median, ms")
    families: dict[str, int] = Field(description="new connections by address family")


class ObjectiveOut(Out):
    """One objective of ``alerts.objectives`` now (docs/slo.md)."""

    metric: str = Field(description="availability, end_to_end_ms or ttft_ms")
    below_ms: float | None = Field(description="a latency objective's bound; null: availability")
    objective: float = Field(description="share of counted requests meeting it, e.g. 0.995")
    budget_window: str
    budget_left: float | None = Field(description="as the deadline SLO's; null: no request")
    burn_rates: dict[str, float | None] = Field(description="per window; null: no request")
    burning: list[str] = Field(description="critical (page), warning (ticket)")


class BreakdownOut(Out):
    target: str
    vantage: str | None = Field(description="null: every vantage pooled")
    from_: datetime = Field(alias="from")
    to: datetime
    runs: int
    n: int = Field(description="timed samples: ok and deadline-exceeded (censored)")
    errors: int
    deadline_exceeded: int
    total: dict[str, float] = Field(description="end-to-end p50/p90/p95/p99, ms")
    phases: list[PhaseOut]
    dominant: str | None
    last_run_at: datetime | None
    source: str = Field(description="samples: exact; digests: merged sketches, within 1 %")
    slo: SloOut | None = Field(
        default=None, description="the deadline SLO as of `to`; null: the target has no deadline"
    )
    connect_split: ConnectSplitOut | None = Field(
        default=None,
        description="connect as dns, tcp and tls over the raw samples' new connections;"
        " null: none (every connection reused, or the samples pruned)",
    )
    objectives: list[ObjectiveOut] = Field(
        default_factory=list, description="the target's other objectives as of `to`"
    )
    goodput: dict[str, float | None] | None = Field(
        default=None,
        description="per window ending at `to`: the share of requests meeting every objective"
        " at once (status ok, and each latency objective met); null: no objectives",
    )


# A vantage a target was probed from, and its last run there (the vantages themselves,
# with what the server heard from each, are ``app.web.api.vantages.VantageOut``).
class TargetVantageOut(Out):
    name: str
    last_run_at: datetime


class UnprobedOut(Out):
    vantage: str
    reason: str = Field(description="why nobody probes it there, and so what to fix")


class TargetOut(Out):
    name: str
    kind: str
    url: str = Field(description="credential-like query values redacted")
    interval_s: float
    samples: int | None
    deadline_ms: float | None
    active: bool = Field(description="false: gone from the targets file, or known by runs only")
    header_names: list[str] = Field(description="names only: header values are never shown")
    vantages: list[TargetVantageOut]
    last_run_at: datetime | None
    unprobed: list[UnprobedOut] = Field(
        default_factory=list,
        description="vantages the targets file names where nobody probes it now, and why",
    )


class TargetDetail(TargetOut):
    window_from: datetime
    window_to: datetime
    breakdowns: list[BreakdownOut] = Field(description="the window's breakdown per vantage")


class RunOut(Out):
    id: uuid.UUID
    target: str
    vantage: str
    status: str = Field(description="complete or aborted")
    scheduled_at: datetime | None
    started_at: datetime
    finished_at: datetime | None
    n_samples: int
    n_ok: int
    n_errors: int
    n_deadline_exceeded: int
    dominant_phase: str | None
    total: dict[str, float | None]
    summary: dict[str, Any] = Field(
        description="the run's own breakdown, as stored with it; `llm`: the percentiles of"
        " the LLM metrics (docs/metrics.md), in runs stored since they were measured"
    )


class SampleOut(Out):
    run_id: uuid.UUID
    target: str
    vantage: str
    idx: int
    started_at: datetime
    status: str
    http_status: int | None
    error_class: str | None
    error: str | None
    total_ms: float
    phases: dict[str, float]
    provenance: dict[str, str]
    marks: dict[str, int]
    details: dict[str, Any]
    llm: dict[str, float | None] = Field(
        description="TTFT, TPOT, ITL, stall, tokens (docs/metrics.md); null where not measured"
    )


class RunObjectiveOut(Out):
    metric: str
    counted: int = Field(description="samples the objective counts in this run")
    bad: int = Field(description="of them, those not meeting it")


class RunDetail(RunOut):
    samples: list[SampleOut]
    objectives: list[RunObjectiveOut] = Field(
        default_factory=list, description="the run against each of the target's objectives"
    )
    goodput: float | None = Field(
        default=None, description="share of the run's samples meeting every objective at once"
    )


TOTAL_HELP = "items in the window over every page; null unless asked for with ?total=true"


class RunPage(Out):
    items: list[RunOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")
    total: int | None = Field(None, description=TOTAL_HELP)


class SamplePage(Out):
    items: list[SampleOut]
    next_cursor: str | None = Field(description="pass as ?cursor= for the next page")
    total: int | None = Field(None, description=TOTAL_HELP)


class HistoryOut(Out):
    target: str
    vantage: str | None
    from_: datetime = Field(alias="from")
    to: datetime
    bucket_seconds: int
    source: str = Field(description="runs: merged run digests; rollups: merged rollups")
    phases: list[str]
    time: list[int] = Field(description="bucket starts, epoch seconds UTC, aligned to the step")
    runs: list[int]
    samples: list[int]
    deadline_misses: list[int]
    errors: list[int]
    total: dict[str, list[float | None]]
    phase_quantiles: dict[str, dict[str, list[float | None]]]
    shares: dict[str, list[float | None]]
    dominant: list[str | None]


class DifferenceOut(Out):
    phase: str
    statistic: str = Field(description="the quantile compared")
    spread_ms: float = Field(description="slowest minus fastest target")
    fastest: str
    slowest: str
    values: dict[str, float] = Field(description="the statistic per target")


class CompareOut(Out):
    from_: datetime = Field(alias="from")
    to: datetime
    vantage: str | None
    breakdowns: list[BreakdownOut]
    differs_most: DifferenceOut | None = Field(
        description="the phase whose median differs most between the targets"
    )
