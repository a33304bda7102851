"""A target's objectives on every surface: the API's breakdowns and run detail, the target
page and /metrics show each objective's budget and burn rates and goodput, computed from
the stored runs and samples."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.runtime.targetsync import sync_targets_file
from app.store.records import RunRecord
from tests.apiapp import TOKEN, Api, api, minutes_ago, targets
from tests.runfactory import make_run, record_of, streamed_sample
from tests.web.test_metrics import parsed, scrape, value

OBJECTIVES = {"availability": {"target": 99.5}, "ttft_ms": {"p": 99, "below": 300}}
MS = 1_000_000


def with_ttft(record: RunRecord, slow: int) -> RunRecord:
    """Its ok samples' first token at 200 ms, the first ``slow`` of them at 400 ms."""
    samples = [
        replace(s, marks={"first_answer_token": (400 if s.idx < slow else 200) * MS})
        if s.status == "ok"
        else s
        for s in record.samples
    ]
    return replace(record, samples=tuple(samples))


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Api]:
    edge = targets("edge", kind="openai", alerts={"objectives": OBJECTIVES}).targets
    config = targets().model_copy(update={"targets": edge + targets("home").targets})
    with api(db_url, tmp_path, config) as served:
        served.client.headers["Authorization"] = f"Bearer {TOKEN}"
        sync_targets_file(served.service.sessions, served.service.targets)  # as serve's start
        rng = np.random.default_rng(4)
        # Six hours of 15-minute runs of 20 timed samples; in the last hour's four runs
        # 2 more samples failed and 3 got their first token late.
        for k in range(24):
            bad = k < 4
            run = make_run(rng, minutes_ago(5 + 15 * k), target="edge", failed=2 if bad else 0)
            served.store(with_ttft(record_of(run), 3 if bad else 0))
            served.store(record_of(make_run(rng, minutes_ago(5 + 15 * k), target="home")))
        yield served


def test_the_breakdown_carries_each_objective_and_goodput(served: Api) -> None:
    found = served.client.get("/api/v1/targets/edge/breakdown").json()
    by_metric = {o["metric"]: o for o in found["objectives"]}
    availability, ttft = by_metric["availability"], by_metric["ttft_ms"]
    assert availability["objective"] == 0.995 and availability["below_ms"] is None
    assert availability["burn_rates"]["1h"] == pytest.approx(8 / 88 / 0.005, abs=0.01)
    assert availability["burn_rates"]["6h"] == pytest.approx(8 / 488 / 0.005, abs=0.01)
    assert ttft["objective"] == 0.99 and ttft["below_ms"] == 300
    assert ttft["burn_rates"]["1h"] == pytest.approx(15.0)  # 12 of 80 over 300 ms
    assert availability["burning"] == ttft["burning"] == ["critical", "warning"]
    assert found["goodput"]["1h"] == pytest.approx(68 / 88, abs=1e-4)
    assert found["goodput"]["6h"] == pytest.approx(468 / 488, abs=1e-4)


def test_a_target_without_objectives_has_none(served: Api) -> None:
    found = served.client.get("/api/v1/targets/home/breakdown").json()
    assert found["objectives"] == [] and found["goodput"] is None


def test_the_target_detail_carries_them_per_vantage(served: Api) -> None:
    (breakdown,) = served.client.get("/api/v1/targets/edge").json()["breakdowns"]
    assert {o["metric"] for o in breakdown["objectives"]} == {"availability", "ttft_ms"}


def test_a_run_says_how_it_met_each_objective_and_its_goodput(served: Api) -> None:
    (newest, *_) = served.client.get("/api/v1/runs", params={"target": "edge"}).json()["items"]
    found = served.client.get(f"/api/v1/runs/{newest['id']}").json()
    assert {o["metric"]: (o["counted"], o["bad"]) for o in found["objectives"]} == {
        "availability": (22, 2),
        "ttft_ms": (20, 3),
    }
    assert found["goodput"] == pytest.approx(17 / 22)


def test_the_target_page_shows_objectives_and_goodput(served: Api) -> None:
    page = served.client.get("/targets/edge").text
    assert "Objectives" in page and "ttft_ms ≤ 300 ms for 99 %" in page
    assert "goodput" in page and "77.3 %" in page
    assert 'id="objectives"' not in served.client.get("/targets/home").text


def test_metrics_expose_objectives_and_goodput(served: Api) -> None:
    found = parsed(scrape(served))
    where = {"target": "edge", "vantage": "eu"}
    burn = "phasewatch_objective_burn_rate"
    assert value(found, burn, **where, objective="ttft_ms", window="1h") == pytest.approx(15.0)
    assert value(found, burn, **where, objective="availability", window="1h") == pytest.approx(
        8 / 88 / 0.005, abs=0.01
    )
    budget = value(
        found, "phasewatch_objective_error_budget_remaining_ratio", **where, objective="ttft_ms"
    )
    assert budget == pytest.approx(1 - 12 / (0.01 * 480), abs=1e-4)
    assert value(found, "phasewatch_goodput_ratio", **where, window="1h") == pytest.approx(
        68 / 88, abs=1e-4
    )
    assert {s.labels["target"] for s in found["phasewatch_goodput_ratio"]} == {"edge"}


