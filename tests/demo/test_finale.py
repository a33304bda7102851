"""The story's last scene: a prediction from prod's stored samples."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.whatif.resample import Interval
from app.demo import story
from app.demo.finale import TARGET, _spread, finale
from tests.runfactory import EVERY, T0, make_run, record_of, store_records

# prod once reasoning is off and the busy hours began: network and queue lead.
PROD = {"connect": 1.0, "network": 275.0, "queue": 250.0, "prefill": 40.0, "generation": 60.0}


def test_the_finale_predicts_the_nearby_deployment_from_prods_samples(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    rng = np.random.default_rng(9)
    runs = [record_of(make_run(rng, T0 + i * EVERY, PROD, target=TARGET)) for i in range(8)]
    store_records(sessions, runs, T0 + timedelta(days=1))
    url = engine.url.render_as_string(hide_password=False)
    lines = finale(url, T0, T0 + timedelta(days=1))
    assert lines[0].startswith(f"  Last scene, phasewatch whatif {TARGET} {' '.join(story.NEARBY)}")
    before, after = (float(x) for x in lines[1].split("p50 ")[1].split(" ms")[0].split(" → "))
    assert after < before / 5  # ~70 ms instead of ~630
    assert "prefill would lead" in lines[1] or "generation would lead" in lines[1]


def test_no_samples_no_finale(engine: Engine) -> None:
    url = engine.url.render_as_string(hide_password=False)
    assert finale(url, T0, T0 + timedelta(days=1)) == []


@pytest.mark.parametrize(
    ("lo", "hi", "shown"),
    [
        (55.0, 71.0, " (55–71)"),
        (60.2, 60.4, " (no spread: the phases left are the same in every sample)"),
    ],
)
def test_an_interval_without_width_says_why(lo: float, hi: float, shown: str) -> None:
    assert _spread(Interval(60.0, lo, hi)) == shown
