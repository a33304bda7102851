"""One sentence that explains an alert, from its structured numbers (each detector
writes its own: app/analysis/detectors/). A firing alert's sentence tells the facts of
its firing, then what they read now (app/alerts/facts.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.alerts import silent
from app.alerts.facts import split
from app.alerts.identity import Identity
from app.analysis.detectors.registry import DETECTORS

# Alerts no detector raises, each with its sentence.
SENTENCES = {silent.KIND: silent.sentence}
CURRENT = {silent.KIND: silent.current}
Phrase = Callable[[Identity, dict[str, Any]], str]


def summarize_alert(identity: Identity, numbers: dict[str, Any]) -> str:
    facts, now = split(numbers)
    detector = DETECTORS.get(identity.kind)
    where = _where(identity, facts)
    plain = f"{identity.kind.replace('_', ' ')} on {identity.target}{where}"
    if identity.kind in SENTENCES and facts:
        return (
            SENTENCES[identity.kind](identity, facts)
            + where
            + _now(CURRENT[identity.kind], identity, now)
        )
    if detector is None or not facts:
        return plain
    try:
        said = detector.sentence(identity, facts) + where
    except (KeyError, TypeError):
        return plain
    return (
        said
        + _now(detector.current, identity, now)
        + _now(detector.aside, identity, now or facts, "")
    )


def _now(
    phrase: Phrase | None, identity: Identity, numbers: dict[str, Any] | None, lead: str = "; now "
) -> str:
    """What ``phrase`` says of ``numbers`` after ``lead``; nothing when it has nothing to
    say, or the numbers lack what it needs (an evaluation that held, with fewer numbers,
    never costs the sentence of the firing)."""
    if phrase is None or not numbers:
        return ""
    try:
        said = phrase(identity, numbers)
    except (KeyError, TypeError):
        return ""
    return lead + said if said else ""


def _where(identity: Identity, numbers: dict[str, Any]) -> str:
    if "vantages" in numbers and identity.vantage is None:
        late = numbers.get("vantages_late")
        aside = f" ({', '.join(late)} late, not waited for)" if late else ""
        return f" at {numbers['vantages_agreeing']}/{numbers['vantages']} vantages{aside}"
    return f" at {identity.vantage}" if identity.vantage else ""
