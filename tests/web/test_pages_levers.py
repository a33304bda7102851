"""The target page's levers, server-rendered (no JavaScript needed), on SQLite and PostgreSQL:
the biggest lever in a sentence and every phase ranked as the API ranks them."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from app.runtime.workers import Workers
from app.store.records import SampleRecord
from app.web.pages.levers import levers_view
from tests.apiapp import api, targets
from tests.runfactory import make_run, record_of
from tests.runtime.test_workers import held_until

NOW = datetime.now(UTC)


def test_the_page_ranks_the_levers_as_the_api_does(db_url: str, tmp_path: Path) -> None:
    with api(db_url, tmp_path, targets("chat", "idle")) as served:
        rng = np.random.default_rng(5)
        for k in range(6):
            served.store(record_of(make_run(rng, NOW - (k + 1) * timedelta(hours=1))))
        served.failing("idle", "eu", 1, NOW - timedelta(minutes=5))
        html = served.client.get("/targets/chat").text
        levers = served.client.get("/api/v1/targets/chat/levers").json()["levers"]
        idle = served.client.get("/targets/idle")
    shown = re.findall(r'<tr data-lever="([a-z_]+)"', html)
    assert shown == [lever["phase"] for lever in levers] and shown[0] == "queue"
    assert re.search(
        r'id="biggest-lever">The biggest lever now is <span class="chip">.*?</span>queue', html
    )
    assert 'name="changes"' in html and ">queue*0.5</textarea>" in html
    assert idle.status_code == 200 and "no lever to rank" in idle.text


def test_where_cut_samples_hold_the_tail_the_page_says_no_lever_moves_it(
    db_url: str, tmp_path: Path
) -> None:
    with api(db_url, tmp_path, targets("edge", deadline_ms=600)) as served:
        rng = np.random.default_rng(5)
        for k in range(6):  # 3 of 20 samples a run cut at the deadline: the p99 is a miss
            record = record_of(make_run(rng, NOW - (k + 1) * timedelta(hours=1), target="edge"))
            cut = [_cut_at(sample, 600.0) for sample in record.samples[-3:]]
            served.store(replace(record, samples=(*record.samples[:-3], *cut)))
        html = served.client.get("/targets/edge").text
        body = served.client.get("/api/v1/targets/edge/levers").json()
    sentence = re.search(r'id="biggest-lever">(.*?)</p>', html, re.S)
    assert sentence is not None
    assert sentence.group(1).startswith("No lever moves the p99 or the misses (")
    assert "By the median, the biggest lever is" in sentence.group(1)
    assert "The biggest lever now is" not in html
    assert body["headline"].startswith("no lever moves the p99")
    assert not any(lever["tail_moves"] for lever in body["levers"])


def _cut_at(sample: SampleRecord, deadline_ms: float) -> SampleRecord:
    """As the probe cuts a sample stuck in the queue: the queue holds the rest to the cut."""
    phases = dict(sample.phases)
    phases["queue"] += deadline_ms - sample.total_ms
    phases["generation"] = phases["transfer"] = 0.0
    phases["queue"] += sum(sample.phases[p] for p in ("generation", "transfer"))
    return replace(sample, status="deadline_exceeded", total_ms=deadline_ms, phases=phases)


@pytest.mark.anyio
async def test_while_every_worker_is_busy_the_page_says_so_instead_of_ranking(
    tmp_path: Path,
) -> None:
    workers = Workers(workers=1, queue=0)
    release = tmp_path / "release"
    try:
        call = asyncio.create_task(workers.run(held_until, str(release)))
        await asyncio.sleep(0.1)
        view = await levers_view(workers, ("sqlite:///unused.db", 100), "chat", None, NOW)
        release.touch()
        await call
    finally:
        workers.close()
    assert view.rows == [] and view.busy is not None and view.busy.startswith("try again in")
