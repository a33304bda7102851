"""Reading the targets file: YAML within limits, ``${ENV}`` expanded, validated."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.config.errors import ConfigError, Where, describe
from app.config.safeyaml import YamlRefused, read_document
from app.config.settings import VANTAGE_VARIABLE, server_vantage
from app.config.targets import TargetsFile
from app.envvars import UnsetVariable, expand


def load_targets(
    path: Path, environ: Mapping[str, str] | None = None, *, require_env: bool = True
) -> TargetsFile:
    """Read, expand ``${ENV}`` references in header values, and validate the targets file.

    ``require_env=False`` is for commands that never send a request or a notification
    (backtest, export): a variable that is not set is no problem, its ``${NAME}`` stays.
    """
    try:
        raw, lines = read_document(path)
    except OSError as exc:
        raise ConfigError(path, [f"{path}: cannot read: {exc.strerror}"]) from exc
    except YamlRefused as exc:
        raise ConfigError(path, [str(exc)]) from exc
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ConfigError(path, [f"{path}: the file must be a mapping with a 'targets' list"])
    environ = os.environ if environ is None else environ
    where = Where(path, raw, lines)
    problems = _expand_headers(raw, environ, not require_env, where)
    try:
        # Notifier configs expand ``${NAME}`` themselves (URLs, headers, passwords).
        context = {
            "environ": environ,
            "keep_unset": not require_env,
            "server_vantage": server_vantage(environ.get(VANTAGE_VARIABLE), raw.get("vantage")),
        }
        parsed = TargetsFile.model_validate(raw, context=context)
    except ValidationError as exc:
        problems += [describe(where, error, TargetsFile) for error in exc.errors()]
    if problems:
        raise ConfigError(path, sorted(problems, key=lambda p: _line_of(p, path)))
    return parsed


def _line_of(problem: str, path: Path) -> int:
    """A problem's line (``path:LINE: …``, 0 without one): problems read in the file's order."""
    number = problem.removeprefix(f"{path}:").split(":", 1)[0]
    return int(number) if number.isdigit() else 0


def _expand_headers(
    raw: dict[str, Any], environ: Mapping[str, str], keep_unset: bool, where: Where
) -> list[str]:
    problems: list[str] = []
    for index, target in enumerate(raw.get("targets") or []):
        headers = target.get("headers") if isinstance(target, dict) else None
        if not isinstance(headers, dict) or "vantages" in target:
            continue  # probed at vantages: each expands the templates itself (app.config.placement)
        for name, value in headers.items():
            if not isinstance(value, str):
                continue
            try:
                headers[name] = expand(value, environ, keep_unset=keep_unset)
            except UnsetVariable as exc:
                problems.append(where.line(("targets", index, "headers", name), str(exc)))
    return problems
