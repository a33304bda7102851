"""The alerts and silences API on SQLite and PostgreSQL, over alerts the engine raised from
stored runs: lists, filters and cursors, one alert with its story, acknowledge, silences."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from app.alerts.views import open_alerts_by_series
from app.config import TargetsFile
from app.store.models import AlertRow, DeliveryRow
from tests.apiapp import Api, api, minutes_ago

# No alert or silence has it. Fixed, not uuid4(): a parameter is part of the test's id, and
# pytest-xdist's workers must all collect the same ids.
UNKNOWN_ID = "5b0e3c1a-7d2f-4e8b-9a6c-1f2e3d4c5b6a"
NOTIFIED = TargetsFile.model_validate(
    {
        "notifiers": {"hook": {"type": "webhook", "url": "http://127.0.0.1:9/hook"}},
        "targets": [
            {"name": name, "url": f"http://{name}.invalid/", "interval": "1m"}
            for name in ("alpha", "beta", "gamma", "delta", "quiet")
        ],
    }
)


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Api]:
    with api(db_url, tmp_path, NOTIFIED) as served:
        yield served


@pytest.fixture
def story(served: Api) -> Api:
    """alpha/eu firing, beta/eu pending, gamma/eu firing, delta/us firing, opened in that
    order; quiet has healthy runs only."""
    served.failing("alpha", "eu", 4, minutes_ago(60))
    served.failing("beta", "eu", 3, minutes_ago(50))
    served.failing("gamma", "eu", 4, minutes_ago(40))
    served.failing("delta", "us", 4, minutes_ago(30))
    served.healthy("quiet", "eu", 4, minutes_ago(20))
    return served


def get(served: Api, path: str, **params: Any) -> Any:
    response = served.client.get(path, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def alerts(served: Api, **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(served, "/api/v1/alerts", **params)["items"]
    return items


def series(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(item["target"], item["vantage"], item["state"]) for item in items]


# Listing ------------------------------------------------------------------------------------


def test_alerts_are_listed_newest_first(story: Api) -> None:
    assert series(alerts(story)) == [
        ("delta", "us", "firing"),
        ("gamma", "eu", "firing"),
        ("beta", "eu", "pending"),
        ("alpha", "eu", "firing"),
    ]


FILTERS: list[tuple[dict[str, str], list[str]]] = [
    ({"state": "firing"}, ["delta", "gamma", "alpha"]),
    ({"state": "pending"}, ["beta"]),
    ({"state": "open"}, ["delta", "gamma", "beta", "alpha"]),
    ({"state": "resolved"}, []),
    ({"target": "gamma"}, ["gamma"]),
    ({"vantage": "us"}, ["delta"]),
    ({"vantage": "eu", "state": "firing"}, ["gamma", "alpha"]),
    ({"kind": "probe_failing", "target": "alpha"}, ["alpha"]),
    ({"kind": "tail_shift"}, []),
    ({"target": "nobody"}, []),
]


def test_alerts_filter_by_state_target_vantage_and_kind(story: Api) -> None:
    # One story for the whole table: building it is most of the cost.
    for params, expected in FILTERS:
        assert [item["target"] for item in alerts(story, **params)] == expected, params


def test_a_cursor_walks_every_alert_once(story: Api) -> None:
    everything = [item["id"] for item in alerts(story)]
    assert len(everything) == 4
    for limit in (1, 2, 3, 4, 5):
        assert walk(story, limit) == everything, limit
    # Every page says how many match, over every page.
    assert get(story, "/api/v1/alerts", limit=1)["total"] == 4


def walk(served: Api, limit: int) -> list[str]:
    walked: list[str] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        page = get(served, "/api/v1/alerts", **params)
        assert len(page["items"]) <= limit
        walked += [item["id"] for item in page["items"]]
        if page["next_cursor"] is None:
            return walked
        params["cursor"] = page["next_cursor"]


def test_a_cursor_holds_while_new_alerts_open(story: Api) -> None:
    first = get(story, "/api/v1/alerts", limit=2)
    story.failing("quiet", "eu", 4, minutes_ago(5))  # opens a newer alert meanwhile
    rest = get(story, "/api/v1/alerts", limit=10, cursor=first["next_cursor"])
    assert [item["target"] for item in rest["items"]] == ["beta", "alpha"]


def test_an_alert_in_the_list_carries_its_labels_and_explanation(story: Api) -> None:
    (alpha,) = alerts(story, target="alpha")
    assert alpha["labels"] == {
        "alertname": "probe_failing",
        "target": "alpha",
        "scope": "vantage",
        "severity": "critical",
        "vantage": "eu",
    }
    assert alpha["open"] is True and alpha["fired_at"] is not None
    assert alpha["summary"].startswith("probe failing on alpha")


# One alert ----------------------------------------------------------------------------------


def test_an_alert_shows_its_transitions_oldest_first_and_an_explanation(story: Api) -> None:
    (alpha,) = alerts(story, target="alpha")
    detail = get(story, f"/api/v1/alerts/{alpha['id']}")
    steps = [(step["before"], step["after"]) for step in detail["transitions"]]
    assert steps == [("inactive", "pending"), ("pending", "firing")]
    assert detail["explanation"] == "probe failing on alpha: every request failed in 3 runs at eu"
    assert detail["numbers"] == {"runs": 3, "failed_samples": 15}
    times = [step["at"] for step in detail["transitions"]]
    assert times == sorted(times)


@pytest.mark.parametrize("alert_id", [UNKNOWN_ID, "not-a-uuid", "1", "%20"])
def test_an_unknown_alert_is_404(served: Api, alert_id: str) -> None:
    response = served.client.get(f"/api/v1/alerts/{alert_id}")
    assert response.status_code == 404
    assert "no alert" in response.json()["detail"]


# Acknowledge --------------------------------------------------------------------------------


def test_acknowledging_resolves_the_alert_and_keeps_who_and_why(story: Api) -> None:
    (gamma,) = alerts(story, target="gamma")
    body = {"by": "ops@example.com", "comment": "new GPU pool, slower prefill is expected"}
    response = story.client.post(f"/api/v1/alerts/{gamma['id']}/acknowledge", json=body)
    assert response.status_code == 200, response.text
    detail = response.json()
    assert detail["state"] == "resolved" and detail["open"] is False
    assert detail["acknowledged_by"] == "ops@example.com"
    assert detail["acknowledged_at"] is not None
    last = detail["transitions"][-1]
    assert (last["before"], last["after"], last["acknowledged"]) == ("firing", "resolved", True)
    assert last["numbers"]["comment"] == body["comment"]
    assert last["numbers"]["by"] == body["by"]
    assert [item["target"] for item in alerts(story, state="resolved")] == ["gamma"]
    # The engine knows too: the next failing run of gamma starts a new episode.
    story.failing("gamma", "eu", 1, minutes_ago(1))
    assert [a["id"] for a in alerts(story, target="gamma", state="open")] != [gamma["id"]]


def test_acknowledging_an_alert_that_is_over_is_409(story: Api) -> None:
    (alpha,) = alerts(story, target="alpha")
    path = f"/api/v1/alerts/{alpha['id']}/acknowledge"
    assert story.client.post(path, json={"by": "a"}).status_code == 200
    again = story.client.post(path, json={"by": "b"})
    assert again.status_code == 409
    assert "not open" in again.json()["detail"]
    assert get(story, f"/api/v1/alerts/{alpha['id']}")["acknowledged_by"] == "a"


@pytest.mark.parametrize("alert_id", [UNKNOWN_ID, "not-a-uuid"])
def test_acknowledging_an_unknown_alert_is_404(served: Api, alert_id: str) -> None:
    response = served.client.post(f"/api/v1/alerts/{alert_id}/acknowledge", json={"by": "a"})
    assert response.status_code == 404


BAD_ACKNOWLEDGEMENTS: list[Any] = [
    {},
    {"by": ""},
    {"by": 3},
    {"by": "a", "comment": ["x"]},
    {"by": "a", "extra": 1},
    {"by": "x" * 201},
    "not an object",
    None,
]


def test_a_bad_acknowledgement_is_422_and_changes_nothing(story: Api) -> None:
    (alpha,) = alerts(story, target="alpha")
    for body in BAD_ACKNOWLEDGEMENTS:
        response = story.client.post(f"/api/v1/alerts/{alpha['id']}/acknowledge", json=body)
        assert response.status_code == 422 and response.json()["detail"], body
    assert get(story, f"/api/v1/alerts/{alpha['id']}")["state"] == "firing"


@pytest.mark.parametrize(
    "params",
    [
        {"state": "burning"},
        {"limit": 0},
        {"limit": 501},
        {"limit": "ten"},
        {"cursor": "garbage"},
        {"cursor": "bm90fGEgY3Vyc29y"},  # base64 of "not|a cursor"
    ],
)
def test_bad_list_parameters_are_422_with_a_detail(served: Api, params: dict[str, Any]) -> None:
    response = served.client.get("/api/v1/alerts", params=params)
    assert response.status_code == 422
    assert response.json()["detail"]


# The overview's alert column ----------------------------------------------------------------


def _row(target: str, vantage: str | None, severity: str, state: str, minutes: int) -> AlertRow:
    at = datetime(2026, 5, 1, tzinfo=UTC) + timedelta(minutes=minutes)
    return AlertRow(
        id=uuid.uuid4(),
        kind="composition_shift" if severity == "warning" else "tail_shift",
        target=target,
        vantage=vantage,
        scope="vantage" if vantage else "service",
        severity=severity,
        state=state,
        streak=0,
        opened_at=at,
        summary=f"{severity} {state}",
        numbers={},
        updated_at=at,
    )


def test_each_series_lists_its_open_alerts_most_severe_first(served: Api) -> None:
    rows = [
        _row("a", "eu", "warning", "firing", 1),
        _row("a", "eu", "critical", "pending", 2),
        _row("a", "eu", "critical", "firing", 3),  # critical firing beats the rest
        _row("a", "eu", "critical", "firing", 0),  # ... and the newer of two wins
        _row("b", "eu", "warning", "recovering", 1),
        _row("b", "eu", "warning", "pending", 2),
        _row("b", "eu", "critical", "resolved", 3),  # over: not shown
        _row("a", None, "critical", "pending", 1),  # across vantages: a series of its own
        _row("c", "us", "critical", "resolved", 1),
    ]
    with served.service.sessions.begin() as session:
        session.add_all(rows)
    with served.service.sessions() as session:
        found = open_alerts_by_series(session)
    assert {key: [view.summary for view in group] for key, group in found.items()} == {
        ("a", "eu"): ["critical firing", "critical firing", "critical pending", "warning firing"],
        ("b", "eu"): ["warning recovering", "warning pending"],
        ("a", None): ["critical pending"],
    }
    assert [view.id for view in found[("a", "eu")][:2]] == [str(rows[2].id), str(rows[3].id)]


# Silences -----------------------------------------------------------------------------------


def silence(served: Api, **body: Any) -> dict[str, Any]:
    body = {"matchers": [{"name": "target", "value": "alpha"}], "createdBy": "me"} | body
    response = served.client.post("/api/v1/silences", json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def test_a_silence_holds_the_notifications_of_the_alerts_it_matches(served: Api) -> None:
    made = silence(
        served,
        matchers=[{"name": "target", "value": "al.*", "isRegex": True}],
        duration="2h",
        comment="maintenance",
    )
    assert made["status"] == {"state": "active"}
    assert made["matchers"] == [
        {"name": "target", "value": "al.*", "isRegex": True, "isEqual": True}
    ]
    starts = datetime.fromisoformat(made["startsAt"])
    assert datetime.fromisoformat(made["endsAt"]) - starts == timedelta(hours=2)
    served.failing("alpha", "eu", 4, minutes_ago(10))
    served.failing("beta", "eu", 4, minutes_ago(10))
    with served.service.sessions() as session:
        held = session.execute(select(AlertRow.target, DeliveryRow.status).join(AlertRow)).all()
    assert sorted(held) == [("alpha", "silenced"), ("beta", "pending")]


def test_a_negative_matcher_leaves_out_the_alerts_it_names(served: Api) -> None:
    made = silence(
        served,
        matchers=[
            {"name": "target", "value": "alpha|beta", "isRegex": True},
            {"name": "target", "value": "beta", "isEqual": False},
        ],
        duration="2h",
    )
    assert made["matchers"][1] == {
        "name": "target", "value": "beta", "isRegex": False, "isEqual": False
    }  # fmt: skip
    served.failing("alpha", "eu", 4, minutes_ago(10))
    served.failing("beta", "eu", 4, minutes_ago(10))
    with served.service.sessions() as session:
        held = session.execute(select(AlertRow.target, DeliveryRow.status).join(AlertRow)).all()
    assert sorted(held) == [("alpha", "silenced"), ("beta", "pending")]


def test_silences_are_listed_created_read_and_expired(served: Api) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    ending = silence(served, endsAt=(datetime.now(UTC) + timedelta(minutes=30)).isoformat())
    snake_case = {
        "matchers": [{"name": "vantage", "value": "eu", "is_regex": False}],
        "starts_at": later.isoformat(),
        "duration": 3600,
        "created_by": "snake",
    }
    response = served.client.post("/api/v1/silences", json=snake_case)
    assert response.status_code == 201, response.text
    pending = response.json()
    assert pending["status"]["state"] == "pending" and pending["createdBy"] == "snake"
    listed = get(served, "/api/v1/silences")
    assert [s["id"] for s in listed] == [ending["id"], pending["id"]]  # soonest end first
    assert [s["id"] for s in get(served, "/api/v1/silences", active="true")] == [ending["id"]]
    assert get(served, f"/api/v1/silences/{ending['id']}") == ending

    expired = served.client.delete(f"/api/v1/silences/{ending['id']}")
    assert expired.status_code == 200 and expired.json()["status"]["state"] == "expired"
    assert get(served, "/api/v1/silences", active="true") == []
    again = served.client.delete(f"/api/v1/silences/{ending['id']}")  # stays as it was
    assert again.status_code == 200 and again.json()["endsAt"] == expired.json()["endsAt"]


def test_silences_page_by_limit_and_cursor_with_the_total_in_headers(served: Api) -> None:
    """Five silences, two ending at the same moment (their order then by creation): walked two
    at a time, every one once in the list's order, the count in every answer."""
    same_end = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    ends = ["3h", "1h", same_end, same_end, "30m"]
    made = [silence(served, **({"endsAt": end} if "T" in end else {"duration": end}))
            for end in ends]  # fmt: skip
    whole = served.client.get("/api/v1/silences")
    assert whole.headers["x-total-count"] == "5" and "link" not in whole.headers
    order = [s["id"] for s in whole.json()]
    assert order == [made[i]["id"] for i in (4, 1, 2, 3, 0)]
    walked, path = [], "/api/v1/silences?limit=2"
    while True:
        response = served.client.get(path)
        assert response.status_code == 200, response.text
        assert response.headers["x-total-count"] == "5"
        walked += [s["id"] for s in response.json()]
        if "link" not in response.headers:
            break
        link, rel = response.headers["link"].split("; ")
        assert rel == 'rel="next"'
        path = link.strip("<>")
    assert walked == order
    active = served.client.get("/api/v1/silences", params={"active": "true", "limit": 1})
    assert active.headers["x-total-count"] == "5" and "active=true" in active.headers["link"]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "cursor=not-a-cursor", "cursor=YWZ0ZXI"]
)
def test_a_bad_silences_page_is_422(served: Api, query: str) -> None:
    assert served.client.get(f"/api/v1/silences?{query}").status_code == 422


