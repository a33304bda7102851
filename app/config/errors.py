"""What is wrong with a targets file, one line each: the file, the line, the target, the
field and the reason (never a value: it may be a secret)."""

from __future__ import annotations

import difflib
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel

from app.config.safeyaml import LineIndex
from app.notifiers import KINDS


class ConfigError(Exception):
    """The targets file cannot be used; ``problems`` are one line each."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(problems))


# Pydantic's words where a reader of a targets file wants the rule in theirs.
PATTERN_REASONS = {r"^https?://": "must start with http:// or https://"}


def describe(where: Where, error: Any, model: type[BaseModel]) -> str:
    loc = tuple(error["loc"])
    if loc[:1] == ("notifiers",) and len(loc) > 2 and loc[2] in KINDS:
        loc = loc[:2] + loc[3:]  # pydantic names the union member: notifiers.x.webhook.url
    if loc[-1:] == ("[key]",):
        loc = loc[:-1]  # a dict's key was refused: headers.<name> says which
    return where.line(loc, _reason(error, loc, model))


def _reason(error: Any, loc: tuple[Any, ...], model: type[BaseModel]) -> str:
    if error["type"] == "extra_forbidden":
        known = fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), sorted(known), n=1)
        return f"unknown field; did you mean '{close[0]}'?" if close else "unknown field"
    if error["type"] == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern")
        if pattern in PATTERN_REASONS:
            return PATTERN_REASONS[pattern]
    return str(error["msg"]).removeprefix("Value error, ")


def fields_at(model: Any, path: tuple[Any, ...]) -> set[str]:
    """The fields a mapping at ``path`` of ``model``'s data may hold (every union member's)."""
    kinds = [model]
    for part in path:
        kinds = [inner for kind in kinds for inner in _inside(kind, part)]
    return {name for kind in kinds for name in _fields(kind)}


def _members(kind: Any) -> list[Any]:
    """``kind`` with Annotated, Optional and unions taken apart."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _members(get_args(kind)[0])
    if origin is Union or origin is types.UnionType:
        return [member for arg in get_args(kind) for member in _members(arg)]
    return [kind]


def _inside(kind: Any, part: Any) -> list[Any]:
    found: list[Any] = []
    for member in _members(kind):
        origin, args = get_origin(member), get_args(member)
        if (
            isinstance(member, type)
            and issubclass(member, BaseModel)
            and part in member.model_fields
        ):
            found.append(member.model_fields[part].annotation)
        elif origin is list and args and isinstance(part, int):
            found.append(args[0])
        elif origin is dict and len(args) == 2:
            found.append(args[1])
    return found


def _fields(kind: Any) -> list[str]:
    return [name for member in _members(kind) if _is_model(member) for name in member.model_fields]


def _is_model(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel)


@dataclass(frozen=True)
class Where:
    """What a problem's line is told from: the file, its data and its line index."""

    path: Path
    raw: dict[str, Any]
    lines: LineIndex

    def line(self, loc: tuple[Any, ...], reason: str) -> str:
        where = _nearest_line(self.lines, loc)
        prefix = f"{self.path}:{where}" if where else str(self.path)
        return f"{prefix}: {_location(self.raw, loc)}: {reason}"


def _location(raw: dict[str, Any], loc: tuple[Any, ...]) -> str:
    """``targets[translate-prod].deadline_ms``: targets (and maintenance windows) by name,
    where they have one."""
    if len(loc) >= 2 and loc[0] in ("targets", "maintenance") and isinstance(loc[1], int):
        entries = raw.get(loc[0]) or []
        entry = entries[loc[1]] if isinstance(entries, list) and loc[1] < len(entries) else None
        name = entry.get("name") if isinstance(entry, dict) else None
        label = f"{loc[0]}[{name}]" if isinstance(name, str) else f"{loc[0]}[{loc[1]}]"
        rest = ".".join(str(part) for part in loc[2:])
        return f"{label}.{rest}" if rest else label
    return ".".join(str(part) for part in loc) or "(top level)"


def _nearest_line(lines: LineIndex, loc: tuple[Any, ...]) -> int | None:
    for cut in range(len(loc), -1, -1):
        if loc[:cut] in lines:
            return lines[loc[:cut]]
    return None
