"""Bad input is a 4xx with a sentence, never a 5xx: times and durations past what dates
hold, NUL characters PostgreSQL refuses, overlong cursors. A real `serve` for the silences
that used to answer 500, and a real server on both databases for the rest."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.apiapp import Api, api, targets
from tests.runtime.test_serve import Served

pytestmark = pytest.mark.timeout(120)
MATCHERS = [{"name": "target", "value": "chat"}]
HUGE_DURATION = {"matchers": MATCHERS, "createdBy": "me", "duration": 5.187065291976479e16}
NEAR_9999 = {
    "matchers": MATCHERS,
    "createdBy": "me",
    "startsAt": "9999-12-31T23:00:00Z",
    "duration": "2h",
}


def silence(**fields: Any) -> dict[str, Any]:
    return {"matchers": MATCHERS, "createdBy": "me", "duration": "1h"} | fields


BAD_SILENCES = [
    pytest.param(HUGE_DURATION, "at most 3660 days", id="huge-duration"),
    pytest.param(NEAR_9999, "2200-01-01", id="start-near-9999"),
    pytest.param(silence(duration="99999999999d"), "at most 3660 days", id="huge-duration-text"),
    pytest.param(silence(duration="9" * 400), "more than 0", id="infinite-duration"),
    pytest.param(
        silence(duration=None, endsAt="9999-12-31T23:59:59-23:59"), "2200-01-01", id="end-9999"
    ),
    pytest.param(silence(startsAt="0001-01-01T00:00:00+01:00"), "1970-01-01", id="start-year-1"),
    pytest.param(silence(createdBy="a\x00b"), "createdBy", id="nul-created-by"),
    pytest.param(silence(comment="\x00"), "comment", id="nul-comment"),
    pytest.param(silence(matchers=[{"name": "target", "value": "\x00"}]), "value", id="nul-value"),
]


def assert_refused(response: httpx.Response, status: int, says: str = "") -> None:
    assert response.status_code == status, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and says in detail, detail


@pytest.mark.process
def test_serve_refuses_a_silence_past_what_dates_hold_with_422(
    tmp_path: Path, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PHASEWATCH_API_TOKEN", raising=False)
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets: []\n")
    server = served(config)
    server.wait_ready()
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as client:
        for body in (HUGE_DURATION, NEAR_9999):
            assert_refused(client.post("/api/v1/silences", json=body), 422)
        assert client.get("/api/v1/silences").json() == []


@pytest.fixture
def served_api(db_url: str, tmp_path: Path) -> Iterator[Api]:
    with api(db_url, tmp_path, targets("chat")) as serving:
        yield serving


@pytest.mark.parametrize(("body", "says"), BAD_SILENCES)
def test_a_silence_past_what_dates_or_databases_hold_is_422(
    served_api: Api, body: dict[str, Any], says: str
) -> None:
    assert_refused(served_api.client.post("/api/v1/silences", json=body), 422, says)
    assert served_api.client.get("/api/v1/silences").json() == []


def test_a_duration_that_is_not_a_number_is_422(served_api: Api) -> None:
    raw = '{"matchers": [{"name": "target", "value": "chat"}], "createdBy": "me", "duration": NaN}'
    headers = {"Content-Type": "application/json"}
    response = served_api.client.post("/api/v1/silences", content=raw, headers=headers)
    assert_refused(response, 422)


@pytest.mark.parametrize(
    ("path", "params", "status", "says"),
    [
        ("/api/v1/runs", {"to": "0001-01-01T00:00:00Z"}, 422, "1970-01-01"),
        ("/api/v1/samples", {"to": "-62135596800"}, 422, "1970-01-01"),
        ("/api/v1/samples.csv", {"from": "9999-12-31T00:00:00Z"}, 422, "2200-01-01"),
        ("/api/v1/targets/chat/history", {"to": "9999-12-31T23:59:59-23:59"}, 422, "out of range"),
        ("/api/v1/targets/chat", {"to": "0001-01-02T00:30:00+01:00"}, 422, "1970-01-01"),
        ("/api/v1/runs", {"target": "a\x00b"}, 422, "target"),
        ("/api/v1/samples", {"vantage": "\x00"}, 422, "vantage"),
        ("/api/v1/alerts", {"target": "\x00", "kind": "x"}, 422, "target"),
        ("/api/v1/alerts", {"kind": "\x00"}, 422, "kind"),
        ("/api/v1/runs", {"cursor": "x" * 600}, 422, "cursor"),
        ("/api/v1/targets/a%00b/breakdown", {}, 404, "no target"),
        ("/api/v1/targets/a%00b", {}, 404, ""),
        ("/api/v1/compare", {"targets": "chat,a\x00b"}, 404, "no target"),
    ],
)
def test_a_query_past_what_dates_or_databases_hold_is_4xx(
    served_api: Api, path: str, params: dict[str, str], status: int, says: str
) -> None:
    assert_refused(served_api.client.get(path, params=params), status, says)


def test_an_acknowledgement_with_a_nul_is_422(served_api: Api) -> None:
    path = "/api/v1/alerts/4af3cc2c-0000-4000-8000-000000000000/acknowledge"
    assert_refused(served_api.client.post(path, json={"by": "a\x00"}), 422, "by")
