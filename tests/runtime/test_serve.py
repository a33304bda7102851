"""`phasewatch serve` as a real process: migrates, probes on schedule, reloads, stops cleanly."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from app.demo.sim.server import SimServer
from app.store.db import make_engine, make_sessions
from app.store.models import RunRow, TargetRow
from tests.helpers import eventually, parsed, value
from tests.pgcluster import Serve

pytestmark = pytest.mark.process


class Served(Serve):
    """``phasewatch serve`` on a SQLite file in ``tmp_path`` (tests.pgcluster's ``Serve``,
    the one launcher, with this module's database, spool and vantage), and its runs."""

    def __init__(self, tmp_path: Path, config: Path, *args: str) -> None:
        self.url = f"sqlite:///{tmp_path}/pw.db"
        env = {
            "PHASEWATCH_DATABASE_URL": self.url,
            "PHASEWATCH_SPOOL_DIR": str(tmp_path / "spool"),
            "PHASEWATCH_VANTAGE": "test-vantage",
        }
        super().__init__(tmp_path, config, env, args)

    def runs(self, target: str | None = None) -> list[RunRow]:
        engine = make_engine(self.url)
        try:
            with make_sessions(engine)() as session:
                query = select(RunRow).join(TargetRow).order_by(RunRow.started_at)
                if target is not None:
                    query = query.where(TargetRow.name == target)
                return list(session.scalars(query))
        finally:
            engine.dispose()

    def stop(self) -> float:
        return self.terminate()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    started: list[Served] = []

    def start(config: Path, *args: str) -> Served:
        started.append(Served(tmp_path, config, *args))
        return started[-1]

    yield start
    for process in started:
        process.kill()


def targets_file(tmp_path: Path, sim: SimServer, *targets: str, **fields: str) -> Path:
    entries = "".join(
        f"  - name: {name}\n    kind: http\n    url: {sim.url}/health\n"
        + "".join(f"    {key}: {value}\n" for key, value in fields.items())
        for name in targets
    )
    path = tmp_path / "phasewatch.yaml"
    path.write_text(f"targets:\n{entries}")
    return path


def test_serve_migrates_probes_on_schedule_and_answers_healthz(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    config = targets_file(tmp_path, sim, "api", interval="1s", samples="3")
    server = served(config)
    server.wait_ready()
    eventually(lambda: len(server.runs("api")) >= 2, 30, "two runs stored")
    health = httpx.get(f"http://127.0.0.1:{server.port}/healthz", timeout=5)
    assert health.status_code == 200
    body = health.json()
    assert body["status"] == "ok" and body["leader"] is True and body["targets"] == 1
    assert body["vantage"] == "test-vantage"
    run = server.runs("api")[0]
    assert (run.status, run.n_samples, run.vantage) == ("complete", 3, "test-vantage")
    assert run.scheduled_at is not None and run.started_at >= run.scheduled_at
    server.stop()  # how soon it exits: bench.stop_time
    # uvicorn re-raises the SIGTERM it caught once shutdown is complete.
    assert server.process.returncode in (0, -signal.SIGTERM)
    assert "Application shutdown complete" in server.output()


def test_sigterm_during_a_run_stores_it_as_aborted(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    # One long run: 200 samples 50 ms apart; SIGTERM lands in the middle of it.
    config = targets_file(tmp_path, sim, "long", interval="1s", samples="200", spacing="50ms")
    server = served(config)
    server.wait_ready()
    eventually(lambda: list((tmp_path / "spool" / "inflight").glob("*.json")), 30, "in flight")
    time.sleep(0.5)  # ten samples' spacing: a few samples in, most still to come
    server.stop()  # the seconds it takes are bench.stop_time's
    runs = server.runs("long")
    assert [run.status for run in runs] == ["aborted"]
    assert 0 < runs[0].n_samples < 200
    assert not list((tmp_path / "spool" / "inflight").glob("*.json"))


def test_a_target_skipped_slot_after_slot_is_named_on_healthz_until_a_run_begins(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    # Each run lasts about 4 s (80 samples 50 ms apart) on a 1 s interval: the slots in
    # between are skipped, ``running``.
    config = targets_file(tmp_path, sim, "long", interval="1s", samples="80", spacing="50ms")
    server = served(config)
    server.wait_ready()
    base = f"http://127.0.0.1:{server.port}"

    def health() -> dict[str, Any]:
        answer: dict[str, Any] = httpx.get(f"{base}/healthz", timeout=5).json()
        return answer

    degraded = eventually(lambda: (h := health())["status"] == "degraded" and h, 30, "named")
    (problem,) = degraded["problems"]
    assert problem.startswith("target long: ")
    assert problem.endswith(
        " due runs skipped in a row, the latest because the previous run is still going"
    )
    assert int(problem.split()[2]) >= 2
    # The next run begins: the streak is over, and /healthz says nothing of it until two
    # more slots go.
    eventually(lambda: health()["problems"] == [], 30, "the streak over once a run began")
    scrape = parsed(httpx.get(f"{base}/metrics", timeout=5).text)
    labels = {"target": "long", "vantage": "test-vantage", "reason": "running"}
    assert (value(scrape, "phasewatch_runs_skipped_total", **labels) or 0) >= 2
    assert server.output().count("target long: a due run skipped") >= 1


def test_editing_the_targets_file_adds_and_removes_jobs_without_restart(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    config = targets_file(tmp_path, sim, "first", interval="1s", samples="1")
    server = served(config)
    server.wait_ready()
    eventually(lambda: len(server.runs("first")) >= 1, 30, "first target probed")

    targets_file(tmp_path, sim, "second", interval="1s", samples="1")
    eventually(lambda: len(server.runs("second")) >= 2, 30, "second target probed after edit")
    stopped_at = len(server.runs("first"))
    time.sleep(2)
    assert len(server.runs("first")) <= stopped_at + 1  # at most the run already in flight
    assert "targets reloaded" in server.output()


def test_sighup_reloads_and_a_broken_file_keeps_the_running_targets(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    config = targets_file(tmp_path, sim, "steady", interval="1s", samples="1")
    server = served(config)
    server.wait_ready()
    config.write_text("targets:\n  - name: steady\n    url: not-a-url\n")
    server.process.send_signal(signal.SIGHUP)
    eventually(lambda: "reload refused" in server.output(), 30, "bad file refused")
    before = len(server.runs("steady"))
    eventually(lambda: len(server.runs("steady")) >= before + 2, 30, "still probing")
    assert "targets[steady].url" in server.output()


def test_no_migrate_refuses_a_database_whose_schema_is_behind(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    server = served(targets_file(tmp_path, sim, "api"), "--no-migrate")
    assert server.process.wait(timeout=20) == 1
    assert "run 'phasewatch db upgrade'" in server.output()


def test_an_invalid_targets_file_names_every_problem_and_starts_nothing(
    tmp_path: Path, served: Callable[..., Served]
) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text("targets:\n  - name: a\n    url: http://x/\n    samples: 0\n")
    server = served(config)
    assert server.process.wait(timeout=20) == 1
    output = server.output()
    assert (
        "phasewatch.yaml:4: targets[a].samples: Input should be greater than or equal to 1"
        in output
    )
    assert "nothing started" in output


def test_serve_logs_once_when_a_target_starts_and_stops_failing_and_per_alert_change(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served], refused_port: int
) -> None:
    config = tmp_path / "phasewatch.yaml"

    def point_at(url: str) -> None:
        config.write_text(
            f"targets:\n  - name: flaky\n    url: {url}\n    interval: 1s\n    samples: 2\n"
        )

    point_at(f"http://127.0.0.1:{refused_port}/health")
    server = served(config)
    server.wait_ready()
    fired = "WARNING app.alerts.engine: alert firing: probe_failing flaky at test-vantage: "
    eventually(lambda: fired in server.output(), 60, "probe_failing fired and logged")
    point_at(f"{sim.url}/health")
    resolved = "INFO app.alerts.engine: alert resolved: probe_failing flaky at test-vantage: "
    eventually(lambda: resolved in server.output(), 60, "probe_failing resolved and logged")
    server.stop()

    lines = server.output().splitlines()
    failing = [line for line in lines if "target flaky is failing at test-vantage: " in line]
    again = [line for line in lines if "target flaky answers again at test-vantage" in line]
    assert len(failing) == 1 and len(again) == 1, server.output()
    assert "2/2 samples failed (2 × ConnectError: " in failing[0]
    assert [line for line in lines if fired in line][0].endswith(
        "probe failing on flaky: every request failed in 3 runs at test-vantage"
    )
    assert sum(fired in line for line in lines) == 1
    assert sum(resolved in line for line in lines) == 1


KEYED = """targets:
  - name: keyed
    kind: http
    url: {url}/health
    interval: 1s
    samples: 1
    vantages: [test-vantage]
    headers:
      X-Key: "${{{variable}}}"
  - name: plain
    kind: http
    url: {url}/health
    interval: 1s
    samples: 1
"""


def test_a_target_refused_for_an_unset_variable_is_a_problem_everywhere(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PW_TEST_UNSET_KEY", raising=False)
    config = tmp_path / "phasewatch.yaml"
    config.write_text(KEYED.format(url=sim.url, variable="PW_TEST_UNSET_KEY"))
    server = served(config)
    server.wait_ready()
    eventually(lambda: len(server.runs("plain")) >= 1, 30, "the other target probed")
    base = f"http://127.0.0.1:{server.port}"
    health = httpx.get(f"{base}/healthz", timeout=5).json()
    assert health["status"] == "degraded"
    (problem,) = health["problems"]
    assert problem.startswith("target keyed not probed at test-vantage:")
    assert problem.endswith(
        "PW_TEST_UNSET_KEY is not set here: set it for this process and restart it"
    )
    scrape = httpx.get(f"{base}/metrics", timeout=5).text
    assert 'phasewatch_target_unprobed{target="keyed",vantage="test-vantage"} 1.0' in scrape
    listed = {t["name"]: t for t in httpx.get(f"{base}/api/v1/targets", timeout=5).json()}
    assert [u["vantage"] for u in listed["keyed"]["unprobed"]] == ["test-vantage"]
    assert listed["plain"]["unprobed"] == []
    assert "target keyed not probed at test-vantage" in httpx.get(base, timeout=5).text
    assert "data-unprobed" in httpx.get(f"{base}/targets/keyed", timeout=5).text
    assert server.output().count("target keyed not probed at test-vantage") == 1  # one line
    assert server.runs("keyed") == []


def test_a_reload_that_would_stop_a_running_target_for_a_variable_is_refused_whole(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PW_TEST_KEY", "s3cret-value")
    monkeypatch.delenv("PW_TEST_UNSET_KEY", raising=False)
    config = tmp_path / "phasewatch.yaml"
    config.write_text(KEYED.format(url=sim.url, variable="PW_TEST_KEY"))
    server = served(config)
    server.wait_ready()
    eventually(lambda: len(server.runs("keyed")) >= 1, 30, "the keyed target probed")
    config.write_text(KEYED.format(url=sim.url, variable="PW_TEST_UNSET_KEY"))
    server.process.send_signal(signal.SIGHUP)
    eventually(lambda: "reload refused" in server.output(), 30, "the reload refused")
    before = len(server.runs("keyed"))
    eventually(lambda: len(server.runs("keyed")) >= before + 2, 30, "still probed")
    base = f"http://127.0.0.1:{server.port}"
    health = httpx.get(f"{base}/healthz", timeout=5).json()
    assert health["status"] == "degraded"
    assert health["problems"] == [
        "reload refused, keeping the running targets: target keyed would stop: environment"
        " variable PW_TEST_UNSET_KEY is not set here: set it for this process and restart it"
    ]
    assert "phasewatch_reload_refused 1.0" in httpx.get(f"{base}/metrics", timeout=5).text
    assert "s3cret-value" not in server.output()


def test_a_second_serve_on_the_same_sqlite_file_is_refused_with_one_line(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    config = targets_file(tmp_path, sim, "api", interval="1s", samples="1")
    first = served(config)
    first.wait_ready()
    # Its own folder (its own log), the first's database.
    second = Serve(tmp_path / "second", config, {"PHASEWATCH_DATABASE_URL": first.url})
    assert second.process.wait(timeout=30) == 1
    second.kill()  # its log closed
    (line,) = [line for line in second.output().splitlines() if line.strip()]
    assert line.startswith(f"phasewatch: error: another phasewatch serve (pid {first.process.pid})")
    assert "pw.db" in line and "PostgreSQL" in line
    assert first.health() is not None  # the first serves on
    first.stop()
    third = Serve(tmp_path / "third", config, {"PHASEWATCH_DATABASE_URL": first.url})
    try:
        third.wait_ready()  # the first's end let go of the file
    finally:
        third.kill()


def test_a_port_taken_is_one_line_and_exit_1_before_anything_starts(
    tmp_path: Path, sim: SimServer, served: Callable[..., Served]
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = served(targets_file(tmp_path, sim, "api"), "--port", str(port))
        assert server.process.wait(timeout=30) == 1
    (line,) = [line for line in server.output().splitlines() if line.strip()]
    assert line.startswith(f"phasewatch: error: cannot listen on 127.0.0.1:{port}:")
    assert not (tmp_path / "pw.db").exists()  # nothing migrated, nothing probed
