"""The targets file as YAML: read within limits, parsed without expanding an alias bomb.

Ten lines of YAML can name lists of lists nine deep whose aliases stand for 9⁹ nodes.
PyYAML builds that in microseconds (an alias shares the node it names), but whatever walks
the result (the line index, validation, a JSON dump) walks the whole expansion: gigabytes,
for minutes. So the composer counts what every alias stands for and stops at a budget,
before anything walks it.

Limits (README, "The targets file"): ``MAX_FILE_BYTES`` of UTF-8, ``MAX_ALIAS_NODES`` nodes
reached through aliases in all, ``MAX_DEPTH`` levels of nesting (the composer recurses).
A key given twice in one mapping is refused at its second line.
Each refusal is a ``YamlRefused`` naming the line, as ``path:line: reason``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.reader import ReaderError

MAX_FILE_BYTES = 1_048_576
MAX_ALIAS_NODES = 100_000
MAX_DEPTH = 64

LineIndex = dict[tuple[Any, ...], int]


class YamlRefused(Exception):
    """The file cannot be parsed, or is refused before it is; ``str`` is one line."""


class _Over(ComposerError):
    """A limit was passed: raised from inside the composer, so it carries PyYAML's mark."""


def read_document(path: Path) -> tuple[Any, LineIndex]:
    """The file's data and the 1-based line of every key path in it.

    Raises OSError if the file cannot be read, YamlRefused if it is too large, not UTF-8,
    not YAML, or past a limit.
    """
    text = _read_text(path)
    try:
        node, data = _parse(text)
    except _Over as exc:
        raise YamlRefused(f"{path}:{_line(exc)}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise YamlRefused(f"{path}: not valid YAML: {_reason(exc, text)}") from None
    return data, line_index(node)


def _parse(text: str) -> tuple[yaml.Node | None, Any]:
    loader = _BudgetLoader(text)  # checks every character already: a ReaderError here
    try:
        node = loader.get_single_node()
        return node, loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()


def _read_text(path: Path) -> str:
    with path.open("rb") as file:
        # One byte past the limit tells "too large" without reading a huge file whole.
        data = file.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise YamlRefused(
            f"{path}: larger than {MAX_FILE_BYTES} bytes, the limit for a targets file"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise YamlRefused(
            f"{path}:{line}: not UTF-8 text: byte 0x{data[exc.start]:02x} at byte offset "
            f"{exc.start} ({exc.reason})"
        ) from None


class _BudgetLoader(yaml.SafeLoader):
    """SafeLoader whose composer refuses deep nesting and aliases past the budget."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self._expanded: dict[yaml.Node, int] = {}  # nodes a node stands for, aliases expanded
        self._aliased = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._count_alias(event)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Over(None, None, f"nested deeper than {MAX_DEPTH} levels", _mark(event))
        node = super().compose_node(parent, index)
        self._depth -= 1
        if node is not None:
            self._expanded[node] = 1 + sum(self._expanded[part] for part in _children(node))
        if isinstance(node, yaml.MappingNode):
            _refuse_a_key_twice(node)
        return node

    def _count_alias(self, event: yaml.AliasEvent) -> None:
        named = self.anchors.get(event.anchor)
        if named is None:
            return  # PyYAML reports the undefined alias
        if named not in self._expanded:
            reason = f"the alias *{event.anchor} is inside the node it names"
            raise _Over(None, None, reason, _mark(event))
        self._aliased += self._expanded[named]
        if self._aliased > MAX_ALIAS_NODES:
            reason = (
                f"aliases stand for more than {MAX_ALIAS_NODES} nodes, the limit for a "
                "targets file (an alias bomb?)"
            )
            raise _Over(None, None, reason, _mark(event))


def _refuse_a_key_twice(node: yaml.MappingNode) -> None:
    """YAML says keys are unique; PyYAML keeps the last silently (``url:`` twice in a
    target probed the second URL). Merge keys (``<<``) are not keys of the mapping."""
    seen: dict[str, int] = {}
    for key, _value in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        line = key.start_mark.line + 1
        if key.value in seen:
            reason = f"the key '{key.value}' appears twice in one mapping (line {seen[key.value]})"
            raise _Over(None, None, reason, key.start_mark)
        seen[key.value] = line


def _mark(event: yaml.Event) -> yaml.Mark | None:
    mark = event.start_mark
    return mark if isinstance(mark, yaml.Mark) else None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def line_index(node: yaml.Node | None) -> LineIndex:
    """Maps every key path in the YAML document to its 1-based line (a key's, not its
    value's: that is where a reader looks for it)."""
    if node is None:
        return {}
    found: LineIndex = {(): node.start_mark.line + 1}
    _index(node, (), found)
    return found


def _index(node: yaml.Node, path: tuple[Any, ...], found: LineIndex) -> None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):  # a list as a key has no path
                found[(*path, key.value)] = key.start_mark.line + 1
                _index(value, (*path, key.value), found)
    elif isinstance(node, yaml.SequenceNode):
        for position, item in enumerate(node.value):
            found[(*path, position)] = item.start_mark.line + 1
            _index(item, (*path, position), found)


def _line(exc: yaml.MarkedYAMLError) -> int:
    return exc.problem_mark.line + 1 if exc.problem_mark is not None else 1


def _reason(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, ReaderError):
        # Its own text spans two lines and counts characters; the line is what helps.
        line = text.count("\n", 0, exc.position) + 1
        return f"line {line}: character #x{exc.character:04x} is not allowed in YAML"
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    return f"line {mark.line + 1}: {problem}" if mark is not None else " ".join(problem.split())
