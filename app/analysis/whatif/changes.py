"""The what-if change language: ``network=15ms``, ``generation*1.5``, ``queue=0``,
``generation=@other-target[/vantage]``, ``cold=12%:800-2500ms``, ``deadline=1500ms``.

The same changes arrive as JSON from the API (``changes_from_json``); both ways run the same
checks and fail with ``ChangeError``, which names the offending token.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.probe.sample import HTTP_PHASES, LLM_PHASES

KNOWN_PHASES = tuple(dict.fromkeys((*LLM_PHASES, *HTTP_PHASES)))
# Where a cold start's time lands: the sim and real servers load the model before the first
# token, which the probe sees as queue (server on a plain HTTP endpoint).
COLD_PHASES = ("queue", "server")
# What a change may say: no time past a day (no request a probe times waits longer, and a
# 1e300 would only give answers too large to mean anything), no factor past a thousand.
MAX_MS = 86_400_000.0
MAX_FACTOR = 1000.0

_NUMBER = r"\d+(?:\.\d+)?"
_DURATION = re.compile(rf"^({_NUMBER})(ms|s)?$")
_SCALE = re.compile(rf"^([a-z_]+)\*({_NUMBER})$")
_ASSIGN = re.compile(r"^([a-z_]+)=(.+)$")
_COLD = re.compile(rf"^({_NUMBER})%:({_NUMBER})(ms|s)?(?:-({_NUMBER})(ms|s)?)?$")
_UNIT_MS = {"ms": 1.0, "s": 1000.0}


class ChangeError(ValueError):
    """A change that cannot be read or applied; ``token`` is the change as written."""

    def __init__(self, token: str, reason: str) -> None:
        super().__init__(f"{token!r}: {reason}")
        self.token = token
        self.reason = reason

    def __reduce__(self) -> tuple[type[ChangeError], tuple[str, str]]:
        return ChangeError, (self.token, self.reason)  # whole across a worker's pipe


@dataclass(frozen=True)
class SetPhase:
    """Every sample's ``phase`` takes ``ms`` (0 removes the phase)."""

    phase: str
    ms: float

    def token(self) -> str:
        return f"{self.phase}={_ms_text(self.ms)}"


@dataclass(frozen=True)
class ScalePhase:
    phase: str
    factor: float

    def token(self) -> str:
        return f"{self.phase}*{self.factor:g}"


@dataclass(frozen=True)
class TakePhase:
    """``phase`` drawn from another target's (or vantage's) measured distribution of it."""

    phase: str
    target: str
    vantage: str | None = None

    @property
    def source(self) -> str:
        """The key of the donor ``SampleSet`` the caller supplies."""
        return self.target if self.vantage is None else f"{self.target}/{self.vantage}"

    def token(self) -> str:
        return f"{self.phase}=@{self.source}"


@dataclass(frozen=True)
class ColdStarts:
    """That share of requests meets a cold server: ``min_ms``–``max_ms`` more, uniform."""

    fraction: float
    min_ms: float
    max_ms: float

    def token(self) -> str:
        span = _ms_text(self.min_ms)
        if self.max_ms != self.min_ms:
            span = f"{self.min_ms:g}-{_ms_text(self.max_ms)}"
        return f"cold={self.fraction * 100:g}%:{span}"


@dataclass(frozen=True)
class Deadline:
    """The client gives up after ``ms``: a later answer is a miss, counted at the deadline."""

    ms: float

    def token(self) -> str:
        return f"deadline={_ms_text(self.ms)}"


Change = SetPhase | ScalePhase | TakePhase | ColdStarts | Deadline
PhaseChange = SetPhase | ScalePhase | TakePhase


def parse_changes(tokens: Sequence[str]) -> list[Change]:
    """Each token one change, in order; phase changes apply in the order written."""
    changes = [parse_change(token) for token in tokens]
    return check_changes(changes, [str(token) for token in tokens])


def parse_change(token: str) -> Change:
    text = token.strip()
    if (scale := _SCALE.match(text)) is not None:
        factor = _at_most(token, float(scale.group(2)), MAX_FACTOR, "the factor")
        return ScalePhase(_phase(token, scale.group(1)), factor)
    assign = _ASSIGN.match(text)
    if assign is None:
        raise ChangeError(token, "expected PHASE=VALUE, PHASE*FACTOR, cold=… or deadline=…")
    name, value = assign.groups()
    if name == "deadline":
        return Deadline(_positive(token, _duration(token, value)))
    if name == "cold":
        return _cold(token, value)
    phase = _phase(token, name)
    if value.startswith("@"):
        return _take(token, phase, value[1:])
    return SetPhase(phase, _duration(token, value))


def check_changes(changes: list[Change], tokens: Sequence[str]) -> list[Change]:
    """At most one deadline and one cold-start mixture."""
    for kind, what in ((Deadline, "deadline"), (ColdStarts, "cold-start mixture")):
        seen = [
            token for change, token in zip(changes, tokens, strict=True) if type(change) is kind
        ]
        if len(seen) > 1:
            raise ChangeError(seen[1], f"a second {what}; give one")
    return changes


def changes_from_json(items: Sequence[Mapping[str, Any]]) -> list[Change]:
    """The API's shape; see ``changes_to_json``."""
    if not isinstance(items, Sequence) or isinstance(items, str | bytes):
        raise ChangeError(json.dumps(items, default=str), "changes must be a list of objects")
    changes = [_from_json(item) for item in items]
    return check_changes(changes, [_json_token(item) for item in items])


def changes_to_json(changes: Sequence[Change]) -> list[dict[str, Any]]:
    return [_to_json(change) for change in changes]


