"""docs/cli.md, rendered from the commands themselves: names, arguments, options, defaults, help.

``tests/test_docs.py`` fails when the file and the commands disagree; after changing a
command, write it anew with ``.venv/bin/python -m tests.clidoc > docs/cli.md``.
"""

from __future__ import annotations

import enum
import sys
from collections.abc import Iterator
from typing import Any

from app.cli import every_command

HEADER = """# Command-line reference

Every `phasewatch` command with its arguments and options, rendered from the commands
themselves (`.venv/bin/python -m tests.clidoc > docs/cli.md`; a test fails when this file
and the commands disagree). `phasewatch COMMAND --help` prints the same.
"""


def commands() -> Iterator[tuple[str, Any]]:
    """(``"db upgrade"``, click command) for every command, groups walked, in help order."""
    yield from every_command().items()


def options() -> list[tuple[str, str]]:
    """(command, ``--option`` or ``ARGUMENT``) for every parameter of every command."""
    found = []
    for name, command in commands():
        for param in command.params:
            if param.param_type_name == "argument":
                found.append((name, param.name.upper()))
            else:
                found += [(name, option) for option in (*param.opts, *param.secondary_opts)]
    return found


def names(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"`{param.name.upper()}`"
    return " / ".join(f"`{name}`" for name in (*param.opts, *param.secondary_opts))


def default(param: Any) -> str:
    value = param.default
    if value is None or param.param_type_name == "argument" or _plain_flag(param):
        return ""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool) and param.secondary_opts:
        return f"`{param.opts[0] if value else param.secondary_opts[0]}`"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _plain_flag(param: Any) -> bool:
    return bool(getattr(param, "is_flag", False)) and not param.secondary_opts


def what(param: Any) -> str:
    text = " ".join((getattr(param, "help", None) or "").split())
    if isinstance(param.default, enum.Enum):  # the choices are the enum's values
        choices = ", ".join(f"`{choice.value}`" for choice in type(param.default))
        text += f" One of: {choices}."
    return text.replace("|", "\\|")


def section(name: str, command: Any) -> str:
    lines = [f"## `phasewatch {name}`", "", " ".join(command.help.split()), ""]
    if command.params:
        lines += ["| argument or option | default | what |", "|---|---|---|"]
        for param in command.params:
            lines.append(f"| {names(param)} | {default(param)} | {what(param)} |")
        lines.append("")
    return "\n".join(lines)


def render() -> str:
    return "\n".join([HEADER, *(section(name, command) for name, command in commands())])


if __name__ == "__main__":
    sys.stdout.write(render())
