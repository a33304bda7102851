"""The backtest's speed-ups change no alert: on a fixed corpus the replay makes exactly the
transitions recorded with the code before them (tests/backtestcorpus.py says how the
record was made, and how to re-record it when a detector change means to change alerts)."""

from __future__ import annotations

import json
from collections import Counter

from tests.backtestcorpus import RECORDED, corpus, transitions


def test_the_replay_makes_the_recorded_transitions_numbers_and_all() -> None:
    recorded = json.loads(RECORDED.read_text())
    moved = Counter((t["alert"], t["state"]) for t in recorded)
    for kind in ("dominant_shift", "tail_shift", "deadline_miss"):
        assert moved[(kind, "firing")] >= 1, f"the corpus should fire {kind}"
    found = transitions(corpus())
    for index, (now, then) in enumerate(zip(found, recorded, strict=False)):
        assert now == then, f"transition {index} differs"
    assert len(found) == len(recorded)
