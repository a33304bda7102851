"""Settings from the environment, and the targets file (YAML) with its validation.

Environment variables (``PHASEWATCH_*``) win over the file's global fields: an operator
can move a deployment to another database without editing the targets file. Every error
in the file names the file, the line, the target, the field and the reason.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from app.alerts.notifiers import KINDS, NotifierConfig
from app.analysis.detectors import DetectorParams
from app.durations import Seconds
from app.envvars import UnsetVariable, expand
from app.probe.headername import HeaderName
from app.probe.kinds import KINDS as PROBE_KINDS
from app.probe.redact import CONTROL_CHARACTER_PROBLEM, has_control_character
from app.probe.servertiming import DEFAULT_SERVER_TIMING_MAP, PHASES
from app.probe.spec import DEFAULT_MAX_REDIRECTS, Kind, ProbeSpec, RttMethod
from app.safeyaml import LineIndex, YamlRefused, read_document

DEFAULT_CONFIG_PATH = Path("phasewatch.yaml")
DEFAULT_DATABASE_URL = "sqlite:///./phasewatch.db"

# A Host header's name without its port: '*', '*.example.com', a DNS name, an IPv4 address or
# a bracketed IPv6 one (as browsers send it).
_HOST_PATTERN = re.compile(r"^(\*|(\*\.)?[a-z0-9_.-]+|\[[0-9a-f:.]+\])$")


class ConfigError(Exception):
    """The targets file cannot be used; ``problems`` are one line each."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(problems))


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(
        min_length=1,
        max_length=200,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$",
        description="Unique in the file.",
    )
    kind: Kind = Field(Kind.HTTP, description="How to read the answer: the probe kind.")
    url: str = Field(pattern=r"^https?://", description="What to request.")
    method: str | None = Field(None, description="Default: POST with a body, else GET.")
    headers: dict[HeaderName, str] = Field(
        default_factory=dict, description="`${ENV}` in a value expands."
    )
    body: Any = Field(None, description="JSON body; `{{nonce}}`, `{{i}}` filled in per request.")
    interval: Seconds = Field(default=900.0, gt=0, description="A run every this long.")
    samples: int = Field(default=20, ge=1, le=10_000, description="Requests per run, one by one.")
    spacing: Seconds = Field(0.0, description="Pause between a run's requests.")
    jitter: Seconds = Field(0.0, description="Runs start up to this much late, at random.")
    deadline_ms: float | None = Field(None, gt=0, description="Cut then: a censored miss.")
    cooldown: Seconds | None = Field(None, description="Pause after a sample cut at its deadline.")
    timeout: Seconds = Field(default=60.0, gt=0, description="Hard limit for any request.")
    http2: bool = Field(False, description="Offer HTTP/2.")
    verify: bool | str = Field(True, description="TLS verification, or a CA bundle path.")
    server_timing_map: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_SERVER_TIMING_MAP), description="Metric → phase."
    )
    rtt: RttMethod = Field(RttMethod.TCP, description="Round-trip estimate if no server timing.")
    rtt_url: str | None = Field(None, description="What `rtt: ttfb` requests.")
    follow_redirects: bool | Annotated[int, Field(ge=0, le=100)] = Field(
        True, description=f"`kind: http` only; `true`: up to {DEFAULT_MAX_REDIRECTS}."
    )
    alerts: DetectorParams = Field(default_factory=DetectorParams, description="Detector settings.")
    notifiers: list[str] = Field(default_factory=list, description="Names; none listed: all.")

    @field_validator("headers")
    @classmethod
    def _sendable_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            if has_control_character(value):
                # Never the value itself in the message: it is likely a secret.
                raise ValueError(f"{name}: {CONTROL_CHARACTER_PROBLEM}")
        return headers

    @field_validator("server_timing_map")
    @classmethod
    def _known_phases(cls, mapping: dict[str, str]) -> dict[str, str]:
        unknown = sorted({phase for phase in mapping.values() if phase not in PHASES})
        if unknown:
            raise ValueError(f"maps to {unknown}; phases are {sorted(PHASES)}")
        return {name.lower(): phase for name, phase in mapping.items()}

    @model_validator(mode="after")
    def _spacing_fits(self) -> Target:
        if self.jitter >= self.interval:
            raise ValueError("jitter must be shorter than the interval")
        return self

    @model_validator(mode="after")
    def _redirects_for_http(self) -> Target:
        asked = "follow_redirects" in self.model_fields_set and self.follow_redirects
        if asked and not PROBE_KINDS[self.kind].follows_redirects:
            raise ValueError(
                f"follow_redirects: {self.kind.value} targets do not follow redirects "
                "(a 301, 302 or 303 would turn their POST into a GET); set url to where it points"
            )
        return self

    @property
    def max_redirects(self) -> int:
        if self.follow_redirects is True:
            return DEFAULT_MAX_REDIRECTS
        return int(self.follow_redirects)

    def probe_spec(self) -> ProbeSpec:
        return ProbeSpec(
            url=self.url,
            kind=self.kind,
            method=self.method or ("POST" if self.body is not None else "GET"),
            headers=self.headers,
            body=self.body,
            deadline_ms=self.deadline_ms,
            timeout_s=self.timeout,
            http2=self.http2,
            verify=self.verify,
            server_timing_map=self.server_timing_map,
            rtt_method=self.rtt,
            rtt_url=self.rtt_url,
            max_redirects=self.max_redirects,
            cooldown_s=self.cooldown,
        )

    def public(self) -> dict[str, Any]:
        """The target as it may be shown or stored: header values never leave the process."""
        shown = self.model_dump(mode="json")
        shown["headers"] = dict.fromkeys(self.headers, "<redacted>")
        return shown


