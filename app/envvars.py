"""``${NAME}`` references to the environment: the one expansion that the targets file's
header values, the notifiers' settings and ``probe --header`` share, with one rule for a
variable that is not set (an error, unless the command never sends what holds it)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationInfo

REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class UnsetVariable(ValueError):
    """A ``${NAME}`` whose variable is not set; the message names it, never a value."""

    def __init__(self, name: str) -> None:
        super().__init__(f"environment variable {name} is not set")
        self.name = name


def expand(value: str, environ: Mapping[str, str], *, keep_unset: bool = False) -> str:
    """``value`` with each ``${NAME}`` replaced by the variable's value.

    A variable that is not set raises UnsetVariable; with ``keep_unset`` its reference stays
    as written instead, for commands that read the file but never send what it holds.
    """

    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        if name in environ:
            return environ[name]
        if keep_unset:
            return match.group(0)
        raise UnsetVariable(name)

    return REFERENCE.sub(lookup, value)


def has_reference(value: str) -> bool:
    return REFERENCE.search(value) is not None


def expand_field(value: Any, info: ValidationInfo) -> Any:
    """``expand`` as a pydantic before-validator: the environment and ``keep_unset`` come
    from the validation context (``load_targets`` passes its own), else ``os.environ``."""
    if not isinstance(value, str):
        return value
    context = validation_context(info)
    environ: Mapping[str, str] = context.get("environ", os.environ)
    return expand(value, environ, keep_unset=context.get("keep_unset", False))


def validation_context(info: ValidationInfo) -> Mapping[str, Any]:
    return info.context if isinstance(info.context, Mapping) else {}
