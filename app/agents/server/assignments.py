"""What each agent probes: its assignment, the targets listing its vantage, with header
templates (never their values), built once per targets file."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from app.agents.wire import TARGET_FIELDS_KEPT_BACK, Assignment, assignment_version
from app.config import TargetsFile
from app.config.placement import assigned

REFRESH_S = 30.0


def assignment(targets: TargetsFile, vantage: str) -> Assignment:
    sent = []
    for target in assigned(targets.targets, vantage):
        kept_back = set(TARGET_FIELDS_KEPT_BACK)
        if "follow_redirects" not in target.model_fields_set:
            # Its default is refused when set on an openai or anthropic target: leave it out.
            kept_back.add("follow_redirects")
        if not target.propagate:
            # Newer than some agents (their Target forbids unknown fields): sent when set.
            kept_back.add("propagate")
        # Headers are templates: see app.config.placement.
        sent.append(target.model_dump(mode="json", exclude=kept_back))
    return Assignment(
        vantage=vantage,
        version=assignment_version(sent),
        refresh_s=REFRESH_S,
        targets=sent,
    )


@dataclass
class Assignments:
    """Each vantage's assignment, built once per targets file (a reload makes a new one):
    a push checks its target against it without dumping every target again."""

    _for: TargetsFile | None = None
    _built: dict[str, tuple[Assignment, frozenset[str]]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def get(self, targets: TargetsFile, vantage: str) -> tuple[Assignment, frozenset[str]]:
        """``vantage``'s assignment in ``targets``, and the names of its targets."""
        with self._lock:
            if self._for is not targets:
                self._for, self._built = targets, {}
            found = self._built.get(vantage)
            if found is None:
                made = assignment(targets, vantage)
                found = made, frozenset(str(t["name"]) for t in made.targets)
                self._built[vantage] = found
            return found
