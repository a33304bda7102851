"""Probe kinds: one module each, named here. A new kind (a WebSocket or gRPC endpoint)
is a module keeping ``ProbeKind``'s contract (``base.py``), a ``Kind`` member, and a line
in ``KINDS``; ``tests/probe/test_kinds.py`` then holds it to the contract."""

from __future__ import annotations

from app.probe.kinds.anthropic import ANTHROPIC
from app.probe.kinds.base import Answer, ProbeKind
from app.probe.kinds.http import HTTP
from app.probe.kinds.openai import OPENAI
from app.probe.spec import Kind

KINDS: dict[Kind, ProbeKind] = {kind.kind: kind for kind in (HTTP, OPENAI, ANTHROPIC)}

__all__ = ["KINDS", "Answer", "ProbeKind"]
