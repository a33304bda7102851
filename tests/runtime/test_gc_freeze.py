"""Once the service has started, its long-lived objects are out of the cyclic GC's sight, so
that a large read (a 90-day chart: tens of thousands of rows) does not make the collector
walk them again and again (``bench.store_query``)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.main import build_service


@pytest.fixture
def thawed() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the rest of the test session collects as usual


@pytest.mark.usefixtures("thawed")
def test_starting_the_service_freezes_what_start_up_made(tmp_path: Path, db_url: str) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets:\n  - {name: api, url: 'http://127.0.0.1:9/', interval: 1h}\n")
    service = build_service(
        Settings(config=config, database_url=db_url, spool_dir=tmp_path / "spool")
    )
    assert gc.get_freeze_count() == 0

    async def start_and_stop() -> int:
        await service.start()
        try:
            return gc.get_freeze_count()
        finally:
            await service.stop()

    frozen = asyncio.run(start_and_stop())

    assert frozen > 10_000  # modules, configuration, engine: far more than a handful
