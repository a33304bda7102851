"""The LLM metrics in the API (each sample's values by name, the run's percentiles) and on
the target page (the recent runs' TTFT, TPOT, stall and tokens/s)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from app.analysis.llmmetrics import METRIC_NAMES
from app.store.records import RunRecord, SampleRecord
from tests.apiapp import api, minutes_ago, targets
from tests.runfactory import streamed_sample


def test_a_run_shows_each_samples_llm_metrics_and_their_percentiles(
    db_url: str, tmp_path: Path
) -> None:
    at = minutes_ago(3)
    samples = (
        streamed_sample(0, 100, 190, 10, 30, at),
        streamed_sample(1, 300, 2280, 100, 400, at),
    )
    record = RunRecord(uuid.uuid4(), "chat", "eu", at, "complete", samples)
    with api(db_url, tmp_path, targets("chat")) as served:
        served.store(record)
        found = served.client.get(f"/api/v1/runs/{record.id}").json()
        page = served.client.get("/api/v1/samples", params={"target": "chat"}).json()
    first = found["samples"][0]["llm"]
    assert set(first) == set(METRIC_NAMES)
    assert first["ttft_ms"] == pytest.approx(100) and first["tpot_ms"] == pytest.approx(10)
    assert first["stall_ms"] == 30 and first["input_tokens"] == 20
    assert page["items"][0]["llm"]["output_tokens"] in (10, 100)
    summary = found["summary"]["llm"]
    assert summary["tpot_ms"]["n"] == 2
    assert summary["tpot_ms"]["p50"] == pytest.approx(15)
    assert summary["stall_ms"]["p99"] == pytest.approx(30 + 0.99 * 370)


def test_the_target_page_shows_the_recent_runs_llm_metrics_only_where_measured(
    db_url: str, tmp_path: Path
) -> None:
    at = minutes_ago(3)
    samples = (
        streamed_sample(0, 100, 190, 10, 30, at),
        streamed_sample(1, 300, 2280, 100, 400, at),
    )
    plain = SampleRecord(0, at, "ok", 40.0, {"server": 40.0})
    with api(db_url, tmp_path, targets("chat", "web")) as served:
        served.store(RunRecord(uuid.uuid4(), "chat", "eu", at, "complete", samples))
        served.store(RunRecord(uuid.uuid4(), "web", "eu", at, "complete", (plain,)))
        chat = served.client.get("/targets/chat").text
        web = served.client.get("/targets/web").text
    runs = chat.split('id="recent-runs"', 1)[1].split("</table>", 1)[0]
    assert "TTFT p50" in runs and "TPOT p50" in runs and "stall p99" in runs
    row = runs.split("<tbody>", 1)[1]
    assert "200 ms" in row and "15.0 ms" in row  # TTFT p50 of 100 and 300; TPOT of 10 and 20
    assert "TTFT" not in web.split('id="recent-runs"', 1)[1].split("</table>", 1)[0]
