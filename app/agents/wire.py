"""What an agent and the server say to each other: paths, headers, the assignment.

A push is one ``RunRecord`` JSON (``app.store.records``), gzip-compressed, with the agent's
send time, so the server can tell its clock's skew (its ``slot``, optional, is the scheduled
slot: an older agent sends none, and its runs are kept by run id only); a batch
(``BATCH_PATH``) is several, ``{"runs": [...]}``, answered run by run. Every answer to an
agent names the assignment's version: an agent holding another one fetches it again.
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CONFIG_PATH = "/api/v1/agent/config"
RUNS_PATH = "/api/v1/agent/runs"
STATUS_PATH = "/api/v1/agent/status"
BATCH_PATH = "/api/v1/agent/batches"
# A batch's bounds, as the agent builds it: the server takes at most MAX_BATCH_RUNS runs a
# request, and the JSON of a batch this size compresses well within its body limit.
MAX_BATCH_RUNS = 50
MAX_BATCH_JSON_BYTES = 4 << 20
VANTAGE_HEADER = "X-Phasewatch-Vantage"
SENT_AT_HEADER = "X-Phasewatch-Sent-At"
VERSION_HEADER = "X-Phasewatch-Agent-Version"
CONFIG_HEADER = "X-Phasewatch-Config"
# Sent to agents: what they probe and how; never alerting, never a header's value.
TARGET_FIELDS_KEPT_BACK = ("alerts", "notifiers")


class Assignment(BaseModel):
    vantage: str
    version: str = Field(description="Changes whenever the targets sent change.")
    refresh_s: float = Field(description="Fetch the assignment again this often.")
    targets: list[dict[str, Any]] = Field(
        description="Targets as in the targets file; header values are `${ENV}` templates."
    )


# app.runtime.skips' reasons: the wire names them, so an agent cannot invent label values.
SkipReason = Literal["running", "late", "turn", "woke_late"]


class AgentStatus(BaseModel):
    # Strict: ``"pending": false`` is not a count (lax pydantic would read it as 0).
    model_config = ConfigDict(strict=True)

    refused: dict[str, str] = Field(
        default_factory=dict, description="Targets the agent will not probe: why (no values)."
    )
    pending: int | None = Field(None, ge=0, description="Runs waiting in the agent's spool.")
    skipped: dict[str, dict[SkipReason, Annotated[int, Field(ge=0)]]] = Field(
        default_factory=dict,
        description="Due runs the agent's scheduler did not start since the agent began, by"
        " target and reason (phasewatch_runs_skipped_total); an older agent sends none.",
    )


class PushAnswer(BaseModel):
    stored: bool = Field(
        description="False: the server had this run already (a replay), or another run of its"
        " slot: drop it, it is not an error."
    )
    config: str = Field(description="The assignment's version now.")


def assignment_version(targets: list[dict[str, Any]]) -> str:
    text = json.dumps(targets, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class PushOutcome(StrEnum):
    """What the server did with one run of a batch."""

    STORED = "stored"
    DUPLICATE = "duplicate"  # it had this run id, or a run of its slot, already: nothing stored
    REFUSED = "refused"  # never (its reason says why): the agent sets the run aside


class RunOutcome(BaseModel):
    id: str | None = Field(description="The run's id; null when the item is not a run.")
    outcome: PushOutcome
    reason: str | None = Field(None, description="Why it was refused.")


class BatchAnswer(BaseModel):
    results: list[RunOutcome] = Field(description="One per run sent, in the order sent.")
    config: str = Field(description="The assignment's version now.")
