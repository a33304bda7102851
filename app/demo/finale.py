"""The story's last scene: what a dedicated deployment near the users would give prod,
predicted by the what-if engine from prod's samples since reasoning went off."""

from __future__ import annotations

from datetime import datetime

from app.analysis.whatif import parse_changes, predict
from app.analysis.whatif.resample import Interval
from app.demo import story
from app.store.db import make_engine
from app.store.reads.whatifsamples import load_sample_set

TARGET = "translate-prod"


def finale(database_url: str, since: datetime, until: datetime) -> list[str]:
    """What the demo prints once the story is over (nothing without samples)."""
    engine = make_engine(database_url)
    try:
        samples = load_sample_set(engine, TARGET, None, since, until)
    finally:
        engine.dispose()
    if samples is None or samples.n == 0:
        return []
    prediction = predict(samples, parse_changes(story.NEARBY))
    before, after = prediction.before, prediction.after
    command = f"phasewatch whatif {TARGET} {' '.join(story.NEARBY)}"
    return [
        f"  Last scene, {command}: a dedicated deployment near the users would give",
        f"    p50 {before.p50_ms.value:.0f} → {after.p50_ms.value:.0f} ms{_spread(after.p50_ms)},"
        f" p99 {before.p99_ms.value:.0f} → {after.p99_ms.value:.0f} ms{_spread(after.p99_ms)};"
        f" {after.dominant} would lead, then {after.next_dominant}",
    ]


def _spread(quantile: Interval) -> str:
    # The simulator's prefill and generation are fixed for a fixed answer: once the queue
    # and the far round trip are gone, every sample is alike and an interval has no width.
    if round(quantile.lo) == round(quantile.hi):
        return " (no spread: the phases left are the same in every sample)"
    return f" ({quantile.lo:.0f}–{quantile.hi:.0f})"
