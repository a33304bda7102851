"""``baseline_drift`` (a warning) — slower than a long, fixed baseline, by enough to matter.

The statistics are in app/analysis/drift.py; here is when a baseline is frozen, when it is
frozen anew, and when the drift from it makes an alert.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from app.analysis.detectors.base import WARNING, Detector, Finding, Inputs, Named, Signal
from app.analysis.drift import Drift, drifting_for, keep_day, observe, pooled_days, today
from app.analysis.driftpack import Packed, unpack
from app.analysis.drifttail import H, K, tail_cusum
from app.analysis.runs import Array

if TYPE_CHECKING:
    from app.analysis.detectors.params import DetectorParams

KIND = "baseline_drift"
# How long it has been drifting: since its daily value was last under this share of today's.
ONSET_FRACTION = 0.2
# Alerts that tell of a change of speed: while one is open here, a drift is not news.
TOLD_BY = frozenset({"dominant_shift", "tail_shift", "level_shift"})


def wants_baseline(
    floats: list[float] | None, params: DetectorParams, rebase_at: datetime | None, now: datetime
) -> bool:
    """Whether a new full reference should be profiled for a freeze (cheap: asked at each
    reference rebuild, so the profile is only worked out when it may be kept)."""
    drift = unpack(floats)
    return drift is None or _stale(drift, params, rebase_at, now, active=False)


def _stale(
    drift: Drift, params: DetectorParams, rebase_at: datetime | None, now: datetime, active: bool
) -> bool:
    """The baseline gives way: to a pinned week, to an acknowledged change, or with age
    (not while its alert is open: the alert would lose what it is measured against)."""
    if rebase_at is not None and rebase_at.timestamp() > drift.frozen_at:
        return True
    pin = _pin(params)
    if not math.isnan(pin) or not math.isnan(drift.pin):
        return pin != drift.pin  # a pinned baseline does not age
    old = now.timestamp() - drift.baseline.end > params.baseline_max_age_days * 86400
    return old and not active


def _pin(params: DetectorParams) -> float:
    return params.baseline_from.timestamp() if params.baseline_from is not None else math.nan


def judge(inputs: Inputs) -> list[Finding]:
    params, now = inputs.params, inputs.now
    drift = unpack(inputs.cusums.get(KIND))
    active = (KIND, WARNING) in inputs.active
    if drift is not None and _stale(drift, params, inputs.rebase_at, now, active):
        if inputs.rebase_at is not None and inputs.rebase_at.timestamp() > drift.frozen_at:
            drift = None  # the accepted change is the new normal: wait for its week
        fresh = _fresh(inputs)
        drift = fresh if fresh is not None else drift
    elif drift is None:
        drift = _fresh(inputs)
    if drift is None:
        inputs.cusums.pop(KIND, None)
        return []
    observe(drift, inputs.recent[-1])
    value = today(drift, inputs.recent[-1].at)
    if value is not None:
        keep_day(drift, inputs.recent[-1].at, value)
    inputs.cusums[KIND] = Packed(drift, inputs.cusums.get(KIND))
    if value is None:
        return []
    finding = drift_finding(drift, value, params, now)
    if finding.signal is Signal.HIT and _told(inputs):
        return [Finding(Signal.HOLD, finding.numbers)]
    return [finding]


def _told(inputs: Inputs) -> bool:
    """Another alert about this vantage's speed is open: the change is told already (an
    abrupt one, seen at once); acknowledging it re-bases the baseline too."""
    others = {kind for kind, _ in inputs.active} & TOLD_BY
    return inputs.dominant_open or bool(others)


def _fresh(inputs: Inputs) -> Drift | None:
    """A new baseline from the reference's profile, when there is one to take: for a
    pinned ``baseline_from``, only a week that starts there or later."""
    reference = inputs.reference
    profile = reference.drift if reference is not None else None
    pin = _pin(inputs.params)
    if profile is None or (not math.isnan(pin) and profile.start < pin - 3600):
        return None
    return Drift.start(profile, inputs.now.timestamp(), pin)


def drift_finding(drift: Drift, value: Array, params: DetectorParams, now: datetime) -> Finding:
    """Hit when a metric's daily value is beyond both its least material change and
    ``baseline_drift_sigmas`` of the baseline's day-to-day spread; clear when every one is
    under half of that. A phase, and its tail, count when it holds a share that matters."""
    base = drift.baseline
    k = len(base.phases)
    least = np.full(base.width, math.log1p(params.baseline_drift_min))
    least[1 + k :] = math.log1p(params.baseline_tail_min)
    needed = np.maximum(least, params.baseline_drift_sigmas * base.spread)
    value, needed, pooled = _pooled_tails(drift, value, needed, least, params, now)
    value, needed, pooled, calm = _cusum_tails(drift, value, needed, pooled)
    material = base.shares >= params.baseline_drift_share
    counted = np.concatenate(([True], material, material))
    # A phase's rise is material when it adds enough to end-to-end as well.
    adds = base.shares * np.expm1(value[1 : 1 + k]) >= params.baseline_drift_adds
    beyond = counted & (value >= needed) & np.concatenate(([True], adds, np.ones(k, bool)))
    if not beyond.any() and np.all(~counted | (value < calm)):
        return Finding(Signal.CLEAR)  # the usual case: nothing to tell, nothing to keep
    names = ("end-to-end", *base.phases, *(f"{name} tail" for name in base.phases))
    lead = int(np.argmax(np.where(counted, value / needed, -np.inf)))
    tails = 100 * base.tail0 * np.exp(value[1 + k :])
    numbers: dict[str, Any] = {
        "baseline_from": _day(base.start),
        "baseline_to": _day(base.end),
        "leading": names[lead],
        "leading_pct": _pct(value[lead]),
        "needed_pct": _pct(needed[lead]),
        "end_to_end_pct": _pct(value[0]),
        "phases_pct": {
            name: _pct(value[1 + i]) for i, name in enumerate(base.phases) if material[i]
        },
        "over_p95_pct": {
            name: round(float(tails[i]), 1) for i, name in enumerate(base.phases) if material[i]
        },
        "baseline_over_p95_pct": {
            name: round(100 * float(base.tail0[i]), 1)
            for i, name in enumerate(base.phases)
            if material[i]
        },
        "tail_days": int(pooled[lead - 1 - k]) if lead > k else 1,
        "drifting_days": round(drifting_for(drift, lead, value[lead], now, ONSET_FRACTION), 1),
        "since_baseline_days": round((now.timestamp() - base.end) / 86400, 1),
    }
    return Finding(Signal.HIT if beyond.any() else Signal.HOLD, numbers)


def _pooled_tails(
    drift: Drift, value: Array, needed: Array, least: Array, params: DetectorParams, now: datetime
) -> tuple[Array, Array, Array]:
    """Each tail read over today or over its newest 2…7 kept days, whichever is furthest
    along to its own bar (``baseline_drift_sigmas`` of the spread ÷ √days, and the least
    change): at 10 samples a run a day's share strays 0.14 in log, and a drift over two
    weeks never reaches five of that in one day. The medians stay daily: their wander is
    the shared load's, which lasts for days. Returns the values, the bars and each
    tail's days."""
    k = len(drift.baseline.phases)
    means, n = pooled_days(drift, now)
    value, needed = value.copy(), needed.copy()
    days = np.ones(k)
    if not len(n):
        return value, needed, days
    tails = slice(1 + k, None)
    # A week's six daily values may read calm by chance, and n days trust it √n times
    # over: not under a day's counting noise (the day's own test keeps its calibration).
    base = drift.baseline
    spread = np.maximum(base.spread[tails], base.counting)
    bars = np.maximum(least[tails], params.baseline_drift_sigmas * spread / np.sqrt(n)[:, None])
    reach = means[:, tails] / bars
    best = np.argmax(reach, axis=0)
    cols = np.arange(k)
    better = reach[best, cols] > value[tails] / needed[tails]
    value[tails] = np.where(better, means[best, 1 + k + cols], value[tails])
    needed[tails] = np.where(better, bars[best, cols], needed[tails])
    days = np.where(better, n[best], 1.0)
    return value, needed, days


