"""POST /api/v1/targets/{name}/whatif and GET …/levers on SQLite and PostgreSQL, over stored
runs: the answer checked against numpy on the same samples, every 4xx with its detail, and
never a 5xx, whatever the body holds."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.web.whatifrequest import MAX_CHANGES, MAX_RESAMPLES
from tests.apiapp import TOKEN, Api, api, targets
from tests.runfactory import LLM, make_run, record_of

NOW = datetime.now(UTC).replace(microsecond=0)
RUNS = 24
EVERY = timedelta(minutes=30)
EDGE = LLM | {"network": 5.0, "generation": 120.0}  # shorter round trip, slower generation


@dataclass
class Site:
    api: Api
    totals: np.ndarray  # chat's end-to-end per sample, ms
    queue: np.ndarray  # chat's queue per sample, ms

    def post(self, name: str, body: Any, **headers: str) -> Any:
        return self.api.client.post(f"/api/v1/targets/{name}/whatif", json=body, headers=headers)

    def whatif(self, *changes: Any, **fields: Any) -> dict[str, Any]:
        response = self.post("chat", {"changes": list(changes), **fields})
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        return found


def fill(served: Api) -> Site:
    rng = np.random.default_rng(16)
    totals, queue = [], []
    for k in range(RUNS):
        at = NOW - (RUNS - k) * EVERY
        run = make_run(rng, at, target="chat")
        totals += list(run.totals)
        queue += list(run.phases[:, run.phase_names.index("queue")])
        served.store(record_of(run))
        served.store(record_of(make_run(rng, at, EDGE, target="chat-edge", vantage="us")))
    served.failing("idle", "eu", 2, NOW - timedelta(hours=1))  # no timed sample
    return Site(served, np.array(totals), np.array(queue))


@pytest.fixture(scope="module")
def site(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp_path = tmp_path_factory.mktemp("whatif")
    with api(module_db_url, tmp_path, targets("chat", "chat-edge", "idle")) as served:
        yield fill(served)


def test_the_identity_change_reproduces_the_measured_quantiles(site: Site) -> None:
    found = site.whatif()
    for q in (50, 90, 99):
        measured = float(np.percentile(site.totals, q))
        for side in ("before", "after"):
            low, high = found[side][f"p{q}_ms"]["interval"]
            assert low <= measured <= high, (side, q, measured, low, high)
    assert found["before"]["samples"] == RUNS * 20 and found["before"]["runs"] == RUNS


def test_removing_the_queue_lowers_the_median_by_about_the_queue(site: Site) -> None:
    found = site.whatif("queue=0")
    expected = float(np.percentile(site.totals - site.queue, 50))
    low, high = found["after"]["p50_ms"]["interval"]
    assert low <= expected <= high
    assert found["before"]["dominant"] == "queue" and found["after"]["dominant"] != "queue"
    assert "queue" not in {p for p, share in found["after"]["shares"].items() if share}


def test_changes_as_json_answer_as_the_same_changes_in_the_clis_language(site: Site) -> None:
    written = site.whatif("network=15ms", "generation*1.5", "queue=0", "deadline=400ms")
    as_json = site.whatif(
        {"phase": "network", "set_ms": 15},
        {"phase": "generation", "scale": 1.5},
        {"phase": "queue", "set_ms": 0},
        {"deadline_ms": 400},
    )
    assert written["before"] == as_json["before"] and written["after"] == as_json["after"]
    assert written["after"]["miss_rate"] is not None


def test_a_phase_taken_from_another_target_brings_its_distribution(site: Site) -> None:
    slower = site.whatif("generation=@chat-edge")
    same = site.whatif({"phase": "generation", "from": "chat-edge", "vantage": "us"})
    assert slower["after"]["p50_ms"]["value"] > slower["before"]["p50_ms"]["value"]
    assert slower["after"] == same["after"]


def test_the_answer_carries_curves_and_the_levers(site: Site) -> None:
    found = site.whatif("queue=0", resamples=50)
    curves = found["curves"]
    assert len(curves["percentiles"]) == len(curves["before_ms"]) == len(curves["after_ms"])
    assert curves["before_ms"] == sorted(curves["before_ms"])
    assert found["levers"][0]["phase"] == "queue" and found["resamples"] == 50


def test_levers_rank_the_phase_that_holds_the_most_time_first(site: Site) -> None:
    response = site.api.client.get("/api/v1/targets/chat/levers")
    assert response.status_code == 200, response.text
    levers = response.json()["levers"]
    assert levers[0]["phase"] == "queue"
    assert {lever["phase"] for lever in levers} >= {"queue", "generation", "network"}


def test_a_vantage_keeps_to_its_samples(site: Site) -> None:
    pooled = site.whatif()
    eu = site.whatif(vantage="eu")
    assert eu["before"] == pooled["before"]  # chat is probed from eu only
    assert site.post("chat-edge", {"changes": [], "vantage": "us"}).status_code == 200


def test_a_bad_change_is_422_naming_it(site: Site) -> None:
    for change in ("network=fast", "warp*2", "cold=120%:800ms", {"phase": "network"}):
        response = site.post("chat", {"changes": ["queue=0", change]})
        assert response.status_code == 422, (change, response.text)
        detail = response.json()["detail"]
        assert detail.startswith("change ") and (
            "network" in detail or "warp" in detail or "cold" in detail
        ), detail


def test_a_donor_no_one_knows_is_422_naming_the_change(site: Site) -> None:
    response = site.post("chat", {"changes": ["generation=@nowhere"]})
    assert response.status_code == 422
    assert "generation=@nowhere" in response.json()["detail"]


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"changes": "queue=0"},
        {"changes": [1]},
        {"changes": ["queue=0"] * (MAX_CHANGES + 1)},
        {"changes": [], "resamples": MAX_RESAMPLES + 1},
        {"changes": [], "resamples": 0},
        {"changes": [], "other": 1},
        {"changes": [], "from": "yesterday"},
        {"changes": [], "from": "2026-01-02T00:00:00"},
        {"changes": [], "from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"},
        {"changes": [], "vantage": ""},
        {"changes": ["queue=0\x00"]},
        {"changes": [{"phase": "network", "set_ms": -1}]},
        {"changes": [{"phase": "generation", "from": "chat\x00"}]},
        {"changes": [{"phase": "generation", "from": "chat-edge", "vantage": "us\x00"}]},
        {"changes": ["generation=@chat-edge/mars"]},
        {"changes": [{"phase": "generation", "scale": 1e308}, "deadline=1e308ms"]},
    ],
)
def test_a_body_that_is_not_valid_is_422_with_a_detail(site: Site, body: Any) -> None:
    response = site.post("chat", body)
    assert response.status_code == 422, (body, response.text)
    assert response.json()["detail"]


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b'{"changes": [{"phase": "network", "set_ms": Infinity}]}',
        b'{"changes": [{"phase": "generation", "scale": NaN}]}',
        b'{"changes": [], "resamples": 1e999}',
    ],
)
def test_a_body_that_is_not_json_or_not_finite_is_422(site: Site, content: bytes) -> None:
    response = site.api.client.post(
        "/api/v1/targets/chat/whatif",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422, response.text


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"phase": "network", "set_ms": 1e300}, "'set_ms' must be at most 86,400,000 ms"),
        ({"phase": "network", "set_ms": -1e300}, "must not be negative"),
        ({"phase": "generation", "scale": 1e300}, "'scale' must be at most 1,000"),
        ({"deadline_ms": 1e300}, "'deadline_ms' must be at most 86,400,000 ms"),
        ({"cold": {"fraction": 0.5, "min_ms": 0, "max_ms": 1e300}}, "'max_ms' must be at most"),
        ("network=100000000s", "at most 86,400,000 ms (a day)"),
        ("generation*5000", "the factor must be at most 1,000"),
    ],
    ids=["set_ms", "negative", "scale", "deadline", "cold", "duration-text", "factor-text"],
)
def test_an_absurd_number_is_422_naming_its_field(site: Site, change: Any, says: str) -> None:
    response = site.post("chat", {"changes": ["queue=0", change]})
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith("change ") and says in detail, detail


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"changes": [{"phase": "network", "set_ms": NaN}]}', "'set_ms': nan is not a number"),
        (b'{"changes": [{"deadline_ms": -Infinity}]}', "'deadline_ms': -inf is not a number"),
    ],
    ids=["nan", "minus-infinity"],
)
def test_a_number_that_is_not_finite_is_422_naming_its_field(
    site: Site, content: bytes, says: str
) -> None:
    headers = {"Content-Type": "application/json"}
    response = site.api.client.post("/api/v1/targets/chat/whatif", content=content, headers=headers)
    assert response.status_code == 422, response.text
    assert says in response.json()["detail"]


def test_an_unknown_target_or_vantage_is_404(site: Site) -> None:
    assert site.post("nobody", {"changes": []}).status_code == 404
    response = site.post("chat", {"changes": [], "vantage": "mars"})
    assert response.status_code == 404
    assert "mars" in response.json()["detail"]
    assert site.api.client.get("/api/v1/targets/nobody/levers").status_code == 404


def test_a_window_without_samples_is_409(site: Site) -> None:
    response = site.post("idle", {"changes": ["queue=0"]})
    assert response.status_code == 409
    assert "no timed samples" in response.json()["detail"]
    old = {"changes": [], "from": "2020-01-01T00:00:00Z", "to": "2020-01-02T00:00:00Z"}
    assert site.post("chat", old).status_code == 409
    assert site.api.client.get("/api/v1/targets/idle/levers").status_code == 409


def test_a_what_if_is_in_the_openapi_document(site: Site) -> None:
    paths = site.api.client.get("/openapi.json").json()["paths"]
    post = paths["/api/v1/targets/{name}/whatif"]["post"]
    assert {"200", "404", "409", "422"} <= set(post["responses"])
    assert "get" in paths["/api/v1/targets/{name}/levers"]


def test_a_what_if_needs_no_token_it_changes_nothing(db_url: str, tmp_path: Path) -> None:
    with api(db_url, tmp_path, targets("chat"), token=TOKEN) as guarded:
        rng = np.random.default_rng(3)
        for k in range(3):
            guarded.store(record_of(make_run(rng, NOW - (k + 1) * EVERY, target="chat")))
        response = guarded.client.post("/api/v1/targets/chat/whatif", json={"changes": []})
        assert response.status_code == 200, response.text
        assert guarded.client.get("/api/v1/targets/chat/levers").status_code == 200


def test_a_window_above_the_sample_bound_reads_its_newest_runs_and_says_so(
    db_url: str, tmp_path: Path
) -> None:
    five_and_a_part = 5 * 20 + 7  # five runs and a part of the sixth
    names = targets("chat", "chat-edge", "idle")
    with api(db_url, tmp_path, names, whatif_max_samples=five_and_a_part) as served:
        site = fill(served)
        found = site.whatif()
    assert found["before"]["samples"] == 5 * 20 and found["before"]["runs"] == 5
    assert any("newest runs" in note for note in found["notes"])
    newest = np.percentile(site.totals[-5 * 20 :], 50)
    low, high = found["before"]["p50_ms"]["interval"]
    assert low <= newest <= high


def test_the_levers_say_the_biggest_one_in_a_sentence(site: Site) -> None:
    found = site.api.client.get("/api/v1/targets/chat/levers", params={"vantage": "eu"}).json()
    assert found["headline"].startswith("the biggest lever now is queue")
    assert found["now"]["p50_ms"] == pytest.approx(
        np.quantile(site.totals, 0.5, method="inverted_cdf")
    )
    assert found["samples"] == RUNS * 20
