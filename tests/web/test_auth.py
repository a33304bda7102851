"""Writes need the bearer token; without one only a loopback-bound server takes writes, and
`serve` will not bind anything else."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.config import Settings
from app.web.auth import WRITE_METHODS, is_loopback, token_matches
from tests.apiapp import TOKEN, Api, api, http_routes, minutes_ago, targets
from tests.clirun import run_cli

SILENCE = {"matchers": [{"name": "target", "value": "chat"}], "duration": "1h", "createdBy": "me"}


@pytest.fixture
def guarded(db_url: str, tmp_path: Path) -> Iterator[Api]:
    with api(db_url, tmp_path, targets("chat"), token=TOKEN) as served:
        yield served


def write_routes(served: Api) -> list[tuple[str, str]]:
    """Every (method, path) that changes something under /api/v1, ids filled in. Agents'
    pushes take their vantage's token instead (tests/agents/test_api.py); a what-if is a
    read that takes its changes as a body, and needs none (tests/web/test_api_whatif.py)."""
    return [
        (method, re.sub(r"\{[^}]+\}", str(uuid.uuid4()), path))
        for method, path in http_routes(served.app)
        if method in WRITE_METHODS
        and path.startswith("/api/v1")
        and not path.startswith("/api/v1/agent/")
        and not path.endswith("/whatif")
    ]


def test_every_write_route_refuses_a_request_without_the_token(guarded: Api) -> None:
    routes = write_routes(guarded)
    assert ("POST", "/api/v1/silences") in routes and len(routes) >= 3
    for method, path in routes:
        response = guarded.client.request(method, path, json={})
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["detail"] == "a bearer token is required for writes"


@pytest.mark.parametrize(
    "authorization",
    [
        f"Bearer {TOKEN}x",
        f"Bearer {TOKEN[:-1]}",
        "Bearer " + "0" * len(TOKEN),
        f"Bearer {TOKEN.upper()}",
        "Bearer ä".encode(),
    ],
)
def test_a_wrong_token_is_401_invalid_token(guarded: Api, authorization: str | bytes) -> None:
    response = guarded.client.post(
        "/api/v1/silences", json=SILENCE, headers={"Authorization": authorization}
    )
    assert response.status_code == 401
    assert (
        response.headers["www-authenticate"] == 'Bearer realm="phasewatch", error="invalid_token"'
    )
    assert guarded.client.get("/api/v1/silences").json() == []


@pytest.mark.parametrize("authorization", [TOKEN, f"Basic {TOKEN}", f"Token {TOKEN}", "Bearer"])
def test_a_token_not_sent_as_bearer_is_401(guarded: Api, authorization: str) -> None:
    response = guarded.client.post(
        "/api/v1/silences", json=SILENCE, headers={"Authorization": authorization}
    )
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer realm="phasewatch"'


def test_the_right_token_writes(guarded: Api) -> None:
    guarded.failing("chat", "eu", 4, minutes_ago(10))
    (alert,) = guarded.client.get("/api/v1/alerts").json()["items"]
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    made = guarded.client.post("/api/v1/silences", json=SILENCE, headers=bearer)
    assert made.status_code == 201
    path = f"/api/v1/silences/{made.json()['id']}"
    assert guarded.client.delete(path, headers=bearer).status_code == 200
    ack = f"/api/v1/alerts/{alert['id']}/acknowledge"
    assert guarded.client.post(ack, json={"by": "me"}, headers=bearer).status_code == 200
    # Lower-case scheme, as some clients send it.
    lower = {"Authorization": f"bearer {TOKEN}"}
    assert guarded.client.post("/api/v1/silences", json=SILENCE, headers=lower).status_code == 201


def test_reads_need_no_token(guarded: Api) -> None:
    for path in ("/api/v1/alerts", "/api/v1/silences", "/metrics", "/healthz"):
        assert guarded.client.get(path).status_code == 200, path


def test_openapi_marks_the_write_routes_as_needing_the_token(guarded: Api) -> None:
    spec: dict[str, Any] = guarded.client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for method, path in write_routes(guarded):
        template = next(p for p in spec["paths"] if re.fullmatch(_pattern(p), path))
        assert spec["paths"][template][method.lower()]["security"] == [{"HTTPBearer": []}]
    assert "security" not in spec["paths"]["/api/v1/alerts"]["get"]


def _pattern(template: str) -> str:
    return re.sub(r"\\\{[^}]+\\\}", "[^/]+", re.escape(template))


@pytest.mark.parametrize(("host", "writes"), [("127.0.0.1", 201), ("0.0.0.0", 403)])
def test_without_a_token_only_a_loopback_bound_server_takes_writes(
    db_url: str, tmp_path: Path, host: str, writes: int
) -> None:
    with api(db_url, tmp_path, targets("chat"), host=host) as served:
        response = served.client.post("/api/v1/silences", json=SILENCE)
        assert response.status_code == writes, response.text
        assert served.client.get("/api/v1/silences").status_code == 200
    if writes == 403:
        assert "PHASEWATCH_API_TOKEN" in response.json()["detail"]


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_an_empty_or_blank_token_counts_as_none(db_url: str, tmp_path: Path, blank: str) -> None:
    with api(db_url, tmp_path, targets("chat"), host="0.0.0.0", token=blank) as served:
        assert served.client.post("/api/v1/silences", json=SILENCE).status_code == 403


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.5", False),
        ("10.0.0.1", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("given", "expected", "matches"),
    [
        ("abc", "abc", True),
        ("abc", "abd", False),
        ("ab", "abc", False),
        ("abcd", "abc", False),
        ("", "abc", False),
        ("ä", "ä", True),
    ],
)
def test_token_comparison(given: str, expected: str, matches: bool) -> None:
    assert token_matches(given, expected) is matches


def test_the_token_is_masked_in_settings() -> None:
    settings = Settings(api_token=TOKEN)
    assert TOKEN not in repr(settings) and TOKEN not in str(settings.model_dump())


# serve --------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "::", "example.com"])
def test_serve_refuses_to_bind_beyond_loopback_without_a_token(
    host: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PHASEWATCH_API_TOKEN", raising=False)
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets: []\n")
    code, out, err = run_cli(["serve", "--config", str(config), "--host", host], capsys)
    assert code == 1 and out == ""
    assert err == (
        f"phasewatch: error: refusing to bind {host} without PHASEWATCH_API_TOKEN: anyone who "
        "can reach it could acknowledge alerts and silence them; set a token or bind 127.0.0.1\n"
    )


def test_serve_binds_beyond_loopback_with_a_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PHASEWATCH_API_TOKEN", TOKEN)
    missing = tmp_path / "missing.yaml"
    # Past the token check: it stops at the next thing it checks, the targets file.
    code, _, err = run_cli(["serve", "--config", str(missing), "--host", "0.0.0.0"], capsys)
    assert code == 1
    assert "PHASEWATCH_API_TOKEN" not in err and f"{missing}: cannot read" in err
