"""Process settings: ``PHASEWATCH_*`` in the environment, then the targets file's globals.

Environment variables win over the file's global fields: an operator can move a
deployment to another database without editing the targets file.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.config.targets import TargetsFile

DEFAULT_CONFIG_PATH = Path("phasewatch.yaml")
DEFAULT_DATABASE_URL = "sqlite:///./phasewatch.db"

# A Host header's name without its port: '*', '*.example.com', a DNS name, an IPv4 address or
# a bracketed IPv6 one (as browsers send it).
_HOST_PATTERN = re.compile(r"^(\*|(\*\.)?[a-z0-9_.-]+|\[[0-9a-f:.]+\])$")


ENV_PREFIX = "PHASEWATCH_"
VANTAGE_VARIABLE = f"{ENV_PREFIX}VANTAGE"


class Settings(BaseSettings):
    """Process settings: ``PHASEWATCH_<NAME>`` in the environment, then the targets file."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore")

    config: Path = Field(DEFAULT_CONFIG_PATH, description="Path of the targets file.")
    database_url: str | None = Field(
        None, description=f"SQLAlchemy URL; default `{DEFAULT_DATABASE_URL}`."
    )
    vantage: str | None = Field(None, description="This probing location; default host name.")
    raw_retention_days: int | None = Field(None, ge=1, description="Raw samples kept; default 30.")
    summary_retention_days: int | None = Field(
        None,
        ge=1,
        description="Runs' summaries, digests and rollups kept (never fewer days than raw"
        " samples); default forever.",
    )
    spool_dir: Path = Field(Path("./phasewatch-spool"), description="Runs wait here for the DB.")
    host: str = Field("127.0.0.1", description="Address `serve` binds.")
    port: int = Field(8080, ge=0, le=65535, description="Port `serve` binds.")
    leader_check_s: float = Field(
        5.0,
        gt=0,
        description="Seconds between leadership checks: the leader keeps retention and"
        " silent-vantage checks; another replica takes them over this soon after it dies.",
    )
    max_runs_in_flight: int = Field(
        256,
        ge=0,
        description="Scheduled runs probing at once, at most (0: no bound); past it a due run"
        " waits its turn, late, and one that waits its whole interval is skipped (logged, and"
        ' counted in phasewatch_runs_skipped_total{reason="turn"}).'
        " All share one event loop: when the process cannot keep up (a large fleet's first"
        " runs on a busy machine), unbounded they all slow together past their intervals.",
    )
    replica_lease_s: float = Field(
        15.0,
        ge=1,
        description="Seconds a replica's lease on its share of the targets lasts (PostgreSQL),"
        " renewed every third of it: a replica that dies has its targets taken over within"
        " this. Keep it at most two intervals of the shortest target.",
    )
    api_token: SecretStr | None = Field(
        None, description="Bearer token for API writes; needed to serve beyond loopback."
    )
    whatif_workers: int = Field(
        1,
        ge=1,
        le=32,
        description="Worker processes that compute what-ifs and levers, one each at a time"
        " (off the probes' event loop and out of the server's memory).",
    )
    whatif_queue: int = Field(
        4,
        ge=0,
        le=1000,
        description="What-ifs that may wait for a worker; more at once are refused with 429"
        " and a `Retry-After`.",
    )
    whatif_max_samples: int = Field(
        100_000,
        ge=100,
        le=10_000_000,
        description="Samples a what-if reads at most: the newest whole runs of its window.",
    )
    allowed_hosts: Annotated[list[str] | None, NoDecode] = Field(
        None,
        description="Comma-separated Host names `serve` answers to; default the loopback"
        " names when bound to loopback, else any.",
    )

    @field_validator("allowed_hosts", mode="before")
    @classmethod
    def _host_list(cls, value: Any) -> list[str] | None:
        if isinstance(value, str):
            value = value.split(",")
        if value is None:
            return None
        names = [str(name).strip().lower() for name in value if str(name).strip()]
        wrong = [name for name in names if not _HOST_PATTERN.match(name)]
        if wrong:
            raise ValueError(f"not a host name (no scheme, no port): {', '.join(wrong)}")
        return names or None  # blank: as if unset

    def resolved(self, targets: TargetsFile) -> ResolvedSettings:
        return ResolvedSettings(
            database_url=self.database_url or targets.database_url or DEFAULT_DATABASE_URL,
            vantage=server_vantage(self.vantage, targets.vantage),
            raw_retention_days=self.raw_retention_days or targets.raw_retention_days or 30,
            summary_retention_days=self.summary_retention_days or targets.summary_retention_days,
        )


def server_vantage(setting: str | None, in_file: Any) -> str:
    """This process's vantage: ``PHASEWATCH_VANTAGE``, else the file's ``vantage:``, else
    the host name."""
    return setting or (in_file if isinstance(in_file, str) and in_file else socket.gethostname())


class ResolvedSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    database_url: str
    vantage: str
    raw_retention_days: int
    summary_retention_days: int | None = None  # None: kept forever
