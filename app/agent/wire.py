"""What an agent and the server say to each other: paths, headers, the assignment.

A push is one ``RunRecord`` JSON (``app.store.records``), gzip-compressed, with the agent's
send time, so the server can tell its clock's skew. Every answer to an agent names the
assignment's version: an agent holding another one fetches it again.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel, Field

CONFIG_PATH = "/api/v1/agent/config"
RUNS_PATH = "/api/v1/agent/runs"
STATUS_PATH = "/api/v1/agent/status"
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


class AgentStatus(BaseModel):
    refused: dict[str, str] = Field(
        default_factory=dict, description="Targets the agent will not probe: why (no values)."
    )
    pending: int | None = Field(None, ge=0, description="Runs waiting in the agent's spool.")


class PushAnswer(BaseModel):
    stored: bool = Field(description="False: the server had this run already (a replay).")
    config: str = Field(description="The assignment's version now.")


def assignment_version(targets: list[dict[str, Any]]) -> str:
    text = json.dumps(targets, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
