"""Silences: notifications of alerts whose labels match every matcher are held while
``starts_at <= now < ends_at``. The deliveries are still written, as ``silenced``, so the
audit trail shows what was held back.

A matcher compares one label, exactly or by a regular expression that must match the
whole value, and may be negated (``!=``, ``!~``), as Alertmanager's do; a label the alert
does not have is the empty string. As in Alertmanager, a silence needs at least one matcher
that the empty string does not satisfy: ``vantage!="eu"`` alone would hold every alert of
every target but those at ``eu``, the alerts without a vantage included.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.store import silencerows
from app.store.db import Session
from app.store.silencerows import SilenceRecord


class SilenceNotFound(LookupError):
    """No silence has this id."""


# (regex, equal) → how Alertmanager writes the matcher.
_OPERATORS = {(False, True): "=", (False, False): "!=", (True, True): "=~", (True, False): "!~"}


@dataclass(frozen=True, slots=True)
class Matcher:
    name: str
    value: str
    regex: bool = False
    equal: bool = True  # False: the label must not match

    @classmethod
    def parse(cls, raw: Matcher | Mapping[str, Any]) -> Matcher:
        """A matcher from its JSON form; ``ValueError`` says what is wrong with it."""
        if isinstance(raw, Matcher):
            raw = raw.to_json()
        name, value, regex = raw.get("name"), raw.get("value"), raw.get("regex", False)
        equal = raw.get("equal", True)
        if not isinstance(name, str) or not name:
            raise ValueError(f"a matcher needs a label name, got {name!r}")
        if not isinstance(value, str):
            raise ValueError(f"matcher {name}: the value must be a string, got {value!r}")
        if not isinstance(regex, bool):
            raise ValueError(f"matcher {name}: 'regex' must be true or false, got {regex!r}")
        if not isinstance(equal, bool):
            raise ValueError(f"matcher {name}: 'equal' must be true or false, got {equal!r}")
        if regex:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"matcher {name}: {value!r} is not a valid regex: {exc}") from exc
        return cls(name, value, regex, equal)

    def matches(self, labels: Mapping[str, str]) -> bool:
        found = labels.get(self.name, "")
        if self.regex:
            same = re.fullmatch(self.value, found) is not None
        else:
            same = found == self.value
        return same == self.equal

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "regex": self.regex, "equal": self.equal}

    def __str__(self) -> str:
        return f"{self.name}{_OPERATORS[self.regex, self.equal]}{self.value!r}"


@dataclass(frozen=True, slots=True)
class Silence:
    matchers: tuple[Matcher, ...]
    starts_at: datetime
    ends_at: datetime

    @classmethod
    def of(cls, row: SilenceRecord) -> Silence:
        return cls(matchers_of(row), row.starts_at, row.ends_at)

    def active(self, now: datetime) -> bool:
        return self.starts_at <= now < self.ends_at

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(matcher.matches(labels) for matcher in self.matchers)


def matchers_of(row: SilenceRecord) -> tuple[Matcher, ...]:
    return tuple(Matcher.parse(raw) for raw in row.matchers.get("matchers", []))


def validate(
    matchers: Iterable[Matcher | Mapping[str, Any]], starts_at: datetime, ends_at: datetime
) -> tuple[Matcher, ...]:
    parsed = tuple(Matcher.parse(raw) for raw in matchers)
    if not parsed:
        raise ValueError("a silence needs at least one matcher")
    if all(matcher.matches({}) for matcher in parsed):
        said = ", ".join(str(matcher) for matcher in parsed)
        raise ValueError(
            f"{said}: at least one matcher must not match an empty label, or the silence"
            " would hold every alert without that label"
        )
    if ends_at <= starts_at:
        raise ValueError(f"a silence must end after it starts ({ends_at} <= {starts_at})")
    return parsed


# Storage (app.store.silencerows) ----------------------------------------------------------


def add_silence(
    session: Session,
    matchers: Iterable[Matcher | Mapping[str, Any]],
    starts_at: datetime,
    ends_at: datetime,
    created_by: str,
    comment: str,
    now: datetime,
) -> SilenceRecord:
    parsed = validate(matchers, starts_at, ends_at)
    document = {"matchers": [matcher.to_json() for matcher in parsed]}
    silence = SilenceRecord(uuid.uuid4(), document, starts_at, ends_at, created_by, comment, now)
    return silencerows.insert_silence(session, silence)


def active_silences(session: Session, now: datetime) -> list[Silence]:
    return [Silence.of(record) for record in silencerows.silences_in_effect(session, now)]


def silence_rows(session: Session, now: datetime, active_only: bool) -> list[SilenceRecord]:
    """Silences, soonest to end first; ``active_only``: those in effect at ``now``."""
    return silencerows.all_silences(session, now, active_only)


def silence_row(session: Session, silence_id: uuid.UUID) -> SilenceRecord | None:
    return silencerows.silence_by_id(session, silence_id)


def expire(session: Session, silence_id: uuid.UUID | str, now: datetime) -> SilenceRecord:
    """End a silence now; one that already ended stays as it was."""
    found = silencerows.end_silence(session, _uuid(silence_id, SilenceNotFound), now)
    if found is None:
        raise SilenceNotFound(f"no silence {silence_id}")
    return found


def _uuid(value: uuid.UUID | str, missing: type[Exception]) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(value)
    except ValueError:
        raise missing(f"no such id: {value!r}") from None