NotifierName = Annotated[
    str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
]


class TargetsFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    vantage: str | None = Field(
        None, min_length=1, max_length=200, description="Default: host name."
    )
    database_url: str | None = Field(None, description="SQLAlchemy URL.")
    raw_retention_days: int | None = Field(None, ge=1, description="Default 30.")
    # By name; a target lists the ones it uses (none listed: all). See app/alerts/notifiers.
    notifiers: dict[NotifierName, NotifierConfig] = Field(
        default_factory=dict, description="By name."
    )
    targets: list[Target] = Field(default_factory=list, description="What to probe.")

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, targets: list[Target]) -> list[Target]:
        seen: set[str] = set()
        for target in targets:
            if target.name in seen:
                raise ValueError(f"target name {target.name!r} is used twice")
            seen.add(target.name)
        return targets

    @model_validator(mode="after")
    def _known_notifiers(self) -> TargetsFile:
        defined = ", ".join(self.notifiers) or "none"
        unknown = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "unknown_notifier",
                    "no notifier '{name}'; notifiers defined: {defined}",
                    {"name": name, "defined": defined},
                ),
                loc=("targets", index, "notifiers", position),
                input=name,
            )
            for index, target in enumerate(self.targets)
            for position, name in enumerate(target.notifiers)
            if name not in self.notifiers
        ]
        if unknown:
            # Raised with its own locations, so each problem names the target's line.
            raise ValidationError.from_exception_data(type(self).__name__, unknown)
        return self


class Settings(BaseSettings):
    """Process settings: ``PHASEWATCH_<NAME>`` in the environment, then the targets file."""

    model_config = SettingsConfigDict(env_prefix="PHASEWATCH_", extra="ignore")

    config: Path = Field(DEFAULT_CONFIG_PATH, description="Path of the targets file.")
    database_url: str | None = Field(
        None, description=f"SQLAlchemy URL; default `{DEFAULT_DATABASE_URL}`."
    )
    vantage: str | None = Field(None, description="This probing location; default host name.")
    raw_retention_days: int | None = Field(None, ge=1, description="Raw samples kept; default 30.")
    spool_dir: Path = Field(Path("./phasewatch-spool"), description="Runs wait here for the DB.")
    host: str = Field("127.0.0.1", description="Address `serve` binds.")
    port: int = Field(8080, ge=0, le=65535, description="Port `serve` binds.")
    leader_check_s: float = Field(
        5.0,
        gt=0,
        description="Seconds between leadership checks: a replica takes over this soon after"
        " the leader dies.",
    )
    api_token: SecretStr | None = Field(
        None, description="Bearer token for API writes; needed to serve beyond loopback."
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
            vantage=self.vantage or targets.vantage or socket.gethostname(),
            raw_retention_days=self.raw_retention_days or targets.raw_retention_days or 30,
        )


