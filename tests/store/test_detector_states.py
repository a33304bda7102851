"""Detector states written many at once (app.store.alertwrites.save_detector_states): on
PostgreSQL one statement for them all, read back as written, on both databases."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session, sessionmaker

from app.store import alertwrites
from app.store.alertwrites import DetectorState
from tests.runfactory import T0

SPANS = {"spans": [["2026-01-01T00:00:00+00:00", None]]}


def _state(vantage: str, score: float = 1.5, runs: int = 2, rebase: bool = False) -> DetectorState:
    rebase_at = T0 + timedelta(hours=1) if rebase else None
    cusums = {"tail_shift": [2.0, 3.0, 0.25], "level_pool": [1.0, -16.5]}
    run = f"run-{vantage}"
    return DetectorState("chat", vantage, score, runs, run, rebase_at, SPANS, T0, cusums)


def _read(sessions: sessionmaker[Session]) -> dict[str, DetectorState]:
    with sessions() as session:
        return {state.vantage: state for state in alertwrites.detector_states(session, "chat")}


def _written(sessions: sessionmaker[Session], states: list[DetectorState]) -> int:
    """``states`` written in one transaction; the statements that took."""
    sent: list[str] = []

    def seen(*args: object) -> None:
        sent.append(str(args[2]))

    engine = sessions.kw["bind"]
    event.listen(engine, "before_cursor_execute", seen)
    try:
        with sessions.begin() as session:
            alertwrites.save_detector_states(session.connection(), states)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    return len(sent)


@pytest.mark.parametrize(
    "second",
    [
        [_state("eu", 4.0, 7, rebase=True)],  # one updated
        [_state("eu", 0.0, 0), _state("us", 2.5), _state("ap")],  # updated and new together
        [_state("us", math.inf)],  # a score JSON cannot hold: written the way that can
    ],
)
def test_states_written_together_read_back_as_written(
    sessions: sessionmaker[Session], second: list[DetectorState]
) -> None:
    first = [_state("eu"), _state("us", rebase=True)]
    statements = _written(sessions, first)
    postgres = sessions.kw["bind"].dialect.name == "postgresql"
    assert statements == (1 if postgres else 2)
    _written(sessions, second)
    expected = {s.vantage: s for s in first} | {s.vantage: s for s in second}
    assert _read(sessions) == expected
