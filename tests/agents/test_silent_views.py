"""``vantage_silent``'s one rule, seen three ways at the same times: ``GET /api/v1/vantages``
(``silent``), the vantages page, and the alert the silence check raises — the start's grace
included (an agent not heard from 8 s after the start is not silent anywhere)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.alerts.state import State
from app.config import Settings, load_targets
from app.main import create_app
from app.web.deps import agents_of, service_of

pytestmark = pytest.mark.anyio
TOKEN = "fra-token-0123456789abcdef"
TARGETS = f"""
vantage: server-1
vantages:
  fra-1: {{token: {TOKEN}}}
targets:
  - name: edge
    url: http://edge.invalid/
    interval: 1s
    vantages: [fra-1, server-1]
"""


@pytest.fixture
async def app(db_url: str, tmp_path: Path) -> AsyncIterator[FastAPI]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS)
    settings = Settings(config=path, database_url=db_url, spool_dir=tmp_path / "spool")
    built = create_app(settings, load_targets(path, {}))
    yield built
    service_of(built).engine.dispose()


class Views:
    """The check, the API and the page of one app, on one test clock."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch):
        self.client = client
        self.service = service_of(app)
        self.book = agents_of(app).book
        self.now = self.book.since
        self.alert = State.INACTIVE
        watch = self.service.upkeep.vantages
        assert watch is not None
        self.watch = watch
        for owner in (watch, self.service.alerts):
            monkeypatch.setattr(owner, "clock", lambda: self.now)
        monkeypatch.setattr(watch, "leading", lambda: True)

    async def at(self, seconds: float) -> tuple[bool, bool, bool]:
        """fra-1 silent per the API, per the page, and its alert firing, ``seconds`` after
        the server's start (the check run first, as its loop would at that time)."""
        self.now = self.book.since + timedelta(seconds=seconds)
        for moved in self.watch.check():  # type: ignore[attr-defined]
            if moved.identity.vantage == "fra-1" and moved.moved:
                self.alert = moved.after
        listed = (await self.client.get("/api/v1/vantages")).json()
        api = next(v["silent"] for v in listed if v["name"] == "fra-1")
        page = (await self.client.get("/vantages")).text
        row = re.search(r'<tr data-vantage="fra-1">\s*<td>fra-1</td>\s*<td>(.*?)</td>', page)
        assert row is not None, page
        return api, "<strong>silent</strong>" in row.group(1), self.alert is State.FIRING

    def pushed(self, seconds: float) -> None:
        self.book.pushed("fra-1", self.book.since + timedelta(seconds=seconds), None, None)


async def test_the_api_the_page_and_the_alert_agree_on_silence_at_every_time(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        views = Views(app, client, monkeypatch)
        assert await views.at(8) == (False, False, False)  # the start's grace, everywhere
        assert await views.at(62) == (False, False, False)  # 2 s past it: within 3 intervals
        assert await views.at(64) == (True, True, True)  # 4 s: silent, and the alert fires
        assert await views.at(65) == (True, True, True)
        views.pushed(65.5)
        assert await views.at(66) == (False, False, False)  # heard: its alert resolves
        assert "reporting again" in (await client.get("/vantages")).text
