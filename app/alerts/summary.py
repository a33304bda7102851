"""One sentence that explains an alert, from its structured numbers (each detector
writes its own: app/analysis/detectors/)."""

from __future__ import annotations

from typing import Any

from app.alerts import silent
from app.alerts.identity import Identity
from app.analysis.detectors.registry import DETECTORS

# Alerts no detector raises, each with its sentence.
SENTENCES = {silent.KIND: silent.sentence}


def summarize_alert(identity: Identity, numbers: dict[str, Any]) -> str:
    detector = DETECTORS.get(identity.kind)
    where = _where(identity, numbers)
    plain = f"{identity.kind.replace('_', ' ')} on {identity.target}{where}"
    if identity.kind in SENTENCES and numbers:
        return SENTENCES[identity.kind](identity, numbers) + where
    if detector is None or not numbers:
        return plain
    try:
        aside = detector.aside(identity, numbers) if detector.aside is not None else ""
        return detector.sentence(identity, numbers) + where + aside
    except (KeyError, TypeError):
        return plain


def _where(identity: Identity, numbers: dict[str, Any]) -> str:
    if "vantages" in numbers and identity.vantage is None:
        late = numbers.get("vantages_late")
        aside = f" ({', '.join(late)} late, not waited for)" if late else ""
        return f" at {numbers['vantages_agreeing']}/{numbers['vantages']} vantages{aside}"
    return f" at {identity.vantage}" if identity.vantage else ""
