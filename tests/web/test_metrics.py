"""/metrics, parsed as Prometheus parses it, agrees with the runs in the database."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from functools import partial
from pathlib import Path

import httpx
import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.samples import Sample
from sqlalchemy import select

from app.demo.sim.server import SimServer
from app.runs.threads import Check
from app.runtime.metrics import LATENCY_BUCKETS_S
from app.runtime.scraped import AlertCount, ServiceCollector
from app.store.models import RunRow, SampleRow, TargetRow
from app.store.records import RunRecord, SampleRecord
from tests.apiapp import Api, api, minutes_ago, targets
from tests.helpers import FAST_SIM, eventually, parsed, value
from tests.runfactory import LLM, make_run, record_of, streamed_sample
from tests.runtime.test_serve import Served, targets_file

TIMED = ("ok", "deadline_exceeded")  # failed samples have no latency
HTTP = {"connect": 2.0, "network": 20.0, "server": 300.0, "transfer": 4.0}
ALLOWED_LABELS = {"target", "vantage", "phase", "status", "error_class", "state", "kind", "le"}
ALLOWED_LABELS |= {"version", "loop"}  # loop: one of app.store.quarantine.LOOPS
ALLOWED_LABELS |= {"way"}  # way: asked or claimed (app.replicas.evaluation, two values)
ALLOWED_LABELS |= {"maintenance"}  # true or false: whether a window held the run
ALLOWED_LABELS |= {"samples"}  # in_hand or read: where a caught-up run's samples came from


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[Api]:
    with api(db_url, tmp_path, targets("chat", "web", "down")) as served:
        yield served


def scrape(served: Api, accept: str | None = None) -> str:
    headers = {"accept": accept} if accept else {}
    response = served.client.get("/metrics", headers=headers)
    assert response.status_code == 200
    return response.text


def feed(served: Api) -> list[RunRecord]:
    """LLM runs at two vantages (some censored, some failed), HTTP runs, a failing target."""
    rng = np.random.default_rng(7)
    records = []
    for k in range(3):
        for vantage in ("eu", "us"):
            run = make_run(rng, minutes_ago(30 - k), LLM, target="chat", vantage=vantage,
                           n=8, censored=k, failed=1)  # fmt: skip
            records.append(record_of(run))
    slow = {"queue": 80_000.0, "generation": 40_000.0}  # a two-minute LLM call
    records.append(record_of(make_run(rng, minutes_ago(20), slow, target="chat", n=3)))
    for k in range(2):
        records.append(record_of(make_run(rng, minutes_ago(10 - k), HTTP, target="web", n=6)))
    broken = SampleRecord(0, minutes_ago(1), "http_error", 12.0, {}, error_class="HTTP503",
                          error="503 from upstream id=abc123", http_status=503)  # fmt: skip
    refused = replace(broken, idx=1, status="error", error_class="ConnectError", error="x")
    records.append(
        RunRecord(uuid.uuid4(), "down", "eu", minutes_ago(1), "complete", (broken, refused))
    )
    for record in records:
        served.store(record)
    return records


def stored_samples(served: Api) -> list[tuple[str, str, SampleRow]]:
    with served.service.sessions() as session:
        query = (
            select(TargetRow.name, RunRow.vantage, SampleRow)
            .select_from(SampleRow)
            .join(RunRow, SampleRow.run_id == RunRow.id)
            .join(TargetRow, RunRow.target_id == TargetRow.id)
        )
        return [(t, v, s) for t, v, s in session.execute(query)]


def last_runs(served: Api) -> dict[tuple[str, str], RunRow]:
    with served.service.sessions() as session:
        rows = session.execute(
            select(TargetRow.name, RunRow).join(TargetRow).order_by(RunRow.started_at)
        )
        return {(name, run.vantage): run for name, run in rows}


def check_histogram(
    found: dict[str, list[Sample]], name: str, labels: dict[str, str], values_s: list[float]
) -> None:
    if not values_s:  # never observed: no series, rather than one of zeros
        assert value(found, f"{name}_count", **labels) is None
        return
    assert value(found, f"{name}_count", **labels) == len(values_s)
    assert value(found, f"{name}_sum", **labels) == pytest.approx(sum(values_s), rel=1e-9)
    for bound in LATENCY_BUCKETS_S:
        expected = sum(v <= bound for v in values_s)
        le = {**labels, "le": str(bound)}
        assert value(found, f"{name}_bucket", **le) == expected, (name, labels, bound)
    assert value(found, f"{name}_bucket", **labels, le="+Inf") == len(values_s)


def test_phase_and_end_to_end_histograms_count_every_timed_sample_stored(served: Api) -> None:
    feed(served)
    found = parsed(scrape(served))
    stored = stored_samples(served)
    series = {(t, v) for t, v, _ in stored}
    assert series == {("chat", "eu"), ("chat", "us"), ("web", "eu"), ("down", "eu")}
    for target, vantage in series:
        timed = [s for t, v, s in stored if (t, v) == (target, vantage) and s.status in TIMED]
        where = {"target": target, "vantage": vantage}
        check_histogram(
            found, "phasewatch_request_duration_seconds", where, [s.total_ms / 1e3 for s in timed]
        )
        for phase in {p for s in timed for p in s.phases}:
            times = [s.phases[phase] / 1e3 for s in timed if phase in s.phases]
            check_histogram(found, "phasewatch_phase_seconds", {**where, "phase": phase}, times)


def _labelled(sample: Sample) -> tuple[tuple[tuple[str, str], ...], float]:
    return tuple(sorted(sample.labels.items())), sample.value


def test_the_deprecated_request_seconds_holds_the_same_observations_and_says_so(
    served: Api,
) -> None:
    feed(served)
    text = scrape(served)
    found = parsed(text)
    for suffix in ("_bucket", "_count", "_sum"):
        old = found[f"phasewatch_request_seconds{suffix}"]
        new = found[f"phasewatch_request_duration_seconds{suffix}"]
        assert sorted(map(_labelled, old)) == sorted(map(_labelled, new))
    assert "# HELP phasewatch_request_seconds DEPRECATED" in text


def test_latency_buckets_reach_two_minutes_and_a_slow_llm_call_lands_below_them(
    served: Api,
) -> None:
    feed(served)
    found = parsed(scrape(served))
    bounds = {s.labels["le"] for s in found["phasewatch_request_duration_seconds_bucket"]}
    assert {"120.0", "+Inf"} <= bounds
    where = {"target": "chat", "vantage": "eu"}
    queue = {**where, "phase": "queue"}
    # The three ~120 s samples: above 60 s, within 180 s.
    total_60 = value(found, "phasewatch_request_duration_seconds_bucket", **where, le="60.0")
    total_180 = value(found, "phasewatch_request_duration_seconds_bucket", **where, le="180.0")
    assert total_180 is not None and total_60 is not None and total_180 - total_60 == 3
    assert value(found, "phasewatch_phase_seconds_bucket", **queue, le="60.0") == 24  # 3 runs
    assert value(found, "phasewatch_phase_seconds_bucket", **queue, le="180.0") == 27


def test_shares_and_the_dominant_phase_are_the_last_stored_run_s(served: Api) -> None:
    feed(served)
    found = parsed(scrape(served))
    for (target, vantage), run in last_runs(served).items():
        where = {"target": target, "vantage": vantage}
        for phase, stats in run.summary["phases"].items():
            share = value(found, "phasewatch_phase_share_ratio", **where, phase=phase)
            assert share == pytest.approx(stats["share"], abs=1e-4)
            dominant = value(found, "phasewatch_dominant_phase", **where, phase=phase)
            assert dominant == (1.0 if phase == run.dominant_phase else 0.0)
    assert value(found, "phasewatch_dominant_phase", target="web", vantage="eu", phase="server")


def test_a_phase_missing_from_the_last_run_loses_its_share_and_the_lead(served: Api) -> None:
    rng = np.random.default_rng(3)
    first = make_run(rng, minutes_ago(5), {"server": 50.0, "network": 5.0}, target="web", n=4)
    served.store(record_of(first))
    second = make_run(rng, minutes_ago(4), {"network": 5.0, "transfer": 1.0}, target="web", n=4)
    served.store(record_of(second))
    found = parsed(scrape(served))
    where = {"target": "web", "vantage": "eu"}
    assert value(found, "phasewatch_phase_share_ratio", **where, phase="server") is None
    assert value(found, "phasewatch_dominant_phase", **where, phase="server") == 0.0
    assert value(found, "phasewatch_dominant_phase", **where, phase="network") == 1.0


def test_outcomes_errors_by_class_and_runs_stored_are_counted(served: Api) -> None:
    records = feed(served)
    down = records[-1]
    found = parsed(scrape(served))
    stored = stored_samples(served)
    outcomes = Counter((t, v, s.status) for t, v, s in stored)
    for (target, vantage, status), n in outcomes.items():
        labels = {"target": target, "vantage": vantage, "status": status, "maintenance": "false"}
        assert value(found, "phasewatch_samples_total", **labels) == n
    classes = Counter((t, v, s.error_class) for t, v, s in stored if s.error_class)
    assert classes[("down", "eu", "HTTP503")] == 1
    for (target, vantage, error_class), n in classes.items():
        labels = {"target": target, "vantage": vantage, "error_class": error_class}
        assert value(found, "phasewatch_probe_errors_total", **labels) == n
    runs = Counter((r.target, r.vantage) for r in records)
    for (target, vantage), n in runs.items():
        assert value(found, "phasewatch_runs_stored_total", target=target, vantage=vantage) == n
    stamp = value(found, "phasewatch_last_run_timestamp_seconds", target="down", vantage="eu")
    assert stamp == pytest.approx(down.started_at.timestamp())


def test_scheduler_lateness_is_started_minus_scheduled(served: Api) -> None:
    rng = np.random.default_rng(5)
    late_by = [0.03, 0.3, 2.0, 45.0, -0.5]  # a clock step back counts as on time
    for k, late in enumerate(late_by):
        record = record_of(make_run(rng, minutes_ago(10 - k), HTTP, target="web", n=2))
        served.store(replace(record, scheduled_at=record.started_at - timedelta(seconds=late)))
    served.store(record_of(make_run(rng, minutes_ago(1), HTTP, target="web", n=2)))  # unscheduled
    found = parsed(scrape(served))
    where = {"target": "web", "vantage": "eu"}
    name = "phasewatch_schedule_lateness_seconds"
    assert value(found, f"{name}_count", **where) == 5
    assert value(found, f"{name}_sum", **where) == pytest.approx(0.03 + 0.3 + 2.0 + 45.0)
    assert value(found, f"{name}_bucket", **where, le="0.05") == 2
    assert value(found, f"{name}_bucket", **where, le="2.5") == 4
    assert value(found, f"{name}_bucket", **where, le="30.0") == 4


def test_open_alerts_are_counted_by_state_kind_and_target(served: Api) -> None:
    served.failing("down", "eu", 4, minutes_ago(20))
    served.failing("web", "eu", 3, minutes_ago(10))
    found = parsed(scrape(served))
    alerts = {tuple(sorted(s.labels.items())): s.value for s in found["phasewatch_alerts"]}
    assert alerts == {
        (("kind", "probe_failing"), ("state", "firing"), ("target", "down")): 1.0,
        (("kind", "probe_failing"), ("state", "pending"), ("target", "web")): 1.0,
    }
    (firing,) = served.client.get("/api/v1/alerts", params={"state": "firing"}).json()["items"]
    path = f"/api/v1/alerts/{firing['id']}/acknowledge"
    assert served.client.post(path, json={"by": "me"}).status_code == 200
    assert [s.labels["target"] for s in parsed(scrape(served))["phasewatch_alerts"]] == ["web"]


def test_spooled_runs_are_a_gauge(served: Api) -> None:
    assert value(parsed(scrape(served)), "phasewatch_spooled_runs") == 0
    rng = np.random.default_rng(1)
    for k in range(2):
        served.service.writer.spool.append(record_of(make_run(rng, minutes_ago(k), n=2)))
    assert value(parsed(scrape(served)), "phasewatch_spooled_runs") == 2


def test_labels_are_bounded_never_run_ids_or_messages(served: Api) -> None:
    records = feed(served)
    served.failing("down", "eu", 4, minutes_ago(20))
    text = scrape(served)
    found = parsed(text)
    names = {name for samples in found.values() for s in samples for name in s.labels}
    assert names <= ALLOWED_LABELS
    for record in records:
        assert str(record.id) not in text
    assert "upstream" not in text and "HTTP503" in text  # the class, never the message


def test_each_app_has_its_own_registry(served: Api, db_url: str, tmp_path: Path) -> None:
    served.store(record_of(make_run(np.random.default_rng(1), minutes_ago(1), HTTP, target="web")))
    (tmp_path / "other").mkdir()
    with api(db_url, tmp_path / "other", targets("web")) as other:
        assert value(parsed(scrape(other)), "phasewatch_runs_stored_total", target="web",
                     vantage="eu") is None  # fmt: skip
    assert value(parsed(scrape(served)), "phasewatch_runs_stored_total", target="web",
                 vantage="eu") == 1  # fmt: skip


def test_openmetrics_is_served_to_a_scraper_that_asks(served: Api) -> None:
    response = served.client.get(
        "/metrics", headers={"accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert response.headers["content-type"].startswith("application/openmetrics-text")
    assert response.text.endswith("# EOF\n")
    plain = served.client.get("/metrics")
    assert plain.headers["content-type"].startswith("text/plain; version=0.0.4")


def test_a_scrape_answers_while_the_database_is_away(tmp_path: Path) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    with api(url, tmp_path, targets("web")) as away:
        found = parsed(scrape(away))
    assert "phasewatch_alerts" not in found  # not readable: left out, not an error
    assert value(found, "phasewatch_spooled_runs") == 0
    assert value(found, "phasewatch_build_info", version=_version()) == 1


def test_a_database_read_that_hangs_is_left_out_of_the_scrape_and_not_asked_again() -> None:
    """A frozen database: the scrape still brings the rest, and each scrape waits on the
    read in flight instead of leaving one more thread behind on the database."""
    release, calls = threading.Event(), []

    def hangs() -> list[AlertCount]:
        calls.append(1)
        release.wait(60)
        return [("firing", "probe_failing", "web", 1)]

    check = Check(hangs, "test-hangs")
    registry = CollectorRegistry()
    registry.register(ServiceCollector(partial(check.wait, 0.05), lambda: 3))
    try:
        for _ in range(2):
            found = parsed(generate_latest(registry).decode())
            assert "phasewatch_alerts" not in found
            assert value(found, "phasewatch_spooled_runs") == 3
        assert len(calls) == 1
    finally:
        release.set()
    eventually(lambda: check.waiting_s == 0, 30, "the hung read answered")
    assert check.wait(30) == [("firing", "probe_failing", "web", 1)]  # a new read, answered
    assert len(calls) == 2


def _version() -> str:
    from app import __version__

    return __version__


@pytest.mark.process
def test_serve_exposes_its_scheduled_runs(tmp_path: Path) -> None:
    """The real process: the scheduler's runs reach /metrics through the pipeline's hook."""
    with SimServer(FAST_SIM) as sim:
        config = targets_file(tmp_path, sim, "api", interval="1s", samples="3")
        server = Served(tmp_path, config)
        try:
            # Longer than wait_ready allows: importing scipy on a busy machine takes a while.
            eventually(lambda: server.health() is not None or server.process.poll() is not None,
                       90, "serve answering")  # fmt: skip
            assert server.process.poll() is None, server.output()
            eventually(lambda: len(server.runs("api")) >= 2, 15, "two runs stored")
            response = httpx.get(f"http://127.0.0.1:{server.port}/metrics", timeout=5)
            stored = len(server.runs("api"))
        finally:
            server.stop()
            server.kill()
    found = parsed(response.text)
    where = {"target": "api", "vantage": "test-vantage"}
    runs = value(found, "phasewatch_runs_stored_total", **where)
    assert runs is not None and 2 <= runs <= stored
    counted = {"status": "ok", "maintenance": "false"}
    assert value(found, "phasewatch_samples_total", **where, **counted) == 3 * runs
    assert value(found, "phasewatch_schedule_lateness_seconds_count", **where) == runs
    assert value(found, "phasewatch_request_duration_seconds_count", **where) == 3 * runs
    assert value(found, "phasewatch_dominant_phase", **where, phase="server") is not None


def test_llm_metrics_are_histograms_in_seconds_and_token_counters(served: Api) -> None:
    samples = (
        streamed_sample(0, 100, 190, 10, 30, minutes_ago(2)),
        streamed_sample(1, 300, 2280, 100, 400, minutes_ago(2)),
    )
    usage = {"tokens": {"prompt": 20, "completion": 7, "reasoning": None}}
    whole = SampleRecord(2, minutes_ago(2), "ok", 50.0, {"server": 50.0}, details=usage)
    served.store(
        RunRecord(uuid.uuid4(), "chat", "eu", minutes_ago(2), "complete", (*samples, whole))
    )
    found = parsed(scrape(served))
    where = {"target": "chat", "vantage": "eu"}
    expected = {
        "phasewatch_ttft_seconds": [0.1, 0.3],
        "phasewatch_tpot_seconds": [0.01, 0.02],
        "phasewatch_stall_seconds": [0.03, 0.4],
        "phasewatch_itl_p90_seconds": [0.012, 0.012],
    }
    for name, values_s in expected.items():  # the whole answer has none of them
        assert value(found, f"{name}_count", **where) == len(values_s), name
        assert value(found, f"{name}_sum", **where) == pytest.approx(sum(values_s)), name
    assert value(found, "phasewatch_tpot_seconds_bucket", **where, le="0.01") == 1
    assert value(found, "phasewatch_input_tokens_total", **where) == 60
    assert value(found, "phasewatch_output_tokens_total", **where) == 117
    assert value(found, "phasewatch_reasoning_tokens_total", **where) is None
