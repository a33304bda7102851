"""Every read route of a real ``serve`` answers within a bound while its PostgreSQL is frozen
(SIGSTOP: connections stay acknowledged, nobody answers) or stopped: a 503 with
``Retry-After`` and a detail, or what it answers without the database; never a 500, never a
hang. The routes are the app's own, so a new one is covered (or this test asks for its
path parameter). Once the database is back, every route answers as before.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from app.config import Settings
from app.demo.sim.server import SimServer
from app.main import create_app
from app.web.unavailable import BOUND_S
from tests.faults.support import stop, stored
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres]

TARGET, OTHER = "api", "web"
# A hard limit that stops a hang, well above the documented bound (BOUND_S) on a busy machine.
ANSWER_HARD_S = 15.0
# Query parameters a route needs to reach the database rather than answer 422 before it.
QUERIES = {"/api/v1/compare": {"targets": f"{TARGET},{OTHER}"}}


def two_targets(directory: Path, sim: SimServer) -> Path:
    entries = "".join(
        f"  - {{name: {name}, url: '{sim.url}/health', interval: 1s, samples: 1}}\n"
        for name in (TARGET, OTHER)
    )
    path = directory / "phasewatch.yaml"
    path.write_text(f"targets:\n{entries}")
    return path


def read_routes(tmp_path: Path) -> list[str]:
    """The path of every GET route the app serves (built, never started)."""
    config = tmp_path / "routes.yaml"
    config.write_text("targets: []\n")
    settings = Settings(
        config=config, database_url=f"sqlite:///{tmp_path}/routes.db", spool_dir=tmp_path / "s"
    )
    app = create_app(settings)
    paths = {
        route.path for route in iter_route_contexts(app.routes) if "GET" in (route.methods or ())
    }
    return sorted(paths)


def concrete(path: str, run_id: str) -> str:
    values = {"name": TARGET, "run_id": run_id, "alert_id": str(uuid.uuid4())}
    values["silence_id"] = str(uuid.uuid4())

    def value(match: re.Match[str]) -> str:
        assert match[1] in values, f"give the read test a value for {{{match[1]}}} in {path}"
        return values[match[1]]

    return re.sub(r"\{(\w+)(?::\w+)?\}", value, path)


def ask_all(served: Serve, paths: list[str]) -> dict[str, tuple[httpx.Response, float]]:
    """Every path at once, as a dashboard and a few API clients would; answer and seconds."""

    def ask(path: str) -> tuple[httpx.Response, float]:
        began = time.monotonic()
        query = QUERIES.get(path.split("?")[0], {})
        response = httpx.get(f"{served.base_url}{path}", params=query, timeout=ANSWER_HARD_S)
        return response, time.monotonic() - began

    with ThreadPoolExecutor(len(paths)) as pool:
        return dict(zip(paths, pool.map(ask, paths), strict=True))


@contextmanager
def database_away(cluster: PgCluster, how: str) -> Iterator[None]:
    """Frozen or stopped for the block; always thawed or started again."""
    if how == "frozen":
        cluster.freeze()
    else:
        cluster.stop()
    try:
        yield
    finally:
        if how == "frozen":
            cluster.thaw()
        elif not cluster.running:
            cluster.start()


def assert_bounded(
    answers: dict[str, tuple[httpx.Response, float]], before: dict[str, int], served: Serve
) -> None:
    for path, (response, took) in answers.items():
        where = f"{path}: {response.status_code} after {took:.1f} s"
        assert took < ANSWER_HARD_S, where
        if response.status_code == before[path]:
            continue  # answered without the database (/healthz, /metrics, /docs, a 401)
        assert response.status_code == 503, f"{where}\n{response.text[:500]}\n{served.output()}"
        assert response.headers["Retry-After"].isdigit(), where
        if path.startswith("/api/"):
            assert "database" in response.json()["detail"], where
        else:
            assert "Database unavailable" in response.text, where


@pytest.mark.parametrize("how", ["frozen", "stopped"])
def test_every_read_answers_503_within_the_bound_while_the_database_is_away(
    how: str, tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = two_targets(tmp_path, sim)
    served = serve("serve", config, PHASEWATCH_DATABASE_URL=cluster.url)
    served.wait_ready()
    eventually(lambda: len(stored(cluster.url)) >= 2, 30, "two runs stored")
    paths = [concrete(path, stored(cluster.url)[0].id) for path in read_routes(tmp_path)]
    assert {"/", "/api/v1/targets", "/api/v1/runs", "/metrics", "/healthz"} <= set(paths)

    before = {path: response.status_code for path, (response, _) in ask_all(served, paths).items()}
    # 401: the agents' route without a token; 404: an alert or silence id nobody has.
    assert {p: s for p, s in before.items() if s not in (200, 401, 404)} == {}
    with database_away(cluster, how):
        first = ask_all(served, paths)  # some on connections that no longer answer
        again = ask_all(served, paths)  # the outage known: answered sooner
        assert_bounded(first, before, served)
        assert_bounded(again, before, served)
        for path in ("/", "/api/v1/targets", "/api/v1/runs", f"/targets/{TARGET}"):
            assert again[path][0].status_code == 503, path
        for path in ("/healthz", "/metrics"):
            assert again[path][0].status_code == 200, path

    # Back: every route answers as before (handlers left behind on the frozen one ended).
    eventually(
        lambda: {p: r.status_code for p, (r, _) in ask_all(served, paths).items()} == before,
        60,
        "every route answers as before",
    )
    # No request failed in the server either (a background loop may log the outage its way).
    output = served.output()
    assert "Exception in ASGI application" not in output and '" 500' not in output, output
    assert stop(served) == 0
    assert BOUND_S < ANSWER_HARD_S
