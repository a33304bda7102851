"""What every notifier shares: the delivery it is handed, its error, its config pieces.

A notifier is one small module per kind: a pydantic config (``type: <kind>``) and a
``Notifier`` subclass that overrides only ``notify``. ``notify`` either returns (the
notification was accepted) or raises ``TransportError``::

    TransportError(message, permanent=False)   retried with backoff (5xx, timeout, refused)
    TransportError(message, permanent=True)    failed at once (4xx: retrying cannot help)

Messages never carry secrets: URLs are shown as ``scheme://host:port`` and every secret
value of the config is scrubbed from what a receiver answered (see ``http.py``).

Delivery is at least once (see ``sender.py``), so every request carries
``Delivery.idempotency_key``, one per (alert transition, notifier) and the same on every
attempt, in the ``Idempotency-Key`` header and in the body where the format has room: a
receiver that keeps the keys it has seen drops a repeat.
"""

from __future__ import annotations

import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Generic, TypeVar, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
)

from app.envvars import expand_field, has_reference, validation_context

RESOLVED_STATES = frozenset({"resolved", "inactive"})
_IDENTITY_KEYS = ("target", "scope", "severity", "vantage", "from_phase", "to_phase")
IDEMPOTENCY_HEADER = "Idempotency-Key"
# Fixed for good: changing it would change every key, and receivers would see repeats as new.
_KEY_NAMESPACE = uuid.UUID("b8e4c1be-2769-44b0-8d80-107f6787ab20")


class TransportError(Exception):
    """A notification was not delivered; ``permanent`` says whether trying again can help."""

    def __init__(self, message: str, permanent: bool = False, retry_after: float | None = None):
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.retry_after = retry_after


# --- Config pieces ----------------------------------------------------------------------


def _http_url(value: SecretStr, info: ValidationInfo) -> SecretStr:
    # The reasons never quote the value: a URL from the environment may hold a token.
    url = value.get_secret_value()
    if has_reference(url) and validation_context(info).get("keep_unset", False):
        return value  # left as ${NAME} for a command that never sends (envvars.expand)
    if not re.match(r"^https?://[^/\s]+", url):
        raise ValueError("must be an http:// or https:// URL")
    if not _valid_port(url):
        raise ValueError("has a port that is not a number from 1 to 65535")
    return value


def _valid_port(url: str) -> bool:
    try:
        return urlsplit(url).port != 0
    except ValueError:
        return False


# A secret from the file or the environment: repr, str and dumps show "**********".
Secret = Annotated[SecretStr, BeforeValidator(expand_field)]
SecretUrl = Annotated[SecretStr, BeforeValidator(expand_field), AfterValidator(_http_url)]


class BasicAuth(BaseModel):
    # Errors never echo what was given: it may be a secret.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    username: Annotated[str, BeforeValidator(expand_field)] = Field(description="`${ENV}` expands.")
    password: Secret = Field(description="`${ENV}` expands.")


