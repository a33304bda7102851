"""Samples as CSV: the one layout that export, import, backtests and the API share.

``timestamp,target,vantage,run_id,status,total_ms,<phase>_ms...[,connect_*_ms][,<llm metric>...]``:
one row per sample, ``timestamp`` its start in UTC (written ``2024-05-01T12:00:00.000000Z``;
any offset is read and converted), an empty phase cell for a phase the sample does not
have. After the phases, when some sample has one, its connect split (``connect_dns_ms,
connect_tcp_ms,connect_tls_ms``, app.probe.connection): parts of ``connect``, not phases,
empty for a sample on a reused connection. Then the LLM metrics
(``app.analysis.llmmetrics.METRIC_NAMES``: ``ttft_ms``, ``tpot_ms``, ``output_tokens``…)
when any exported sample has one, empty where a sample has not. Last, when an exported
target has objectives, the goodput columns (``good``, ``met_<metric>``: ``true``, ``false``
or empty; app.csvio.goodput). A file without any of these imports as before. Rows are
ordered by timestamp, run id, then the sample's index in its run; numbers are written
with ``repr`` so that they read back as the same float. Export → import → export is
byte-identical.

Writing is app.csvio.export, reading app.csvio.importer; this module is what they share:
the columns, the cell formats, and the errors and results they report.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.probe.sample import HTTP_PHASES, LLM_PHASES, Status

BASE_COLUMNS = ("timestamp", "target", "vantage", "run_id", "status", "total_ms")
STATUSES = tuple(status.value for status in Status)
KNOWN_PHASES = (*LLM_PHASES, *(p for p in HTTP_PHASES if p not in LLM_PHASES))
# The connect split's columns (without ``_ms``) → its parts.
SPLIT_COLUMNS = {"connect_dns": "dns", "connect_tcp": "tcp", "connect_tls": "tls"}
MAX_NAME_LENGTH = 200  # targets.name and runs.vantage


@dataclass(frozen=True, slots=True)
class CsvProblem:
    """One thing wrong with the file; ``column`` is None when it is the whole row."""

    line: int
    column: str | None
    reason: str

    def __str__(self) -> str:
        where = f"{self.line}: {self.column}" if self.column else str(self.line)
        return f"{where}: {self.reason}"


class CsvImportError(Exception):
    """The file was not stored. ``problems`` lists the first ones; ``count`` is all of them."""

    def __init__(self, problems: Sequence[CsvProblem], count: int | None = None) -> None:
        self.problems = list(problems)
        self.count = len(self.problems) if count is None else count
        super().__init__("\n".join(str(problem) for problem in self.problems))

    @property
    def unlisted(self) -> int:
        return self.count - len(self.problems)


class CsvExportError(Exception):
    """The export stopped part-way; what was written so far is incomplete."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    runs_stored: int
    samples_stored: int
    runs_already_present: int


def phase_order(names: Iterable[str]) -> list[str]:
    """The LLM phases, then ``server``, in their order; any others alphabetically."""
    found = set(names).difference(SPLIT_COLUMNS)
    return [p for p in KNOWN_PHASES if p in found] + sorted(found.difference(KNOWN_PHASES))


def header(phases: Sequence[str], split: bool = False, metrics: Sequence[str] = ()) -> list[str]:
    """The columns; ``split``: the connect split's too; then ``metrics``, as named."""
    parts = list(SPLIT_COLUMNS) if split else []
    return [*BASE_COLUMNS, *(f"{phase}_ms" for phase in [*phases, *parts]), *metrics]


def format_timestamp(value: datetime) -> str:
    # Fixed width (always microseconds) so that text order is time order.
    text = value.astimezone(UTC).isoformat(timespec="microseconds")
    return text.removesuffix("+00:00") + "Z"


def format_number(value: float) -> str:
    # + 0.0 turns -0.0 into 0.0: JSONB keeps no negative zero, so it would not round-trip.
    return repr(float(value) + 0.0)


# The namespace of run ids another tool wrote as text (``run-0001``): each maps to a UUID of
# its own, the same for the same text of the same target and vantage, so a second import of
# the file stores nothing twice.
TEXT_RUN_IDS = uuid.UUID("6f3c1d2a-90b4-5e6f-8a7b-0c1d2e3f4a5b")


def parse_run_id(text: str, target: str, vantage: str) -> uuid.UUID:
    """A UUID as written, else the UUID ``text`` stands for in its (target, vantage)."""
    if not text.strip():
        raise ValueError("is empty")
    try:
        return uuid.UUID(text)
    except ValueError:
        return uuid.uuid5(TEXT_RUN_IDS, f"{target}\n{vantage}\n{text}")


def parse_status(text: str) -> str:
    if text not in STATUSES:
        raise ValueError(f"{text!r} is not one of {', '.join(STATUSES)}")
    return text


def parse_number(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{text!r} is not a finite number")
    if value < 0:
        raise ValueError(f"{text!r} is negative")
    return value + 0.0


def parse_name(text: str) -> str:
    if not text or len(text) > MAX_NAME_LENGTH:
        raise ValueError(f"must be 1 to {MAX_NAME_LENGTH} characters")
    return text