def _to_json(change: Change) -> dict[str, Any]:
    match change:
        case SetPhase(phase, ms):
            return {"phase": phase, "set_ms": ms}
        case ScalePhase(phase, factor):
            return {"phase": phase, "scale": factor}
        case TakePhase(phase, target, vantage):
            return {"phase": phase, "from": target, "vantage": vantage}
        case ColdStarts(fraction, low, high):
            return {"cold": {"fraction": fraction, "min_ms": low, "max_ms": high}}
        case Deadline(ms):
            return {"deadline_ms": ms}


def _from_json(item: Any) -> Change:
    token = _json_token(item)
    if not isinstance(item, Mapping):
        raise ChangeError(token, "a change is a JSON object")
    keys = set(item)
    if keys == {"deadline_ms"}:
        return Deadline(_positive(token, _json_ms(token, item, "deadline_ms")))
    if keys == {"cold"}:
        return _cold_json(token, item["cold"])
    if "phase" not in keys or not isinstance(item["phase"], str):
        raise ChangeError(token, "needs 'phase' (a string), or is {'cold': …} / {'deadline_ms': …}")
    return _phase_json(token, _phase(token, item["phase"]), keys - {"phase"}, item)


def _phase_json(token: str, phase: str, keys: set[str], item: Mapping[str, Any]) -> Change:
    if keys == {"set_ms"}:
        return SetPhase(phase, _non_negative(token, _json_ms(token, item, "set_ms")))
    if keys == {"scale"}:
        factor = _json_number(token, item["scale"], "scale")
        return ScalePhase(
            phase, _at_most(token, _non_negative(token, factor), MAX_FACTOR, "'scale'")
        )
    if keys in ({"from"}, {"from", "vantage"}):
        target, vantage = item["from"], item.get("vantage")
        if not isinstance(target, str) or not target:
            raise ChangeError(token, "'from' must name a target")
        if vantage is not None and (not isinstance(vantage, str) or not vantage):
            raise ChangeError(token, "'vantage' must be a name or null")
        return TakePhase(phase, target, vantage)
    raise ChangeError(token, "give exactly one of 'set_ms', 'scale' or 'from' with 'phase'")


def _cold_json(token: str, cold: Any) -> ColdStarts:
    if not isinstance(cold, Mapping) or set(cold) != {"fraction", "min_ms", "max_ms"}:
        raise ChangeError(token, "'cold' needs 'fraction', 'min_ms' and 'max_ms'")
    fraction = _json_number(token, cold["fraction"], "fraction")
    low, high = (_json_ms(token, cold, key) for key in ("min_ms", "max_ms"))
    return _cold_checked(token, fraction, low, high)


def _json_token(item: Any) -> str:
    return json.dumps(item, default=str, separators=(",", ":"))


def _json_number(token: str, value: Any, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ChangeError(token, f"'{key}': {value!r} is not a number")
    return float(value)


def _json_ms(token: str, item: Mapping[str, Any], key: str) -> float:
    return _at_most(token, _json_number(token, item[key], key), MAX_MS, f"'{key}'")


def _phase(token: str, name: str) -> str:
    if name not in KNOWN_PHASES:
        raise ChangeError(token, f"no phase {name!r}; phases: {', '.join(KNOWN_PHASES)}")
    return name


def _take(token: str, phase: str, source: str) -> TakePhase:
    # A target name may hold '/', so the vantage is what follows the last one.
    target, slash, vantage = source.rpartition("/")
    if not slash:
        target, vantage = source, ""
    if not target or (slash and not vantage) or any(c.isspace() for c in source):
        raise ChangeError(token, "'@' must be followed by TARGET or TARGET/VANTAGE")
    return TakePhase(phase, target, vantage or None)


def _cold(token: str, value: str) -> ColdStarts:
    match = _COLD.match(value)
    if match is None:
        raise ChangeError(token, "a cold-start mixture is PERCENT%:MIN-MAXms, e.g. 12%:800-2500ms")
    percent, low, low_unit, high, high_unit = match.groups()
    unit = high_unit or low_unit
    if unit is None:
        raise ChangeError(token, "the cold start's time needs a unit (ms or s)")
    low_ms = float(low) * _UNIT_MS[low_unit or unit]
    high_ms = low_ms if high is None else float(high) * _UNIT_MS[unit]
    return _cold_checked(token, float(percent) / 100, low_ms, high_ms)


def _cold_checked(token: str, fraction: float, low: float, high: float) -> ColdStarts:
    if not 0 < fraction <= 1:
        raise ChangeError(token, "the cold share must be above 0 and at most 100%")
    if low < 0 or high < low:
        raise ChangeError(token, "the cold start's range must run from a minimum up to a maximum")
    return ColdStarts(fraction, low, _at_most(token, high, MAX_MS, "the cold start's maximum"))


def _duration(token: str, value: str) -> float:
    match = _DURATION.match(value)
    if match is None:
        raise ChangeError(token, f"{value!r} is not a duration like 15ms or 1.5s")
    number, unit = float(match.group(1)), match.group(2)
    if unit is None and number != 0:
        raise ChangeError(token, f"{value!r} needs a unit: {value}ms or {value}s")
    return _at_most(token, number * _UNIT_MS[unit or "ms"], MAX_MS, f"{value!r}")


def _at_most(token: str, value: float, high: float, what: str) -> float:
    if value > high:
        unit = " ms (a day)" if high == MAX_MS else ""
        raise ChangeError(token, f"{what} must be at most {high:,.0f}{unit}; it is {value:g}")
    return value


def _positive(token: str, value: float) -> float:
    if value <= 0:
        raise ChangeError(token, "the deadline must be above 0")
    return value


def _non_negative(token: str, value: float) -> float:
    if value < 0:
        raise ChangeError(token, "must not be negative")
    return value


def _ms_text(ms: float) -> str:
    return "0" if ms == 0 else f"{ms:g}ms"