# --- The delivery -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """One outbox row as a notifier sees it.

    ``payload`` is ``Transition.to_json()`` plus ``labels`` and, while firing, ``ends_at``.
    ``fired_at`` comes from the alert's row: a refresh or a resolution happens later
    than the firing, but Alertmanager wants to hear when it started.
    """

    id: int
    notifier: str
    payload: dict[str, Any]
    fired_at: datetime | None = None
    transition_id: int | None = None  # None for a refresh, which is no transition

    @property
    def idempotency_key(self) -> str:
        """The same for every attempt at this (alert transition, notifier), different for
        any other; a UUID, since alert ids are: keys of two installations never meet."""
        event = (
            f"row/{self.id}" if self.transition_id is None else f"transition/{self.transition_id}"
        )
        name = f"{self.payload.get('alert_id', '')}/{event}/{self.notifier}"
        return str(uuid.uuid5(_KEY_NAMESPACE, name))

    @property
    def alert_key(self) -> str:
        """The same for every transition of one alert at this notifier (made as
        ``idempotency_key`` is): for a receiver that opens an incident on the firing and
        closes that same incident on the resolution (PagerDuty's ``dedup_key``)."""
        name = f"{self.payload.get('alert_id', '')}/alert/{self.notifier}"
        return str(uuid.uuid5(_KEY_NAMESPACE, name))

    @property
    def state(self) -> str:
        return str(self.payload["state"])

    @property
    def resolved(self) -> bool:
        return self.state in RESOLVED_STATES

    @property
    def status(self) -> str:
        """Alertmanager's word: ``firing`` (also while recovering) or ``resolved``."""
        return "resolved" if self.resolved else "firing"

    @property
    def refresh(self) -> bool:
        return self.state == "firing" and self.payload.get("previous") == "firing"

    @property
    def at(self) -> datetime:
        return parse_time(self.payload["at"])

    @property
    def starts_at(self) -> datetime:
        return min(self.fired_at or self.at, self.at)

    @property
    def ends_at(self) -> datetime | None:
        """When a resolved alert ended; while firing, until when it holds unless refreshed."""
        if self.resolved:
            return self.at
        ends = self.payload.get("ends_at")
        return parse_time(ends) if ends else None

    @property
    def labels(self) -> dict[str, str]:
        """The stable identity labels: strings only, never numbers."""
        given = self.payload.get("labels")
        if not isinstance(given, dict):
            given = {"alertname": self.payload.get("alert")} | {
                key: self.payload.get(key) for key in _IDENTITY_KEYS
            }
        return {str(k): v for k, v in sorted(given.items()) if isinstance(v, str) and v}

    @property
    def summary(self) -> str:
        return str(self.payload.get("summary") or self.labels.get("alertname", "alert"))

    @property
    def numbers(self) -> dict[str, Any]:
        numbers = self.payload.get("numbers")
        return numbers if isinstance(numbers, dict) else {}

    @property
    def description(self) -> str:
        """The numbers as text, one ``name=value`` per number, in name order."""
        return ", ".join(f"{name}={number_text(v)}" for name, v in sorted(self.numbers.items()))

    @property
    def annotations(self) -> dict[str, str]:
        annotations = {"summary": self.summary, "description": self.description}
        return {name: text for name, text in annotations.items() if text}


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in sorted((s for s in secrets if len(s) > 3), key=len, reverse=True):
        text = text.replace(secret, "<redacted>")
    return text


def _secret_values(value: Any) -> Iterable[str]:
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _secret_values(getattr(value, name))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secret_values(item)


def number_text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_time(value: Any) -> datetime:
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def rfc3339(moment: datetime) -> str:
    """To the millisecond, trailing zeros cut, as Alertmanager (Go's RFC3339Nano) writes it."""
    whole, _, fraction = moment.astimezone(UTC).isoformat(timespec="milliseconds").partition(".")
    fraction = fraction.removesuffix("+00:00").rstrip("0")
    return f"{whole}.{fraction}Z" if fraction else f"{whole}Z"


def fingerprint(labels: Mapping[str, str]) -> str:
    """Alertmanager's fingerprint of a label set (FNV-1a 64 over sorted name, value pairs)."""
    digest = 0xCBF29CE484222325
    for name in sorted(labels):
        for part in (name, labels[name]):
            for byte in part.encode() + b"\xff":
                digest = ((digest ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{digest:016x}"


# --- The base class ---------------------------------------------------------------------

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class Notifier(ABC, Generic[ConfigT]):
    """One configured notifier: ``name`` is its key under ``notifiers:`` in the targets file."""

    # Whether it wants still-firing alerts re-announced (Alertmanager forgets alerts whose
    # ``endsAt`` passes); chat notifiers do not, or they would repeat every interval.
    refreshes: ClassVar[bool] = False
    # The pydantic model of its config: the ``ConfigT`` it is declared with.
    config_model: ClassVar[type[BaseModel]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            if get_origin(base) is Notifier:
                (cls.config_model,) = get_args(base)

    def __init__(self, name: str, config: ConfigT) -> None:
        self.name = name
        self.config = config

    @abstractmethod
    async def notify(self, delivery: Delivery) -> None:
        """Deliver, or raise ``TransportError``."""

    def secrets(self) -> list[str]:
        """Every secret value of the config, for scrubbing what errors say."""
        return list(_secret_values(self.config))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
