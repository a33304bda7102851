"""One sentence that explains an alert, from its structured numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.alerts.identity import Identity


def summarize_alert(identity: Identity, numbers: dict[str, Any]) -> str:
    write = _SENTENCES.get(identity.kind)
    where = _where(identity, numbers)
    if write is None or not numbers:
        return f"{identity.kind.replace('_', ' ')} on {identity.target}{where}"
    try:
        return write(identity, numbers) + where
    except (KeyError, TypeError):
        return f"{identity.kind.replace('_', ' ')} on {identity.target}{where}"


def _where(identity: Identity, numbers: dict[str, Any]) -> str:
    if "vantages" in numbers and identity.vantage is None:
        return f" at {numbers['vantages_agreeing']}/{numbers['vantages']} vantages"
    return f" at {identity.vantage}" if identity.vantage else ""


def _ci(low: Any, high: Any, unit: str) -> str:
    if low is None or high is None:
        return ""
    return f", 95 % CI {low:g}–{high:g}{unit}"


def _dominant(identity: Identity, n: dict[str, Any]) -> str:
    before = n.get("from_share_before_pct", n["from_share_pct"])
    if identity.to_phase is None and n.get("leaders"):
        now = ", ".join(
            f"{phase} {share:g} % at {vantage}"
            for vantage, (phase, share) in sorted(n["leaders"].items())
            if phase is not None and share is not None
        )
        return (
            f"dominant phase moved on {identity.target}: {identity.from_phase} {before:g} % → {now}"
        )
    return (
        f"dominant phase moved on {identity.target}: {identity.from_phase} {before:g} % → "
        f"{identity.to_phase} {n['to_share_pct']:g} % (lead {n['lead_pp']:g} pp"
        f"{_ci(n.get('lead_low_pp'), n.get('lead_high_pp'), '')})"
    )


def _tail(identity: Identity, n: dict[str, Any]) -> str:
    interval = _ci(n["delta_low_ms"], n["delta_high_ms"], " ms")
    return (
        f"tail got heavier on {identity.target}: {n['quantile']} {n['reference_ms']:g} ms → "
        f"{n['recent_ms']:g} ms (+{n['delta_ms']:g} ms{interval})"
    )


def _deadline(identity: Identity, n: dict[str, Any]) -> str:
    return (
        f"deadline misses on {identity.target}: {n['rate_pct']:g} % of {n['samples']} samples"
        f" ({n['misses']} missed{_ci(n['rate_low_pct'], n['rate_high_pct'], ' %')}), "
        f"SLO {n['slo_pct']:g} %"
    )


def _composition(identity: Identity, n: dict[str, Any]) -> str:
    return (
        f"phase mix moved on {identity.target} without a leader change: {n['moved_most']} "
        f"moved most (Aitchison distance {n['distance']:g}, p = {n['p_value']:.3f})"
    )


def _failing(identity: Identity, n: dict[str, Any]) -> str:
    return f"probe failing on {identity.target}: no successful sample in {n['runs']} runs"


_SENTENCES: dict[str, Callable[[Identity, dict[str, Any]], str]] = {
    "dominant_shift": _dominant,
    "tail_shift": _tail,
    "deadline_miss": _deadline,
    "composition_shift": _composition,
    "probe_failing": _failing,
}