def _cusum_tails(
    drift: Drift, value: Array, needed: Array, days: Array
) -> tuple[Array, Array, Array, Array]:
    """Each tail's CUSUM over its kept days (app/analysis/drifttail.py), when further along
    to ``H`` than the readings above to their bars: the mean of the days it holds, against
    the mean it needed over them (``K`` + ``H`` noises ÷ days). The noise is a day's
    counting noise (a layout-2 state has none: the daily spread). Also returns what each
    value must be under to clear: half its bar; for a CUSUM, the mean of half of ``H``."""
    base = drift.baseline
    k = len(base.phases)
    tails = slice(1 + k, None)
    value, needed = value.copy(), needed.copy()
    calm = needed / 2
    noise = np.where(base.counting > 0, base.counting, base.spread[tails])
    score, held, mean = tail_cusum(drift.days[:, 1 + 1 + k :], noise)
    better = (held > 0) & (score / H > value[tails] / needed[tails])
    per_day = noise / np.maximum(held, 1)
    value[tails] = np.where(better, mean, value[tails])
    needed[tails] = np.where(better, K + H * per_day, needed[tails])
    calm[tails] = np.where(better, K + H / 2 * per_day, calm[tails])
    return value, needed, np.where(better, held, days), calm


def _pct(log_ratio: float) -> float:
    return round(100 * math.expm1(float(log_ratio)), 1)


def _day(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).date().isoformat()


def sentence(identity: Named, n: dict[str, Any]) -> str:
    lead = n["leading"]
    if lead.endswith(" tail"):
        phase = lead.removesuffix(" tail")
        days = n.get("tail_days", 1)  # alerts stored before the pooled tails have none
        during = f" over the last {days} days" if days > 1 else ""
        what = (
            f"{n['over_p95_pct'][phase]:g} % of its {phase} samples{during} are over their"
            f" p95 ({n['baseline_over_p95_pct'][phase]:g} % then)"
        )
    else:
        label = "end-to-end p50" if lead == "end-to-end" else f"{lead} median"
        what = f"{label} is {n['leading_pct']:g} % above it"
    others = [f"end-to-end {n['end_to_end_pct']:+g} %"] if lead != "end-to-end" else []
    others += [f"{name} {pct:+g} %" for name, pct in n["phases_pct"].items() if name != lead]
    others += [
        f"{name} p95 exceeded by {pct:g} % (was {n['baseline_over_p95_pct'][name]:g} %)"
        for name, pct in n["over_p95_pct"].items()
        if f"{name} tail" != lead and pct >= 1.5 * n["baseline_over_p95_pct"][name]
    ]
    return (
        f"{identity.target} drifted from its baseline of {n['baseline_from']}…"
        f"{n['baseline_to']}: {what} at these hours, and has been drifting up for"
        f" {n['drifting_days']:g} days ({', '.join(others)})"
    )


def _confirm(params: DetectorParams) -> int:
    return params.baseline_drift_confirm


DETECTOR = Detector(
    name=KIND,
    summary="slower than a long, fixed baseline (a drift over weeks), by enough to matter",
    sentence=sentence,
    judge=judge,
    severity=WARNING,
    confirm=_confirm,
    # A drift lasts weeks: keeping its runs out would leave the rolling reference empty.
    excludes_runs=False,
)