@pytest.mark.parametrize("silence_id", [UNKNOWN_ID, "not-a-uuid"])
def test_an_unknown_silence_is_404(served: Api, silence_id: str) -> None:
    assert served.client.get(f"/api/v1/silences/{silence_id}").status_code == 404
    assert served.client.delete(f"/api/v1/silences/{silence_id}").status_code == 404


NOW = datetime.now(UTC)
BAD_SILENCES: list[tuple[dict[str, Any], str]] = [
    ({"matchers": []}, "matchers"),
    ({"matchers": [{"name": "target", "value": "(", "isRegex": True}]}, "not a valid regex"),
    ({"matchers": [{"name": "1x", "value": "a"}]}, "name"),
    ({"matchers": [{"name": "target"}]}, "value"),
    ({"matchers": [{"name": "target", "value": "a", "isEqual": False}]}, "empty label"),
    ({"matchers": [{"name": "vantage", "value": ".*", "isRegex": True}]}, "empty label"),
    ({"matchers": "target=alpha"}, "matchers"),
    ({"endsAt": (NOW + timedelta(hours=1)).isoformat()}, "exactly one"),
    ({"duration": None}, "exactly one"),
    ({"duration": "soon"}, "duration"),
    ({"duration": 0}, "more than 0"),
    ({"duration": -5}, "more than 0"),
    ({"duration": None, "endsAt": (NOW - timedelta(hours=1)).isoformat()}, "in the past"),
    ({"duration": None, "endsAt": "2030-01-01T00:00:00"}, "timezone"),
    ({"duration": None, "endsAt": "tomorrow"}, "endsAt"),
    ({"startsAt": (NOW + timedelta(hours=2)).isoformat(), "duration": "-1h"}, "duration"),
    (
        {
            "duration": None,
            "startsAt": (NOW + timedelta(hours=2)).isoformat(),
            "endsAt": (NOW + timedelta(hours=1)).isoformat(),
        },
        "after startsAt",
    ),
    ({"createdBy": ""}, "createdBy"),
    ({"createdBy": None}, "createdBy"),
    ({"colour": "red"}, "colour"),
]


@pytest.mark.parametrize(("change", "says"), BAD_SILENCES)
def test_a_bad_silence_is_422_with_a_detail_and_nothing_stored(
    served: Api, change: dict[str, Any], says: str
) -> None:
    valid = {"matchers": [{"name": "target", "value": "a"}], "createdBy": "me", "duration": "1h"}
    response = served.client.post("/api/v1/silences", json=valid | change)
    assert response.status_code == 422, response.text
    assert says.lower() in str(response.json()["detail"]).lower()
    assert get(served, "/api/v1/silences") == []


@pytest.mark.parametrize("body", ["[]", "{", "null", '"x"'])
def test_a_silence_body_that_is_not_an_object_is_422(served: Api, body: str) -> None:
    response = served.client.post(
        "/api/v1/silences", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
