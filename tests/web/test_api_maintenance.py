"""Maintenance windows through the API (token needed to write) and in the targets file:
listed, created, deleted; an alert of a target in an open window is not notified, and its
runs count for none of the error budgets (the deadline's, the objectives', goodput)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from app.clock import utcnow
from app.config import TargetsFile
from app.runtime.targetsync import sync_targets_file
from app.store.models import AlertRow, DeliveryRow
from app.store.reads.objectives import target_objectives
from app.store.reads.slo import target_slo
from tests.apiapp import TOKEN, Api, api, minutes_ago
from tests.runfactory import make_run, record_of
from tests.web.test_metrics import parsed, scrape, value

ALWAYS = {
    "weekly": [
        {"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "from": "00:00", "to": "24:00"}
    ]
}
FILE = TargetsFile.model_validate(
    {
        "notifiers": {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/hook"}},
        "targets": [
            {"name": name, "url": f"http://{name}.invalid/", "interval": "1m"}
            for name in ("alpha", "beta")
        ],
        "maintenance": [{"name": "alpha-always", "targets": ["al*"], **ALWAYS}],
    }
)
AUTH = {"Authorization": f"Bearer {TOKEN}"}
NOW_ON = {"cron": None, "duration": None}  # with ALWAYS: open all week
NEW = {
    "name": "db upgrade",
    "targets": ["beta"],
    "time_zone": "Europe/Berlin",
    "cron": "0 2 * * sat",
    "duration": "2h",
    "created_by": "ops",
}


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Api]:
    with api(db_url, tmp_path, FILE, token=TOKEN) as served:
        yield served


def windows(served: Api, **params: Any) -> list[dict[str, Any]]:
    response = served.client.get("/api/v1/maintenance", params=params)
    assert response.status_code == 200, response.text
    found: list[dict[str, Any]] = response.json()
    return found


def test_windows_are_created_listed_and_deleted_with_the_token(served: Api) -> None:
    assert [(w["source"], w["window"]["name"], w["active"]) for w in windows(served)] == [
        ("file", "alpha-always", True)
    ]
    made = served.client.post("/api/v1/maintenance", json=NEW, headers=AUTH)
    assert made.status_code == 201, made.text
    body = made.json()
    assert body["source"] == "api" and body["created_by"] == "ops"
    assert body["window"]["cron"] == "0 2 * * sat" and body["window"]["duration"] == 7200
    assert len(body["next_spans"]) == 1  # one Saturday in the next 7 days
    assert [w["window"]["name"] for w in windows(served)] == ["alpha-always", "db upgrade"]
    assert [w["window"]["name"] for w in windows(served, target="beta")] == ["db upgrade"]
    gone = served.client.delete(f"/api/v1/maintenance/{body['id']}", headers=AUTH)
    assert gone.status_code == 200, gone.text
    assert [w["window"]["name"] for w in windows(served)] == ["alpha-always"]
    again = served.client.delete(f"/api/v1/maintenance/{body['id']}", headers=AUTH)
    assert again.status_code == 404


def test_windows_page_by_limit_and_cursor_file_first_with_the_total_in_headers(
    served: Api,
) -> None:
    """The file's window, then three stored ones oldest first, walked one at a time; a
    window stored while walking comes after the cursor, so it is not missed."""
    for name in ("one", "two", "three"):
        made = served.client.post("/api/v1/maintenance", json=NEW | {"name": name}, headers=AUTH)
        assert made.status_code == 201, made.text
    first = served.client.get("/api/v1/maintenance", params={"limit": 1})
    assert first.headers["x-total-count"] == "4"
    walked = [w["window"]["name"] for w in first.json()]
    link = first.headers["link"]
    added = served.client.post("/api/v1/maintenance", json=NEW | {"name": "four"}, headers=AUTH)
    assert added.status_code == 201, added.text
    while link:
        response = served.client.get(link.split(">;")[0].strip("<"))
        assert response.status_code == 200, response.text
        assert response.headers["x-total-count"] == "5"
        walked += [w["window"]["name"] for w in response.json()]
        link = response.headers.get("link", "")
    assert walked == ["alpha-always", "one", "two", "three", "four"]
    only_beta = served.client.get("/api/v1/maintenance", params={"target": "beta", "limit": 3})
    assert only_beta.headers["x-total-count"] == "4" and "target=beta" in only_beta.headers["link"]
    assert served.client.get("/api/v1/maintenance?cursor=YWZ0ZXI").status_code == 422


def test_writes_without_the_token_are_401(served: Api) -> None:
    assert served.client.post("/api/v1/maintenance", json=NEW).status_code == 401
    unknown = "/api/v1/maintenance/5b0e3c1a-7d2f-4e8b-9a6c-1f2e3d4c5b6a"
    assert served.client.delete(unknown).status_code == 401
    assert served.client.delete(unknown, headers=AUTH).status_code == 404
    assert served.client.delete("/api/v1/maintenance/nope", headers=AUTH).status_code == 404


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"cron": "0 25 * * *"}, "cron"),
        ({"cron": "0 2 * *"}, "5 fields"),
        ({"time_zone": "Mars/Olympus"}, "unknown time zone"),
        ({"duration": None}, "needs a duration"),
        ({"targets": []}, "targets"),
        ({"created_by": ""}, "created_by"),
    ],
)
def test_a_bad_window_is_422_and_nothing_is_stored(
    served: Api, change: dict[str, Any], said: str
) -> None:
    response = served.client.post("/api/v1/maintenance", json=NEW | change, headers=AUTH)
    assert response.status_code == 422, response.text
    assert said in response.text
    assert len(windows(served)) == 1


def test_an_alert_in_an_open_window_is_not_notified(served: Api) -> None:
    served.failing("alpha", "eu", 4, minutes_ago(10))
    served.failing("beta", "eu", 4, minutes_ago(10))
    with served.service.sessions() as session:
        held = session.execute(select(AlertRow.target, DeliveryRow.status).join(AlertRow)).all()
    assert sorted(held) == [("alpha", "silenced"), ("beta", "pending")]


def test_a_window_made_through_the_api_holds_notifications_at_once(served: Api) -> None:
    always = NEW | ALWAYS | NOW_ON
    made = served.client.post("/api/v1/maintenance", json=always, headers=AUTH)
    assert made.status_code == 201, made.text
    served.failing("beta", "eu", 4, minutes_ago(10))
    with served.service.sessions() as session:
        held = session.execute(select(AlertRow.target, DeliveryRow.status).join(AlertRow)).all()
    assert held and {status for _, status in held} == {"silenced"}


def test_the_target_page_shades_its_windows_on_the_charts(served: Api) -> None:
    served.healthy("alpha", "eu", 3, minutes_ago(10))
    served.healthy("beta", "eu", 3, minutes_ago(10))
    page = served.client.get("/targets/alpha?range=24h")
    assert page.status_code == 200, page.text
    marks = page.text.split('id="alert-marks">')[1].split("</script>")[0]
    bands = [mark for mark in json.loads(marks) if "until" in mark]
    assert [mark["label"] for mark in bands] == ["maintenance: alpha-always"] * len(bands)
    assert bands and bands[-1]["until"] > bands[-1]["at"]
    assert 'class="muted maintenance"' in page.text and "alpha-always" in page.text
    other = served.client.get("/targets/beta?range=24h")
    assert other.status_code == 200 and "maintenance" not in other.text


def test_metrics_say_which_series_a_window_holds(served: Api) -> None:
    """``phasewatch_maintenance``: what the shipped Prometheus alerting rules hold by."""
    served.healthy("alpha", "eu", 1, minutes_ago(10))
    served.healthy("beta", "eu", 1, minutes_ago(10))
    found = parsed(scrape(served))
    assert value(found, "phasewatch_maintenance", target="alpha", vantage="eu") == 1
    assert value(found, "phasewatch_maintenance", target="beta", vantage="eu") == 0
    # Samples counted with the window that held their run: the burn-rate rules leave those
    # out after the window ends too.
    ok = {"vantage": "eu", "status": "ok"}
    assert value(found, "phasewatch_samples_total", target="alpha", **ok, maintenance="true") == 5
    assert (
        value(found, "phasewatch_samples_total", target="alpha", **ok, maintenance="false") is None
    )
    assert value(found, "phasewatch_samples_total", target="beta", **ok, maintenance="false") == 5
    made = served.client.post("/api/v1/maintenance", json=NEW | ALWAYS | NOW_ON, headers=AUTH)
    assert made.status_code == 201, made.text
    found = parsed(scrape(served))
    assert value(found, "phasewatch_maintenance", target="beta", vantage="eu") == 1


def test_the_error_budget_leaves_out_the_runs_in_a_window(db_url: str, tmp_path: Path) -> None:
    """Runs at eu in a window, runs at us not: eu's budget is untouched, us' is spent."""
    both = TargetsFile.model_validate(
        {
            "targets": [{"name": "slo", "url": "http://slo.invalid/", "deadline_ms": 500}],
            "maintenance": [{"name": "eu-work", "targets": ["slo"], "vantages": ["eu"], **ALWAYS}],
        }
    )
    rng = np.random.default_rng(3)
    with api(db_url, tmp_path, both) as served:
        sync_targets_file(served.service.sessions, served.service.targets)  # as serve's start
        for vantage, censored in (("eu", 5), ("us", 2)):
            for k in range(3):
                run = make_run(
                    rng, minutes_ago(30 - k), target="slo", vantage=vantage, censored=censored
                )
                served.store(record_of(run))
        windows = served.service.alerts.maintenance
        assert windows is not None
        with served.service.sessions() as session:
            kept = target_slo(session, "slo", utcnow(), windows.windows()) or {}
            plain = target_slo(session, "slo", utcnow()) or {}
        assert set(plain) == {"eu", "us", None}, plain
        assert plain["eu"].budget_left is not None and plain["eu"].budget_left < 1
        assert "eu" not in kept or kept["eu"].budget_left is None
        assert kept["us"].budget_left == plain["us"].budget_left
        assert kept[None].burn_rates == kept["us"].burn_rates != plain[None].burn_rates
        body = served.client.get("/api/v1/targets/slo/breakdown", params={"vantage": "eu"})
        assert body.status_code == 200, body.text
        assert body.json()["slo"] is None  # no run of eu counts


def test_the_objectives_budgets_and_goodput_leave_out_the_runs_in_a_window(
    db_url: str, tmp_path: Path
) -> None:
    """As the deadline's budget: the runs at eu are in a window and count for none of the
    objectives, nor for goodput, on the API or /metrics; those at us count."""
    # Every answer within end_to_end_ms: goodput is the ok share, which eu's runs lower.
    objectives = {"availability": {"target": 99.5}, "end_to_end_ms": {"p": 99, "below": 60_000}}
    both = TargetsFile.model_validate(
        {
            "targets": [
                {"name": "slo", "url": "http://slo.invalid/", "alerts": {"objectives": objectives}}
            ],
            "maintenance": [{"name": "eu-work", "targets": ["slo"], "vantages": ["eu"], **ALWAYS}],
        }
    )
    rng = np.random.default_rng(5)
    with api(db_url, tmp_path, both) as served:
        sync_targets_file(served.service.sessions, served.service.targets)  # as serve's start
        for vantage, failed in (("eu", 4), ("us", 1)):
            for k in range(3):
                at = minutes_ago(30 - k)
                run = make_run(rng, at, target="slo", vantage=vantage, n=5, failed=failed)
                served.store(record_of(run))
        windows = served.service.alerts.maintenance
        assert windows is not None
        with served.service.sessions() as session:
            kept = target_objectives(session, "slo", utcnow(), windows.windows()) or {}
            plain = target_objectives(session, "slo", utcnow()) or {}
        assert set(plain) == {"eu", "us", None} and set(kept) == {"us", None}, kept
        for metric in objectives:
            assert kept[None].slos[metric] == kept["us"].slos[metric] == plain["us"].slos[metric]
        assert kept[None].slos["availability"] != plain[None].slos["availability"]
        assert kept[None].goodput == kept["us"].goodput == plain["us"].goodput
        assert kept[None].goodput != plain[None].goodput
        body = served.client.get("/api/v1/targets/slo/breakdown", params={"vantage": "eu"})
        assert body.status_code == 200, body.text
        assert (body.json()["objectives"], body.json()["goodput"]) == ([], None)  # none counts
        found = parsed(scrape(served))
        burns = found["phasewatch_objective_burn_rate"]
        assert {s.labels["vantage"] for s in burns} == {"us"}
        assert {s.labels["vantage"] for s in found["phasewatch_goodput_ratio"]} == {"us"}
