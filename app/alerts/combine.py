"""Combining one round's per-vantage ``dominant_shift`` findings into the alerts they make:
grouped by the phase that lost the lead (two or more vantages agreeing: one ``service``
alert), server-side leaders one vantage saw grouped by the phase that won, or taken as the
service's change when the vantages' pooled evidence says that phase grew
(app.alerts.pooling); open per-vantage alerts hear their own finding. Pure: the open
alerts, the round and the findings in, the findings by identity out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from app.alerts.identity import Alert, Identity
from app.alerts.pooling import Grown
from app.alerts.state import State
from app.analysis import detectors as d

KIND = "dominant_shift"
Found = dict[Identity, d.Finding]
Alerts = Mapping[Identity, Alert]


@dataclass(frozen=True, slots=True)
class Round:
    """The vantages judged in one combined evaluation, and those it did not wait for."""

    present: list[str]
    late: list[str]


def combine(
    alerts: Alerts,
    target: str,
    seen: Round,
    per_vantage: dict[str, Found],
    pooled: Grown = lambda phase, against: None,
) -> Found:
    """Grouped by the phase that lost the lead."""
    by_loser: dict[str | None, dict[str, tuple[Identity, d.Finding]]] = {}
    for vantage, found in per_vantage.items():
        for identity, finding in found.items():
            by_loser.setdefault(identity.from_phase, {})[vantage] = (identity, finding)
    combined: Found = {}
    lone: dict[str, tuple[Identity, d.Finding]] = {}  # a server-side leader one vantage saw
    for old, at in by_loser.items():
        hits = [v for v, (_, finding) in at.items() if finding.signal is d.Signal.HIT]
        service = _open_service(alerts, target, old)
        if service is not None or len(hits) >= 2:
            winners = {at[v][0].to_phase for v in hits}
            only = winners.pop() if len(winners) == 1 else None
            service = service or Identity(KIND, target, None, "service", old, only)
            one = at[hits[0]][0] if len(hits) == 1 else None
            grew = pooled(one.to_phase or "", old) if one else None
            combined[service] = agreement(at, hits, seen, grew)
        elif len(hits) == 1 and at[hits[0]][0].to_phase not in d.SERVER_SIDE:
            combined[at[hits[0]][0]] = at[hits[0]][1]
        elif len(hits) == 1:
            lone[hits[0]] = at[hits[0]]
        _keep_open(alerts, at, service, combined)
    combined |= _same_winner(alerts, target, seen, lone, pooled)
    return combined


def _same_winner(
    alerts: Alerts,
    target: str,
    seen: Round,
    lone: dict[str, tuple[Identity, d.Finding]],
    pooled: Grown,
) -> Found:
    """Server-side leaders that only one vantage saw take over from its old leader, but
    that two or more saw take over from different old ones (network here, the queue
    there): one service change, grouped by the phase that won. Seen at one vantage only:
    the service's change when that phase grew as every vantage saw it (app.alerts.pooling)
    — the open one of that winner, if any, else from that vantage's old leader."""
    by_winner: dict[str | None, dict[str, tuple[Identity, d.Finding]]] = {}
    for vantage, (identity, finding) in lone.items():
        by_winner.setdefault(identity.to_phase, {})[vantage] = (identity, finding)
    found: Found = {}
    for new, at in by_winner.items():
        if len(at) >= 2:
            service = Identity(KIND, target, None, "service", None, new)
            found[service] = agreement(at, list(at), seen)
        elif (grew := pooled(new or "", next(iter(at.values()))[0].from_phase)) is not None:
            ((identity, _),) = at.values()
            old = None if _open_service(alerts, target, None, new) else identity.from_phase
            service = Identity(KIND, target, None, "service", old, new)
            found[service] = agreement(at, list(at), seen, grew)
    return found


def _keep_open(
    alerts: Alerts,
    at: dict[str, tuple[Identity, d.Finding]],
    service: Identity | None,
    combined: Found,
) -> None:
    """Open per-vantage alerts hear their own finding; a pending one that a service
    alert now covers is held (the change reached a second vantage)."""
    for identity, finding in at.values():
        alert = alerts.get(identity)
        if alert is None or identity in combined:
            continue
        if service is not None and alert.position.state is State.PENDING:
            finding = d.Finding(d.Signal.HOLD, finding.numbers)
        combined[identity] = finding


def _open_service(
    alerts: Alerts, target: str, old: str | None, new: str | None = None
) -> Identity | None:
    """The open service shift from ``old`` (and to ``new``, when given)."""
    for identity, alert in alerts.items():
        same = (identity.kind, identity.target, identity.vantage, identity.from_phase)
        if same == (KIND, target, None, old) and alert.position.open:
            if new is None or identity.to_phase == new:
                return identity
    return None


def agreement(
    at: dict[str, tuple[Identity, d.Finding]],
    hits: list[str],
    seen: Round,
    grew: dict[str, Any] | None = None,
) -> d.Finding:
    leaders = {
        v: [identity.to_phase, finding.numbers.get("to_share_pct")]
        for v, (identity, finding) in at.items()
    }
    losers = {
        v: [identity.from_phase, finding.numbers.get("from_share_before_pct")]
        for v, (identity, finding) in at.items()
    }
    tops = {v: finding.numbers.get("top") for v, (_, finding) in at.items()}
    # The old leader's share in this window (losers: in the reference), said as "now" by
    # a firing shift whose facts are its firing's (app/alerts/facts.py).
    from_now = {
        v: [finding.numbers.get("from_phase"), finding.numbers.get("from_share_pct")]
        for v, (_, finding) in at.items()
    }
    agreed = {
        "vantages_agreeing": len(hits),
        "vantages": len(seen.present) + len(seen.late),
        "leaders": leaders,
        "losers": losers,
        "from_now": from_now,
        "tops": tops,
    }
    if seen.late:
        agreed["vantages_late"] = seen.late
    signals = [finding.signal for _, finding in at.values()]
    if len(hits) >= 2 or (hits and grew is not None):
        # Pooled growth is judged on the newest runs of every vantage, each grown: it is
        # its own confirmation (app/alerts/pooling.py), as level_shift's CUSUM is.
        numbers = at[hits[0]][1].numbers | agreed | (grew or {})
        return d.Finding(d.Signal.HIT, numbers, confirmed=grew is not None)
    numbers = next(iter(at.values()))[1].numbers | agreed
    if signals and all(signal is d.Signal.CLEAR for signal in signals):
        return d.Finding(d.Signal.CLEAR, numbers)
    return d.Finding(d.Signal.HOLD, numbers)
