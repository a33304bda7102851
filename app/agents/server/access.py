"""Who may speak as an agent, and which runs an agent may push.

An agent names its vantage and shows that vantage's token (compared in constant time). It
may push only runs of its own vantage and of targets assigned to it there.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.config import TargetsFile
from app.config.placement import token_of
from app.store.records import RunRecord


def may_speak_as(targets: TargetsFile, vantage: str, token: str) -> bool:
    """Does ``token`` open ``vantage``, an agent's vantage of the targets file?"""
    return token_of(targets.vantages, vantage, token)


@dataclass(frozen=True)
class PushCheck:
    """Whether a run is this agent's to push: its vantage, a target assigned to it."""

    vantage: str
    names: frozenset[str]  # the targets assigned to ``vantage``

    def refusal(self, record: RunRecord) -> str | None:
        if record.vantage != self.vantage:
            return "this token writes only its own vantage"
        if record.target not in self.names:
            return "that target is not assigned here"
        return None
