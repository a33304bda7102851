"""What is wrong with a targets file, one line each: the file, the line, the target, the
field and the reason (never a value: it may be a secret)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.config.safeyaml import LineIndex
from app.notifiers import KINDS


class ConfigError(Exception):
    """The targets file cannot be used; ``problems`` are one line each."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(problems))


def describe(where: Where, error: Any) -> str:
    loc = tuple(error["loc"])
    if loc[:1] == ("notifiers",) and len(loc) > 2 and loc[2] in KINDS:
        loc = loc[:2] + loc[3:]  # pydantic names the union member: notifiers.x.webhook.url
    if loc[-1:] == ("[key]",):
        loc = loc[:-1]  # a dict's key was refused: headers.<name> says which
    reason = error["msg"].removeprefix("Value error, ")
    return where.line(loc, reason)


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
