"""The targets file as models: each target, the notifiers it may use, the file's globals."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from app.analysis.detectors import DetectorParams
from app.analysis.detectors.objectiveparams import tokens_objectives
from app.analysis.maintenance import MaintenanceWindow
from app.config.expect import ExpectConfig, kind_problems
from app.config.vantages import VantageAccess, VantageName
from app.durations import Seconds
from app.envvars import validation_context
from app.notifiers import NotifierConfig
from app.probe.headername import HeaderName
from app.probe.kinds import KINDS as PROBE_KINDS
from app.probe.redact import CONTROL_CHARACTER_PROBLEM, has_control_character
from app.probe.servertiming import DEFAULT_SERVER_TIMING_MAP, PHASES
from app.probe.spec import DEFAULT_MAX_REDIRECTS, Kind, ProbeSpec, RttMethod


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
    propagate: bool = Field(
        False, description="Send a W3C `traceparent` with each request (its sample's span)."
    )
    expect: ExpectConfig | None = Field(
        None, description="What a right answer has; else: `invalid_answer` (below)."
    )
    alerts: DetectorParams = Field(default_factory=DetectorParams, description="Detector settings.")
    notifiers: list[str] = Field(default_factory=list, description="Names; none listed: all.")
    vantages: list[VantageName] | None = Field(
        None, description="Where it is probed (agents, the server's own); none: the server."
    )

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

    @model_validator(mode="after")
    def _token_objectives_need_tokens(self) -> Target:
        if self.kind is not Kind.HTTP:
            return self
        problems = [
            _unknown(
                "objective_needs_tokens",
                "{name}: kind http reads no tokens; use kind openai or anthropic",
                {"name": name},
                ("alerts", "objectives", name),
            )
            for name in tokens_objectives(self.alerts.objectives)
        ]
        _raise(problems, type(self).__name__)
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
            propagate=self.propagate,
            expect=None if self.expect is None else self.expect.spec(self.body),
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
    summary_retention_days: int | None = Field(None, ge=1, description="Default: forever.")
    # By name; a target lists the ones it uses (none listed: all). See app/notifiers.
    notifiers: dict[NotifierName, NotifierConfig] = Field(
        default_factory=dict, description="By name."
    )
    targets: list[Target] = Field(default_factory=list, description="What to probe.")
    vantages: dict[VantageName, VantageAccess] = Field(
        default_factory=dict, description="Agents allowed to report, by vantage name."
    )
    vantage_silent_after: int = Field(
        3,
        ge=2,
        le=1000,
        description="`vantage_silent` fires after no run for this many of a vantage's"
        " shortest interval.",
    )
    maintenance: list[MaintenanceWindow] = Field(
        default_factory=list,
        description="Windows: no notification; runs kept out of references and budgets.",
    )

    @field_validator("targets")
    @classmethod
    def _unique_names(cls, targets: list[Target]) -> list[Target]:
        seen: set[str] = set()
        for target in targets:
            if target.name in seen:
                raise ValueError(f"target name {target.name!r} is used twice")
            seen.add(target.name)
        return targets

    @field_validator("maintenance")
    @classmethod
    def _unique_windows(cls, windows: list[MaintenanceWindow]) -> list[MaintenanceWindow]:
        names = [window.name for window in windows]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"maintenance window name(s) {twice} used twice")
        return windows

    @model_validator(mode="after")
    def _known_notifiers(self) -> TargetsFile:
        defined = ", ".join(self.notifiers) or "none"
        unknown = [
            _unknown(
                "unknown_notifier",
                "no notifier '{name}'; notifiers defined: {defined}",
                {"name": name, "defined": defined},
                ("targets", index, "notifiers", position),
            )
            for index, target in enumerate(self.targets)
            for position, name in enumerate(target.notifiers)
            if name not in self.notifiers
        ]
        _raise(unknown, type(self).__name__)
        return self

    @model_validator(mode="after")
    def _expect_fits_kind(self) -> TargetsFile:
        """Checked here, where a problem can name its target's ``expect.<field>`` line."""
        problems = [
            problem
            for index, target in enumerate(self.targets)
            if target.expect is not None
            for problem in kind_problems(index, target.kind, target.body, target.expect)
        ]
        _raise(problems, type(self).__name__)
        return self

    @model_validator(mode="after")
    def _known_vantages(self, info: ValidationInfo) -> TargetsFile:
        """A target's vantages are agents declared under ``vantages:`` or this server's own
        (``load_targets`` says which that is); any other would never be probed, silently."""
        own = validation_context(info).get("server_vantage")
        if own is None:
            return self
        known = ", ".join([*self.vantages, f"this server's own '{own}'"])
        unknown = [
            _unknown(
                "unknown_vantage",
                "no vantage '{name}' (nothing would probe it there); known: {known}",
                {"name": name, "known": known},
                ("targets", index, "vantages", position),
            )
            for index, target in enumerate(self.targets)
            for position, name in enumerate(target.vantages or [])
            if name not in self.vantages and name != own
        ]
        _raise(unknown, type(self).__name__)
        return self


def _unknown(
    kind: str, template: str, values: dict[str, Any], loc: tuple[str | int, ...]
) -> InitErrorDetails:
    return InitErrorDetails(
        type=PydanticCustomError(kind, template, values), loc=loc, input=values["name"]
    )


def _raise(problems: list[InitErrorDetails], title: str) -> None:
    if problems:
        # Raised with their own locations, so each problem names the target's line.
        raise ValidationError.from_exception_data(title, problems)
