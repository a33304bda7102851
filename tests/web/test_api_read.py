"""The read API on SQLite and PostgreSQL, served by a real app over stored runs: every number
checked against numpy on the same samples, paging walked to the end, bad input answered 4xx."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from app.analysis.sketch import RELATIVE_ACCURACY
from app.config import TargetsFile
from app.csvio.export import export_samples
from app.runtime.targetsync import target_values
from app.store.ingest import store_run
from app.store.migrate import head_revision
from app.store.records import RunRecord
from app.store.rollups.catchup import catch_up
from app.store.targets import sync_targets
from app.web.schemas import HistoryOut
from tests.apiapp import Api, api
from tests.runfactory import LLM, make_run, record_of

SECRET = "sk-live-SECRET-7f3a9c"
URL_KEY = "QUERYKEY-55d1e0"
BOUND = RELATIVE_ACCURACY * (1 + 1e-9)
QS = {"p50": 50, "p90": 90, "p95": 95, "p99": 99}
NOW = datetime.now(UTC).replace(microsecond=0)
START = NOW - timedelta(hours=6)
TARGETS = TargetsFile.model_validate(
    {
        "targets": [
            {
                "name": "chat-prod",
                "kind": "openai",
                "url": f"https://llm.invalid/v1/chat?api_key={URL_KEY}&model=m1",
                "headers": {"Authorization": f"Bearer {SECRET}", "X-Team": "core"},
                "interval": "10m",
                "deadline_ms": 5000,
            },
            {"name": "chat-edge", "kind": "openai", "url": "https://edge.invalid/v1/chat"},
            {"name": "openai/gpt-4o", "url": "https://api.invalid/"},
        ]
    }
)


@dataclass
class Filled:
    api: Api
    records: list[RunRecord]

    def get(self, path: str, **params: Any) -> Any:
        response = self.api.client.get(path, params=params)
        assert response.status_code == 200, response.text
        assert SECRET not in response.text and URL_KEY not in response.text
        return response.json()

    def runs(self, target: str, vantage: str | None = None) -> list[RunRecord]:
        return [
            r
            for r in self.records
            if r.target == target and (vantage is None or r.vantage == vantage)
        ]


@pytest.fixture(scope="module")
def filled(module_db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Filled]:
    """chat-prod from eu and us and chat-edge from eu, a run every 10 minutes for 6 hours;
    chat-edge's network is 3x slower; a few censored and failed samples. Built once per
    database: every test here only reads."""
    rng = np.random.default_rng(17)
    records = []
    for target, vantage, medians in (
        ("chat-prod", "eu", LLM),
        ("chat-prod", "us", LLM),
        ("chat-edge", "eu", {**LLM, "network": LLM["network"] * 3}),
        ("openai/gpt-4o", "eu", LLM),
    ):
        for i in range(36):
            at = START + timedelta(minutes=10 * i, seconds=7)
            run = make_run(
                rng, at, medians, n=12, censored=1, failed=1, target=target, vantage=vantage
            )
            records.append(record_of(run))
    with api(module_db_url, tmp_path_factory.mktemp("api"), TARGETS) as served:
        sessions = served.service.sessions
        with sessions.begin() as session:
            sync_targets(session, target_values(TARGETS.targets), NOW)
            for record in records:
                store_run(session, record, NOW)
        # One batched pass, as the service's rollup loop does it.
        catch_up(sessions, START - timedelta(days=1), NOW)
        yield Filled(served, records)


def timed(records: Sequence[RunRecord]) -> list[Any]:
    return [s for r in records for s in r.samples if s.status in ("ok", "deadline_exceeded")]


def exact(values: Sequence[float]) -> dict[str, float]:
    return {name: float(np.percentile(values, q)) for name, q in QS.items()}


def window(**extra: Any) -> dict[str, Any]:
    return {"from": START.isoformat(), "to": NOW.isoformat(), **extra}


def test_version_names_the_database_and_its_revision(filled: Filled, module_db_url: str) -> None:
    found = filled.get("/api/v1/version")
    assert found["database"] == module_db_url.split(":")[0].split("+")[0]
    assert found["schema_revision"] == head_revision()


def test_the_api_root_lists_every_get_endpoint_and_where_the_document_is(
    filled: Filled,
) -> None:
    found = filled.get("/api/v1/")
    assert (found["openapi"], found["docs"]) == ("/openapi.json", "/docs")
    assert {"/api/v1/version", "/api/v1/targets", "/api/v1/runs"} <= set(found["endpoints"])
    assert found["endpoints"] == sorted(found["endpoints"])
    for path in found["endpoints"]:
        if "{" not in path:  # each one answers, none is a 404
            assert filled.api.client.get(path).status_code != 404, path


def test_targets_list_shows_header_names_never_values(filled: Filled) -> None:
    found = {t["name"]: t for t in filled.get("/api/v1/targets")}
    assert sorted(found) == ["chat-edge", "chat-prod", "openai/gpt-4o"]
    prod = found["chat-prod"]
    assert prod["header_names"] == ["Authorization", "X-Team"]
    assert prod["url"] == "https://llm.invalid/v1/chat?api_key=<redacted>&model=m1"
    assert (prod["interval_s"], prod["deadline_ms"], prod["kind"]) == (600.0, 5000.0, "openai")
    assert [v["name"] for v in prod["vantages"]] == ["eu", "us"]
    newest = max(r.started_at for r in filled.runs("chat-prod"))
    assert datetime.fromisoformat(prod["last_run_at"]) == newest


def test_targets_page_by_limit_and_cursor_with_the_total_in_headers(filled: Filled) -> None:
    whole = filled.api.client.get("/api/v1/targets")
    assert whole.headers["x-total-count"] == "3" and "link" not in whole.headers
    names = [t["name"] for t in whole.json()]
    for limit in (1, 2, 3, 4):
        walked: list[str] = []
        path = f"/api/v1/targets?limit={limit}"
        while True:
            response = filled.api.client.get(path)
            assert response.status_code == 200 and response.headers["x-total-count"] == "3"
            page = [t["name"] for t in response.json()]
            assert 1 <= len(page) <= limit
            walked += page
            if "link" not in response.headers:
                break
            link, rel = response.headers["link"].split("; ")
            assert rel == 'rel="next"' and link.startswith("</api/v1/targets?limit=")
            path = link.strip("<>")
        assert walked == names, limit
    # The page's targets keep their vantages and last runs, as the whole list has them.
    paged = filled.get("/api/v1/targets", limit=2, cursor=_cursor_after(filled, "chat-edge"))
    assert paged == [t for t in whole.json() if t["name"] > "chat-edge"][:2]


def _cursor_after(filled: Filled, name: str) -> str:
    response = filled.api.client.get("/api/v1/targets", params={"limit": 1})
    assert response.json()[0]["name"] == name == "chat-edge"
    return response.headers["link"].split("cursor=")[1].split(">")[0]


@pytest.mark.parametrize(
    "query", ["limit=0", "limit=1001", "cursor=not-a-cursor", "cursor=YWZ0ZXI"]
)
def test_a_bad_targets_page_is_a_422(filled: Filled, query: str) -> None:
    response = filled.api.client.get(f"/api/v1/targets?{query}")
    assert response.status_code == 422 and response.json()["detail"]


def test_runs_and_samples_count_their_window_when_asked(filled: Filled) -> None:
    runs = filled.get("/api/v1/runs", **window(target="chat-prod", limit=5, total="true"))
    assert runs["total"] == len(filled.runs("chat-prod")) == 72 and len(runs["items"]) == 5
    assert filled.get("/api/v1/runs", **window(limit=5))["total"] is None  # not asked: no count
    us = filled.get("/api/v1/runs", **window(target="chat-prod", vantage="us", total="true"))
    assert us["total"] == 36
    samples = filled.get("/api/v1/samples", **window(target="chat-edge", limit=3, total="true"))
    assert samples["total"] == sum(len(r.samples) for r in filled.runs("chat-edge"))
    every = filled.get("/api/v1/samples", **window(limit=3, total="true"))
    assert every["total"] == sum(len(r.samples) for r in filled.records)


def test_target_detail_has_the_current_breakdown_per_vantage(filled: Filled) -> None:
    found = filled.get("/api/v1/targets/chat-prod", **window())
    assert [b["vantage"] for b in found["breakdowns"]] == ["eu", "us"]
    for got in found["breakdowns"]:
        samples = timed(filled.runs("chat-prod", got["vantage"]))
        assert got["n"] == len(samples)
        assert got["total"] == pytest.approx(exact([s.total_ms for s in samples]), abs=1e-3)
    slashed = filled.get("/api/v1/targets/openai/gpt-4o")
    assert slashed["name"] == "openai/gpt-4o"


def test_breakdown_is_the_exact_table_of_the_window(filled: Filled) -> None:
    found = filled.get("/api/v1/targets/chat-prod/breakdown", **window(vantage="us"))
    records = filled.runs("chat-prod", "us")
    samples = timed(records)
    assert (found["runs"], found["n"], found["source"]) == (36, len(samples), "samples")
    assert (found["errors"], found["deadline_exceeded"]) == (36, 36)
    assert found["total"] == pytest.approx(exact([s.total_ms for s in samples]), abs=1e-3)
    assert [p["phase"] for p in found["phases"]] == list(LLM)
    for row in found["phases"]:
        expected = exact([s.phases[row["phase"]] for s in samples])
        assert {k: row[k] for k in QS} == pytest.approx(expected, abs=1e-3)
    assert sum(p["share"] for p in found["phases"]) == pytest.approx(1.0, abs=1e-3)
    assert found["dominant"] == "queue"
    pooled = filled.get("/api/v1/targets/chat-prod/breakdown", **window())
    assert pooled["vantage"] is None and pooled["runs"] == 72
    slashed = filled.get("/api/v1/targets/openai/gpt-4o/breakdown", **window())
    assert slashed["target"] == "openai/gpt-4o" and slashed["runs"] == 36


def test_history_buckets_hold_the_quantiles_of_their_samples(filled: Filled) -> None:
    found = filled.get("/api/v1/targets/chat-prod/history", **window(bucket=3600))
    HistoryOut.model_validate(found)  # the documented shape, though served without it
    assert (found["bucket_seconds"], found["source"]) == (3600, "rollups")
    records = filled.runs("chat-prod")
    assert sum(found["runs"]) == len(records)
    for i, at in enumerate(found["time"]):
        start = datetime.fromtimestamp(at, UTC)
        inside = [r for r in records if start <= r.started_at < start + timedelta(hours=1)]
        assert found["runs"][i] == len(inside)
        if not inside:
            assert found["total"]["p50"][i] is None
            continue
        expected = exact([s.total_ms for s in timed(inside)])
        for name, value in expected.items():
            assert abs(found["total"][name][i] - value) <= BOUND * value + 1e-3
        network = exact([s.phases["network"] for s in timed(inside)])["p99"]
        assert abs(found["phase_quantiles"]["network"]["p99"][i] - network) <= BOUND * network
        assert found["dominant"][i] == "queue"
    fine = filled.get("/api/v1/targets/chat-prod/history", **window(bucket=60))
    assert fine["source"] == "runs" and sum(fine["runs"]) == len(records)
    # A bucket is a duration as the targets file writes one, or seconds.
    assert filled.get("/api/v1/targets/chat-prod/history", **window(bucket="1h")) == found
    assert filled.get("/api/v1/targets/chat-prod/history", **window(bucket="1m")) == fine


def test_default_bucket_is_no_finer_than_the_targets_interval(filled: Filled) -> None:
    # 6 hours fit 360 one-minute buckets, but chat-prod runs every 10 minutes: each run
    # would sit between nine empty buckets, and a chart of them draws no line.
    chosen = filled.get("/api/v1/targets/chat-prod/history", **window())
    assert (chosen["bucket_seconds"], chosen["source"]) == (900, "rollups")
    assert sum(chosen["runs"]) == len(filled.runs("chat-prod"))
    assert all(chosen["runs"][1:-1])  # every bucket inside the window holds a run
    day = {"from": (NOW - timedelta(hours=24)).isoformat(), "to": NOW.isoformat()}
    assert filled.get("/api/v1/targets/chat-prod/history", **day)["bucket_seconds"] == 900
    week = {"from": (NOW - timedelta(days=7)).isoformat(), "to": NOW.isoformat()}
    assert filled.get("/api/v1/targets/chat-prod/history", **week)["bucket_seconds"] == 3600


def test_runs_page_newest_first_through_every_run_once(filled: Filled) -> None:
    seen: list[dict[str, Any]] = []
    params = window(target="chat-prod", limit=7)
    while True:
        page = filled.get("/api/v1/runs", **params)
        seen += page["items"]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    expected = sorted(filled.runs("chat-prod"), key=lambda r: (r.started_at, r.id), reverse=True)
    assert [item["id"] for item in seen] == [str(r.id) for r in expected]
    only_us = filled.get("/api/v1/runs", **window(target="chat-prod", vantage="us", limit=1000))
    assert {item["vantage"] for item in only_us["items"]} == {"us"}
    assert len(only_us["items"]) == 36


def test_one_run_comes_with_its_samples(filled: Filled) -> None:
    record = filled.runs("chat-edge")[3]
    found = filled.get(f"/api/v1/runs/{record.id}")
    assert (found["target"], found["vantage"], found["status"]) == ("chat-edge", "eu", "complete")
    assert [s["idx"] for s in found["samples"]] == [s.idx for s in record.samples]
    assert [s["total_ms"] for s in found["samples"]] == [s.total_ms for s in record.samples]
    assert found["samples"][-1]["error_class"] == "ConnectError"


def test_samples_page_through_every_sample_once(filled: Filled) -> None:
    seen: list[tuple[str, int]] = []
    params = window(target="chat-edge", limit=50)
    while True:
        page = filled.get("/api/v1/samples", **params)
        seen += [(item["run_id"], item["idx"]) for item in page["items"]]
        if page["next_cursor"] is None:
            break
        params["cursor"] = page["next_cursor"]
    expected = {(str(r.id), s.idx) for r in filled.runs("chat-edge") for s in r.samples}
    assert len(seen) == len(expected) and set(seen) == expected


def test_samples_csv_is_the_export_layout(filled: Filled) -> None:
    response = filled.api.client.get("/api/v1/samples.csv", params=window(target="chat-prod"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    expected = io.StringIO()
    with filled.api.service.sessions() as session:
        count = export_samples(session, expected, target="chat-prod", start=START, end=NOW)
    assert response.text == expected.getvalue()
    rows = list(csv.reader(io.StringIO(response.text)))
    assert rows[0][:6] == ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
    assert len(rows) - 1 == count == 72 * 13


def test_compare_names_the_phase_that_differs_most(filled: Filled) -> None:
    found = filled.get("/api/v1/compare", **window(targets="chat-prod,chat-edge", vantage="eu"))
    assert [b["target"] for b in found["breakdowns"]] == ["chat-prod", "chat-edge"]
    differs = found["differs_most"]
    assert (differs["phase"], differs["fastest"], differs["slowest"]) == (
        "network",
        "chat-prod",
        "chat-edge",
    )
    medians = {
        b["target"]: next(p["p50"] for p in b["phases"] if p["phase"] == "network")
        for b in found["breakdowns"]
    }
    assert differs["spread_ms"] == pytest.approx(
        medians["chat-edge"] - medians["chat-prod"], abs=2e-3
    )


BAD_REQUESTS = [
    ("/api/v1/targets/nope", {}, 404),
    ("/api/v1/targets/nope/breakdown", {}, 404),
    ("/api/v1/targets/nope/history", {}, 404),
    ("/api/v1/targets/chat-prod/breakdown", {"vantage": "mars"}, 404),
    ("/api/v1/targets/chat-prod/breakdown", {"vantage": "x" * 201}, 422),
    ("/api/v1/targets/chat-prod/breakdown", {"from": "2026-03-02T12:00:00"}, 422),
    ("/api/v1/targets/chat-prod/breakdown", {"from": "yesterday"}, 422),
    ("/api/v1/runs", {"from": "2026-03-02T12:00:00Z", "to": "2026-03-01T00:00:00Z"}, 422),
    ("/api/v1/targets/chat-prod/breakdown", {"from": "99999999999999999999"}, 422),
    ("/api/v1/targets/chat-prod/history", {"bucket": 90}, 422),
    ("/api/v1/targets/chat-prod/history", {"bucket": 0}, 422),
    ("/api/v1/targets/chat-prod/history", {"bucket": "1.5m"}, 422),
    ("/api/v1/targets/chat-prod/history", {"bucket": "soon"}, 422),
    ("/api/v1/targets/chat-prod/history", {"bucket": "367d"}, 422),
    ("/api/v1/targets/chat-prod/history", {"from": "2020-01-01T00:00:00Z", "bucket": 60}, 422),
    ("/api/v1/targets/chat-prod/history", {"from": "1000-01-01T00:00:00Z"}, 422),
    ("/api/v1/runs", {"limit": 0}, 422),
    ("/api/v1/runs", {"limit": 100000}, 422),
    ("/api/v1/runs", {"cursor": "not-a-cursor"}, 422),
    ("/api/v1/runs", {"cursor": "MjAyNi0wMy0wMlQxMjowMDowMCswMDowMHxub3QtYS11dWlk"}, 422),
    ("/api/v1/runs", {"target": "nope"}, 404),
    ("/api/v1/runs/not-a-uuid", {}, 422),
    ("/api/v1/runs/00000000-0000-4000-8000-000000000000", {}, 404),
    ("/api/v1/samples", {"cursor": "%%%"}, 422),
    ("/api/v1/samples.csv", {"target": "nope"}, 404),
    ("/api/v1/samples.csv", {"to": "2026-13-45T00:00:00Z"}, 422),
    ("/api/v1/compare", {"targets": "chat-prod"}, 422),
    ("/api/v1/compare", {"targets": "chat-prod,nope"}, 404),
    ("/api/v1/compare", {}, 422),
]  # fmt: skip


def test_bad_input_is_a_4xx_with_a_detail(filled: Filled) -> None:
    for path, params, expected in BAD_REQUESTS:
        response = filled.api.client.get(path, params=params)
        assert response.status_code == expected, (path, params, response.text)
        assert response.json()["detail"], (path, params)


def test_no_response_shows_a_planted_secret(filled: Filled) -> None:
    record = filled.runs("chat-prod")[0]
    paths = [
        "/api/v1/targets",
        "/api/v1/targets/chat-prod",
        "/api/v1/targets/chat-prod/breakdown",
        "/api/v1/targets/chat-prod/history",
        "/api/v1/runs",
        f"/api/v1/runs/{record.id}",
        "/api/v1/samples",
        "/api/v1/compare?targets=chat-prod,chat-edge",
        "/openapi.json",
    ]
    for path in paths:
        response = filled.api.client.get(path)
        assert response.status_code == 200, path
        assert SECRET not in response.text and URL_KEY not in response.text, path
