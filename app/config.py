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
from pathlib import Path
from typing import Annotated, Any

import yaml
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
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.alerts.notifiers import KINDS, NotifierConfig
from app.analysis.detectors import DetectorParams
from app.durations import Seconds
from app.probe.redact import CONTROL_CHARACTER_PROBLEM, has_control_character
from app.probe.servertiming import DEFAULT_SERVER_TIMING_MAP, PHASES
from app.probe.spec import DEFAULT_MAX_REDIRECTS, Kind, ProbeSpec, RttMethod

DEFAULT_CONFIG_PATH = Path("phasewatch.yaml")
DEFAULT_DATABASE_URL = "sqlite:///./phasewatch.db"

_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class ConfigError(Exception):
    """The targets file cannot be used; ``problems`` are one line each."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(problems))


class Target(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
    kind: Kind = Kind.HTTP
    url: str = Field(pattern=r"^https?://")
    method: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None
    interval: Seconds = Field(default=900.0, gt=0)
    samples: int = Field(default=20, ge=1, le=10_000)
    spacing: Seconds = 0.0
    jitter: Seconds = 0.0
    deadline_ms: float | None = Field(default=None, gt=0)
    timeout: Seconds = Field(default=60.0, gt=0)
    http2: bool = False
    verify: bool | str = True
    server_timing_map: dict[str, str] = Field(
        default_factory=lambda: dict(DEFAULT_SERVER_TIMING_MAP)
    )
    rtt: RttMethod = RttMethod.TCP
    rtt_url: str | None = None
    # true (up to DEFAULT_MAX_REDIRECTS), false, or how many; kind: http only.
    follow_redirects: bool | Annotated[int, Field(ge=0, le=100)] = True
    alerts: DetectorParams = Field(default_factory=DetectorParams)
    notifiers: list[str] = Field(default_factory=list)

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
        if asked and self.kind is not Kind.HTTP:
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

    vantage: str | None = Field(default=None, min_length=1, max_length=200)
    database_url: str | None = None
    raw_retention_days: int | None = Field(default=None, ge=1)
    # By name; a target lists the ones it uses (none listed: all). See app/alerts/notifiers.
    notifiers: dict[NotifierName, NotifierConfig] = Field(default_factory=dict)
    targets: list[Target] = Field(default_factory=list)

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
    database_url: str | None = Field(None, description="SQLAlchemy URL; default SQLite file.")
    vantage: str | None = Field(None, description="Name of this probing location.")
    raw_retention_days: int | None = Field(None, ge=1, description="Days raw samples are kept.")
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


def load_targets(path: Path, environ: Mapping[str, str] | None = None) -> TargetsFile:
    """Read, expand ``${ENV}`` references in header values, and validate the targets file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(path, [f"{path}: cannot read: {exc.strerror}"]) from exc
    try:
        raw = yaml.safe_load(text) or {}
        lines = _line_index(yaml.compose(text))
    except yaml.YAMLError as exc:
        raise ConfigError(path, [f"{path}: not valid YAML: {_yaml_reason(exc)}"]) from exc
    if not isinstance(raw, dict):
        raise ConfigError(path, [f"{path}: the file must be a mapping with a 'targets' list"])
    environ = os.environ if environ is None else environ
    problems = _expand_headers(raw, environ, path, lines)
    try:
        # Notifier configs expand ``${NAME}`` themselves (URLs, headers, passwords).
        parsed = TargetsFile.model_validate(raw, context={"environ": environ})
    except ValidationError as exc:
        problems += [_describe(path, raw, lines, error) for error in exc.errors()]
    if problems:
        raise ConfigError(path, problems)
    return parsed


def _expand_headers(
    raw: dict[str, Any], environ: Mapping[str, str], path: Path, lines: dict[tuple[Any, ...], int]
) -> list[str]:
    problems: list[str] = []
    for index, target in enumerate(raw.get("targets") or []):
        headers = target.get("headers") if isinstance(target, dict) else None
        if not isinstance(headers, dict):
            continue
        for name, value in headers.items():
            if not isinstance(value, str):
                continue
            loc = ("targets", index, "headers", name)
            for missing in [v for v in _ENV_REFERENCE.findall(value) if v not in environ]:
                reason = f"environment variable {missing} is not set"
                problems.append(_line(path, raw, lines, loc, reason))
            headers[name] = _ENV_REFERENCE.sub(lambda m: environ.get(m.group(1), ""), value)
    return problems


def _describe(
    path: Path, raw: dict[str, Any], lines: dict[tuple[Any, ...], int], error: Any
) -> str:
    loc = tuple(error["loc"])
    if loc[:1] == ("notifiers",) and len(loc) > 2 and loc[2] in KINDS:
        loc = loc[:2] + loc[3:]  # pydantic names the union member: notifiers.x.webhook.url
    reason = error["msg"].removeprefix("Value error, ")
    return _line(path, raw, lines, loc, reason)


def _line(
    path: Path,
    raw: dict[str, Any],
    lines: dict[tuple[Any, ...], int],
    loc: tuple[Any, ...],
    reason: str,
) -> str:
    where = _nearest_line(lines, loc)
    prefix = f"{path}:{where}" if where else str(path)
    return f"{prefix}: {_location(raw, loc)}: {reason}"


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


def _nearest_line(lines: dict[tuple[Any, ...], int], loc: tuple[Any, ...]) -> int | None:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None


def _line_index(node: yaml.Node | None, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], int]:
    """Maps every key path in the YAML document to its 1-based line."""
    if node is None:
        return {}
    found = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            found |= _line_index(value, (*path, key.value))
            found[(*path, key.value)] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            found |= _line_index(item, (*path, index))
    return found


def _yaml_reason(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}: {problem}" if mark is not None else problem