def test_the_what_if_answers_for_the_latency_objectives_and_goodput(served: Api) -> None:
    response = served.client.post(
        "/api/v1/targets/edge/whatif", json={"changes": ["queue*4"], "resamples": 50}
    )
    assert response.status_code == 200, response.text
    by_metric = {o["metric"]: o for o in response.json()["objectives"]}
    assert set(by_metric) == {"ttft_ms", "goodput"}  # availability: no change answers a failure
    ttft = by_metric["ttft_ms"]
    assert ttft["below_ms"] == 300 and ttft["before"] > 0.9 and ttft["after"] == 0.0
    home = served.client.post("/api/v1/targets/home/whatif", json={"changes": ["queue*0.5"]})
    assert home.json()["objectives"] == []


def test_the_what_if_gives_each_objective_an_interval_and_a_burn(served: Api) -> None:
    response = served.client.post(
        "/api/v1/targets/edge/whatif", json={"changes": ["queue*4"], "resamples": 50}
    )
    by_metric = {o["metric"]: o for o in response.json()["objectives"]}
    ttft, goodput = by_metric["ttft_ms"], by_metric["goodput"]
    low, high = ttft["before_interval"]
    assert low <= ttft["before"] <= high and ttft["after_interval"] == [0.0, 0.0]
    assert ttft["target"] == 0.99
    assert ttft["burn_before"]["value"] == pytest.approx((1 - ttft["before"]) / 0.01)
    assert ttft["burn_after"] == {
        "value": pytest.approx(100.0),
        "interval": pytest.approx([100.0, 100.0]),
    }
    assert goodput["target"] is None and goodput["burn_before"] is None


def test_the_levers_rank_the_phases_for_each_objective_and_goodput(served: Api) -> None:
    found = served.client.get("/api/v1/targets/edge/levers").json()
    by_metric = {o["metric"]: o for o in found["objective_levers"]}
    assert set(by_metric) == {"ttft_ms", "goodput"}
    for lever in found["levers"]:
        assert {o["metric"] for o in lever["objectives"]} == {"ttft_ms", "goodput"}
    # Generation comes after the first token: never a lever of ttft.
    ttft = by_metric["ttft_ms"]
    assert "generation" not in [lever["phase"] for lever in ttft["levers"]]
    assert ttft["headline"].startswith("ttft_ms ≤ 300 ms, ")
    whatif = served.client.post("/api/v1/targets/edge/whatif", json={"changes": []}).json()
    assert whatif["objective_levers"] == found["objective_levers"]
    home = served.client.get("/api/v1/targets/home/levers").json()
    assert home["objective_levers"] == [] and home["levers"][0]["objectives"] == []


def test_the_target_page_names_each_objectives_biggest_lever(served: Api) -> None:
    page = served.client.get("/targets/edge").text
    assert 'id="objective-levers"' in page and "goodput, " in page
    assert 'id="objective-levers"' not in served.client.get("/targets/home").text


@pytest.fixture
def paced(db_url: str, tmp_path: Path) -> Iterator[Api]:
    """A target with a TPOT objective (40 ms): four runs of streamed answers of 11 tokens,
    TPOT 30, 50, 60 and 90 ms."""
    rhythm = {"objectives": {"tpot_ms": {"p": 99, "below": 40}}}
    config = targets("pace", kind="openai", alerts=rhythm)
    with api(db_url, tmp_path, config) as served:
        served.client.headers["Authorization"] = f"Bearer {TOKEN}"
        sync_targets_file(served.service.sessions, served.service.targets)
        for k, tpot in enumerate((30.0, 50.0, 60.0, 90.0)):
            at = minutes_ago(5 + 15 * k)
            run = record_of(make_run(np.random.default_rng(k), at, target="pace", n=1))
            sample = streamed_sample(0, 100.0, 100.0 + 10 * tpot, 11, 2 * tpot, at)
            served.store(replace(run, samples=(sample,)))
        yield served


def test_the_what_if_and_levers_answer_for_a_tpot_objective(paced: Api) -> None:
    response = paced.client.post(
        "/api/v1/targets/pace/whatif", json={"changes": ["generation*0.5"], "resamples": 50}
    )
    assert response.status_code == 200, response.text
    by_metric = {o["metric"]: o for o in response.json()["objectives"]}
    assert by_metric["tpot_ms"]["before"] == 0.25 and by_metric["tpot_ms"]["after"] == 0.75
    assert not [n for n in response.json()["notes"] if "not predicted" in n]
    levers = paced.client.get("/api/v1/targets/pace/levers").json()["objective_levers"]
    tpot = next(o for o in levers if o["metric"] == "tpot_ms")
    assert [lever["phase"] for lever in tpot["levers"]] == ["generation"]
