"""Once the service has started, its long-lived objects are out of the cyclic GC's sight and
the young generation is collected less often (``app.runtime.collector``), so that a large
read or a batch of pushes does not make the collector walk them again and again
(``bench.store_query``, ``bench.push_cpu``); once stopped, both are as they were."""

from __future__ import annotations

import asyncio
import gc
import warnings
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.main import build_service
from app.runtime.collector import YOUNG_THRESHOLD, settle_collector


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()  # the rest of the test session collects as usual


@pytest.mark.usefixtures("thawed")
def test_starting_the_service_freezes_what_start_up_made(tmp_path: Path, db_url: str) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets:\n  - {name: api, url: 'http://127.0.0.1:9/', interval: 1h}\n")
    service = build_service(
        Settings(config=config, database_url=db_url, spool_dir=tmp_path / "spool")
    )
    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()

    async def start_and_stop() -> tuple[int, tuple[int, int, int]]:
        await service.start()
        try:
            return gc.get_freeze_count(), gc.get_threshold()
        finally:
            await service.stop()

    frozen, running = asyncio.run(start_and_stop())

    assert frozen > 10_000  # modules, configuration, engine: far more than a handful
    assert running == (YOUNG_THRESHOLD, before[1], before[2])
    assert (gc.get_freeze_count(), gc.get_threshold()) == (0, before)


@pytest.mark.usefixtures("thawed")
def test_a_cycle_frozen_then_let_go_is_collected_once_undone() -> None:
    class Node:
        pass

    node = Node()
    node.itself = node  # type: ignore[attr-defined]
    undo = settle_collector()
    collected = []
    gone = weakref.ref(node, collected.append)
    del node
    collect()
    assert not collected  # frozen: the collector leaves it be
    undo()
    collect()
    assert collected and gone() is None


def collect() -> None:
    """A full collection that judges only this test's cycle: undone, every frozen object is
    the collector's again, and a connection another test left open (its ResourceWarning)
    is not this test's to answer for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


@pytest.mark.usefixtures("thawed")
def test_two_services_in_one_process_leave_the_collector_as_they_found_it() -> None:
    """Settled by two, undone in the order they started or the other: the thresholds found
    first come back once both are gone, and an undo done twice counts once."""
    before = gc.get_threshold()
    for order in ((0, 1), (1, 0)):
        undos = [settle_collector(), settle_collector()]
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
        undos[order[0]]()
        undos[order[0]]()  # twice: still one service settled
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD and gc.get_freeze_count() > 0
        undos[order[1]]()
        assert (gc.get_threshold(), gc.get_freeze_count()) == (before, 0)
