"""The app agents push to, and a client on it: test_api's targets (its agents' tokens and
the key the server keeps); a module with targets of its own defines ``app`` again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from app.config import Settings, load_targets
from app.main import create_app
from app.web.deps import agents_of, service_of
from tests.agents.support import FRA, SECRET, TARGETS


@pytest.fixture
async def app(db_url: str, tmp_path: Path) -> AsyncIterator[FastAPI]:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(TARGETS)
    # The server has the key too: even so, agents are sent the template.
    targets = load_targets(path, {"PW_AGENT_FRA": FRA, "OPENAI_API_KEY": SECRET})
    settings = Settings(config=path, database_url=db_url, spool_dir=tmp_path / "spool")
    built = create_app(settings, targets)
    yield built
    assert agents_of(built).evaluations.wait_idle(30)  # pushed runs' evaluations are done
    service_of(built).engine.dispose()


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        yield client
