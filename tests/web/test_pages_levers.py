"""The target page's levers, server-rendered (no JavaScript needed), on SQLite and PostgreSQL:
the biggest lever in a sentence and every phase ranked as the API ranks them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from tests.apiapp import api, targets
from tests.runfactory import make_run, record_of

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
    shown = re.findall(r'<tr data-lever="([a-z_]+)">', html)
    assert shown == [lever["phase"] for lever in levers] and shown[0] == "queue"
    assert re.search(
        r'id="biggest-lever">The biggest lever now is <span class="chip">.*?</span>queue', html
    )
    assert 'name="changes"' in html and ">queue*0.5</textarea>" in html
    assert idle.status_code == 200 and "no lever to rank" in idle.text
