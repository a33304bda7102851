"""The deadline SLO on every surface: the API's breakdowns, the target page and /metrics
show the error budget left and each window's burn rate, computed from the stored runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from app.runtime.targetsync import sync_targets_file
from tests.apiapp import TOKEN, Api, api, minutes_ago, targets
from tests.runfactory import make_run, record_of
from tests.web.test_metrics import parsed, scrape, value


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Api]:
    config = targets("edge", deadline_ms=1500).targets + targets("home").targets
    with api(db_url, tmp_path, targets().model_copy(update={"targets": config})) as served:
        served.client.headers["Authorization"] = f"Bearer {TOKEN}"
        sync_targets_file(served.service.sessions, served.service.targets)  # as serve's start
        rng = np.random.default_rng(4)
        # Six hours of 15-minute runs of 20 samples; the last hour's four runs miss 2 each.
        for k in range(24):
            at = minutes_ago(5 + 15 * k)
            served.store(record_of(make_run(rng, at, target="edge", censored=2 if k < 4 else 0)))
            served.store(record_of(make_run(rng, at, target="home")))
        yield served


EXPECTED = {"5m": 10.0, "30m": 10.0, "1h": 10.0, "6h": 1.67, "3d": 1.67}  # 8/80, 8/480


def test_the_breakdown_carries_the_slo_of_its_vantage_and_of_all_pooled(served: Api) -> None:
    for vantage in ("eu", None):
        params = {"vantage": vantage} if vantage else {}
        found = served.client.get("/api/v1/targets/edge/breakdown", params=params).json()
        slo = found["slo"]
        assert slo["objective"] == 0.99 and slo["budget_window"] == "30d"
        rates = {w: round(r, 2) for w, r in slo["burn_rates"].items() if w != "5m"}
        assert rates == {w: r for w, r in EXPECTED.items() if w != "5m"}
        assert slo["budget_left"] == pytest.approx(1 - 8 / (0.01 * 480), abs=1e-4)
        assert slo["burning"] == ["warning"]  # 1.67× over 3 days: a ticket's worth, no page


def test_a_target_without_a_deadline_has_no_slo(served: Api) -> None:
    assert served.client.get("/api/v1/targets/home/breakdown").json()["slo"] is None


def test_the_target_detail_has_the_slo_in_each_breakdown(served: Api) -> None:
    (breakdown,) = served.client.get("/api/v1/targets/edge").json()["breakdowns"]
    assert breakdown["vantage"] == "eu"
    assert round(breakdown["slo"]["burn_rates"]["1h"], 2) == 10.0


def test_the_target_page_shows_budget_left_and_burn_rates(served: Api) -> None:
    page = served.client.get("/targets/edge").text
    assert "Deadline SLO" in page and "-66.7 %" in page
    assert "10×" in page and "1.67×" in page and "ticket" in page
    assert "Deadline SLO" not in served.client.get("/targets/home").text


def test_metrics_expose_budget_left_and_burn_rate_per_window(served: Api) -> None:
    found = parsed(scrape(served))
    where = {"target": "edge", "vantage": "eu"}
    budget = value(found, "phasewatch_slo_error_budget_remaining_ratio", **where)
    assert budget == pytest.approx(1 - 8 / 4.8, abs=1e-4)
    assert value(found, "phasewatch_slo_burn_rate", **where, window="1h") == pytest.approx(10.0)
    assert value(found, "phasewatch_slo_burn_rate", **where, window="6h") == pytest.approx(1.67)
    targets_seen = {s.labels["target"] for s in found["phasewatch_slo_burn_rate"]}
    assert targets_seen == {"edge"}