class ResolvedSettings(BaseModel):
    model_config = ConfigDict(frozen=True)

    database_url: str
    vantage: str
    raw_retention_days: int


def load_targets(
    path: Path, environ: Mapping[str, str] | None = None, *, require_env: bool = True
) -> TargetsFile:
    """Read, expand ``${ENV}`` references in header values, and validate the targets file.

    ``require_env=False`` is for commands that never send a request or a notification
    (backtest, export): a variable that is not set is no problem, its ``${NAME}`` stays.
    """
    try:
        raw, lines = read_document(path)
    except OSError as exc:
        raise ConfigError(path, [f"{path}: cannot read: {exc.strerror}"]) from exc
    except YamlRefused as exc:
        raise ConfigError(path, [str(exc)]) from exc
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(path, [f"{path}: the file must be a mapping with a 'targets' list"])
    environ = os.environ if environ is None else environ
    where = _Where(path, raw, lines)
    problems = _expand_headers(raw, environ, not require_env, where)
    try:
        # Notifier configs expand ``${NAME}`` themselves (URLs, headers, passwords).
        context = {"environ": environ, "keep_unset": not require_env}
        parsed = TargetsFile.model_validate(raw, context=context)
    except ValidationError as exc:
        problems += [_describe(where, error) for error in exc.errors()]
    if problems:
        raise ConfigError(path, problems)
    return parsed


def _expand_headers(
    raw: dict[str, Any], environ: Mapping[str, str], keep_unset: bool, where: _Where
) -> list[str]:
    problems: list[str] = []
    for index, target in enumerate(raw.get("targets") or []):
        headers = target.get("headers") if isinstance(target, dict) else None
        if not isinstance(headers, dict):
            continue
        for name, value in headers.items():
            if not isinstance(value, str):
                continue
            try:
                headers[name] = expand(value, environ, keep_unset=keep_unset)
            except UnsetVariable as exc:
                problems.append(where.line(("targets", index, "headers", name), str(exc)))
    return problems


def _describe(where: _Where, error: Any) -> str:
    loc = tuple(error["loc"])
    if loc[:1] == ("notifiers",) and len(loc) > 2 and loc[2] in KINDS:
        loc = loc[:2] + loc[3:]  # pydantic names the union member: notifiers.x.webhook.url
    if loc[-1:] == ("[key]",):
        loc = loc[:-1]  # a dict's key was refused: headers.<name> says which
    reason = error["msg"].removeprefix("Value error, ")
    return where.line(loc, reason)


@dataclass(frozen=True)
class _Where:
    """What a problem's line is told from: the file, its data and its line index."""

    path: Path
    raw: dict[str, Any]
    lines: LineIndex

    def line(self, loc: tuple[Any, ...], reason: str) -> str:
        where = _nearest_line(self.lines, loc)
        prefix = f"{self.path}:{where}" if where else str(self.path)
        return f"{prefix}: {_location(self.raw, loc)}: {reason}"


def _location(raw: dict[str, Any], loc: tuple[Any, ...]) -> str:
    """``targets[translate-prod].deadline_ms``: targets by name, where they have one."""
    if len(loc) >= 2 and loc[0] == "targets" and isinstance(loc[1], int):
        targets = raw.get("targets") or []
        entry = targets[loc[1]] if loc[1] < len(targets) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"targets[{name}]" if isinstance(name, str) else f"targets[{loc[1]}]"
        rest = ".".join(str(part) for part in loc[2:])
        return f"{label}.{rest}" if rest else label
    return ".".join(str(part) for part in loc) or "(top level)"


def _nearest_line(lines: LineIndex, loc: tuple[Any, ...]) -> int | None:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None
