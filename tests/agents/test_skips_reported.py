"""An agent's status report carries the due runs its scheduler did not start; the server
keeps them per vantage, for the targets it knows, and reads them strictly."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.agents.wire import CONFIG_PATH, STATUS_PATH
from app.web.deps import agents_of
from tests.agents.support import FRA, agent
from tests.helpers import parsed

pytestmark = pytest.mark.anyio


def skipped_samples(text: str) -> dict[tuple[str, str, str], float]:
    """Every ``phasewatch_runs_skipped_total`` sample: (target, vantage, reason) → value."""
    return {
        (s.labels["target"], s.labels["vantage"], s.labels["reason"]): s.value
        for s in parsed(text).get("phasewatch_runs_skipped_total", [])
    }


async def test_an_agents_skips_are_kept_for_known_targets_and_shown_on_metrics(
    client: httpx.AsyncClient, app: FastAPI
) -> None:
    report = {
        "pending": 0,
        "skipped": {"translate": {"woke_late": 3, "running": 1}, "ghost": {"late": 9}},
    }
    answer = await client.post(STATUS_PATH, json=report, headers=agent("fra-1", FRA))
    assert answer.status_code == 204, answer.text
    assert agents_of(app).book.get("fra-1").skipped == {"translate": {"woke_late": 3, "running": 1}}
    # Fetching the assignment counts as being seen and keeps what was reported.
    assert (await client.get(CONFIG_PATH, headers=agent("fra-1", FRA))).is_success
    assert skipped_samples((await client.get("/metrics")).text) == {
        ("translate", "fra-1", "running"): 1.0,
        ("translate", "fra-1", "woke_late"): 3.0,
    }
    # An older agent's report has no counts: none are kept from before (it restarted).
    assert (await client.post(STATUS_PATH, json={}, headers=agent("fra-1", FRA))).is_success
    assert agents_of(app).book.get("fra-1").skipped == {}


@pytest.mark.parametrize(
    "skipped",
    [
        {"translate": {"slow": 1}},
        {"translate": {"late": -1}},
        {"translate": {"late": True}},
        {"translate": {"late": "2"}},
        {"translate": 3},
    ],
    ids=["unknown-reason", "negative", "a-bool", "a-string", "not-by-reason"],
)
async def test_skips_in_a_status_report_are_read_strictly(
    client: httpx.AsyncClient, app: FastAPI, skipped: dict[str, Any]
) -> None:
    report = {"skipped": skipped}
    answer = await client.post(STATUS_PATH, json=report, headers=agent("fra-1", FRA))
    assert answer.status_code == 422, answer.text
    assert agents_of(app).book.get("fra-1").skipped == {}
