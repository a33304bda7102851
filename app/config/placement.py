"""Vantages: the places a target is probed from, and what each may be told and may write.

A target without ``vantages:`` runs at the server alone, as before. One that lists them runs
at each listed agent (and at the server when its own vantage is listed). Such a target's
header values stay templates (``Bearer ${OPENAI_API_KEY}``) in the server's targets file
model: the server sends the template and each prober expands it from its own environment,
so a secret stays on the machine that uses it.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping

from app.config import Target
from app.config.vantages import VantageAccess
from app.envvars import UnsetVariable, expand
from app.probe.redact import CONTROL_CHARACTER_PROBLEM, has_control_character


def runs_at(target: Target, vantage: str, *, server: bool) -> bool:
    """Is ``target`` probed at ``vantage``? With no list, only at the server."""
    listed = target.vantages
    return server if listed is None else vantage in listed


def assigned(targets: Iterable[Target], vantage: str) -> list[Target]:
    """The targets an agent at ``vantage`` probes: those listing it."""
    return [t for t in targets if runs_at(t, vantage, server=False)]


def token_of(vantages: Mapping[str, VantageAccess], vantage: str, given: str) -> bool:
    """Does ``given`` open ``vantage``? Constant time, and as slow for an unknown vantage."""
    access = vantages.get(vantage)
    expected = access.token.get_secret_value() if access is not None else os.urandom(16).hex()
    return hmac.compare_digest(given.encode(), expected.encode()) and access is not None


def expanded_headers(headers: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """Header templates filled from ``environ``; UnsetVariable names the first one missing."""
    return {name: expand(value, environ) for name, value in headers.items()}


def probed_here(
    targets: Iterable[Target], vantage: str, environ: Mapping[str, str], *, server: bool
) -> tuple[list[Target], dict[str, str]]:
    """The targets to probe at ``vantage``, their header templates filled in, and those
    refused (by name: why) for a variable this environment lacks."""
    runnable: list[Target] = []
    refused: dict[str, str] = {}
    for target in targets:
        if not runs_at(target, vantage, server=server):
            continue
        if target.vantages is None:  # expanded when the file was read
            runnable.append(target)
            continue
        try:
            headers = expanded_headers(target.headers, environ)
        except UnsetVariable as exc:
            # A process reads its environment once: a reload cannot bring the variable in.
            refused[target.name] = f"{exc} here: set it for this process and restart it"
            continue
        bad = [name for name, value in headers.items() if has_control_character(value)]
        if bad:  # never the value in the reason: it is likely a secret
            refused[target.name] = f"{bad[0]}: {CONTROL_CHARACTER_PROBLEM}"
            continue
        runnable.append(target.model_copy(update={"headers": headers}))
    return runnable, refused


def shortest_interval(targets: Iterable[Target], vantage: str) -> float | None:
    """The shortest interval among the targets assigned to an agent; None: none assigned."""
    return min((t.interval for t in assigned(targets, vantage)), default=None)
