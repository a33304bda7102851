"""Is a fast answer a right one? A target's ``expect:`` checks, judged on what an answer said.

Pure: an ``Expect`` and an ``AnswerSaid`` (``app.probe.answers`` reads one from the body
after the request is over) in, the reasons it fails out (none: it passes). A sample whose
answer fails is ``invalid_answer``: a failure, however fast it came (docs/probe.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# A dated snapshot of the model asked for: ``gpt-4o`` answered as ``gpt-4o-2024-08-06``.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})")
_PATH_STEP = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")
QUOTED = 60  # characters of the answer a reason quotes, at most


@dataclass(frozen=True, slots=True)
class Expect:
    """What a right answer has; an empty field asks nothing."""

    status: tuple[int, ...] = ()
    non_empty: bool = False
    model: str | None = None
    finish_reason: tuple[str, ...] = ()
    min_output_tokens: int | None = None
    regex: str | None = None
    json_path: str | None = None
    json_equals: Any = None


@dataclass(slots=True)
class AnswerSaid:
    """What one answer said, as far as the checks ask: its answer text (reasoning apart),
    the model names and finish reasons it gave, how many chunks carried answer text."""

    http_status: int | None = None
    text: str = ""
    models: list[str] = field(default_factory=list)
    finish_reasons: list[str] = field(default_factory=list)
    answer_chunks: int = 0
    output_tokens: int | None = None  # the server's count (usage), if it gave one


Cut = Callable[[str, int], str]


def plain_cut(text: str, limit: int) -> str:
    return text[:limit]


def failures(expect: Expect, said: AnswerSaid, cut: Cut = plain_cut) -> list[str]:
    """Why ``said`` is not the answer ``expect`` asks for, one reason a check. ``cut``
    shortens the answer a reason quotes (``Redactor.cut``: secrets scrubbed before the cut)."""
    checks = (
        _status,
        _non_empty,
        _model,
        _finish_reason,
        _min_output_tokens,
        _regex,
        _json_path,
    )
    return [reason for check in checks if (reason := check(expect, said, cut)) is not None]


def _status(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    if not expect.status or said.http_status in expect.status:
        return None
    return f"status {said.http_status}, expected {_listed(expect.status)}"


def _non_empty(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    if expect.non_empty and not said.text.strip():
        return "empty answer"
    return None


def _model(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    asked = expect.model
    if asked is None:
        return None
    if not said.models:
        return f"no model named in the answer, {asked!r} asked"
    other = [name for name in dict.fromkeys(said.models) if not same_model(asked, name)]
    return f"model {other[0]!r} answered, {asked!r} asked" if other else None


def same_model(asked: str, answered: str) -> bool:
    """The model asked for, or a dated snapshot of it (OpenAI names the snapshot)."""
    if answered == asked:
        return True
    return answered.startswith(asked) and _SNAPSHOT.fullmatch(answered[len(asked) :]) is not None


def _finish_reason(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    if not expect.finish_reason:
        return None
    if not said.finish_reasons:
        return f"no finish_reason, expected {_listed(expect.finish_reason)}"
    wrong = [r for r in said.finish_reasons if r not in expect.finish_reason]
    return (
        f"finish_reason {wrong[0]!r}, expected {_listed(expect.finish_reason)}" if wrong else None
    )


def _min_output_tokens(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    least = expect.min_output_tokens
    if least is None:
        return None
    # Without the server's count, each chunk that carried answer text counts one: a floor.
    count, unit = (said.output_tokens, "output tokens")
    if count is None:
        count, unit = said.answer_chunks, "answer chunks (no token count given)"
    return f"{count} {unit}, at least {least} expected" if count < least else None


def _regex(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    if expect.regex is None or re.search(expect.regex, said.text) is not None:
        return None
    return f"answer {_quote(said.text, cut)} does not match regex {expect.regex!r}"


def _json_path(expect: Expect, said: AnswerSaid, cut: Cut) -> str | None:
    path = expect.json_path
    if path is None:
        return None
    try:
        document = json.loads(said.text)
    except ValueError:
        return f"answer {_quote(said.text, cut)} is not JSON (json_path {path})"
    found, value = follow(document, parse_path(path))
    if not found or value is None:
        return f"json_path {path}: nothing there"
    if expect.json_equals is not None and value != expect.json_equals:
        return (
            f"json_path {path}: {_quote(json.dumps(value), cut)}, expected {expect.json_equals!r}"
        )
    return None


def parse_path(path: str) -> tuple[str | int, ...]:
    """``$.choices[0]['a b']`` → ("choices", 0, "a b"); ValueError for anything else."""
    if not path.startswith("$"):
        raise ValueError("a JSON path starts with $")
    steps: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_STEP.match(path, position)
        if match is None:
            raise ValueError(f"cannot read the JSON path from character {position + 1} on")
        name, index, single, double = match.groups()
        steps.append(int(index) if index is not None else (name or single or double or ""))
        position = match.end()
    return tuple(steps)


def follow(document: Any, steps: Sequence[str | int]) -> tuple[bool, Any]:
    """(found, value) at ``steps`` in ``document``."""
    value = document
    for step in steps:
        if isinstance(step, int) and isinstance(value, list) and step < len(value):
            value = value[step]
        elif isinstance(step, str) and isinstance(value, Mapping) and step in value:
            value = value[step]
        else:
            return False, None
    return True, value


def _listed(values: Sequence[object]) -> str:
    return "[" + ", ".join(str(v) for v in values) + "]"


def _quote(text: str, cut: Cut) -> str:
    """The start of an answer in a reason, cut by ``cut`` (which scrubs it first)."""
    short = cut(text, QUOTED)
    return repr(short if len(short) == len(text) else short + "…")
