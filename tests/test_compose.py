"""The real stack: docker-compose.yml up with the image built from this checkout.

PostgreSQL and phasewatch with their healthchecks, a simulated endpoint probed on a short
interval, the API and /metrics answering on 127.0.0.1; then what an operator counts on: a
restart of the phasewatch container loses no run, and runs measured while PostgreSQL is
stopped wait in the spool volume and arrive once it is back.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from tests.composestack import Stack, build_images, docker_or_skip, wait_for
from tests.helpers import free_port

ARTIFACTS = Path(__file__).parent / "artifacts"  # the stack's logs, kept for a failed run
INTERVAL_S = 3.0
UP_S = 180.0  # first start: PostgreSQL's initdb, then phasewatch's migrations
TARGET = "sim-chat"
TARGETS_FILE = {
    "targets": [
        {
            "name": TARGET,
            "kind": "openai",
            "url": "http://sim:9000/v1/chat/completions",
            "body": {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]},
            "interval": INTERVAL_S,
            "samples": 2,
            "timeout": 10.0,
        }
    ]
}

pytestmark = [pytest.mark.process, pytest.mark.timeout(900), pytest.mark.docker]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    docker_or_skip()
    images = build_images()
    # Readable by the image's user (uid 10001): pytest's tmp_path sits under a 0700 folder.
    workdir = Path(tempfile.mkdtemp(prefix="phasewatch-compose-"))
    workdir.chmod(0o755)
    (workdir / "phasewatch.yaml").write_text(yaml.safe_dump(TARGETS_FILE))
    (workdir / "phasewatch.yaml").chmod(0o644)
    running = Stack(workdir, free_port(), images)
    try:
        running.compose("up", "-d")
        yield running
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "compose.log").write_text(running.logs())
        running.down()
        shutil.rmtree(workdir)


def _run_ids(stack: Stack) -> dict[str, datetime]:
    page = stack.get("/api/v1/runs", target=TARGET, limit=1000)
    assert page.status_code == 200, page.text
    items = page.json()["items"]
    return {item["id"]: datetime.fromisoformat(item["started_at"]) for item in items}


def _spooled(stack: Stack) -> float:
    for line in stack.get("/metrics").text.splitlines():
        if line.startswith("phasewatch_spooled_runs "):
            return float(line.split()[1])
    raise AssertionError("/metrics has no phasewatch_spooled_runs")


def _healthy(stack: Stack) -> bool:
    return stack.health("postgres") == "healthy" and stack.health("phasewatch") == "healthy"


def test_both_healthchecks_pass(stack: Stack) -> None:
    wait_for(lambda: _healthy(stack), UP_S, "postgres and phasewatch healthy")


def test_the_service_runs_unprivileged_on_a_read_only_targets_file(stack: Stack) -> None:
    assert stack.compose("exec", "-T", "phasewatch", "id", "-u").strip() == "10001"
    with pytest.raises(AssertionError, match="Read-only file system"):
        stack.compose(
            "exec", "-T", "-u", "root", "phasewatch", "touch", "/etc/phasewatch/phasewatch.yaml"
        )


def test_compose_refuses_to_start_without_the_token(stack: Stack) -> None:
    unset = {name: value for name, value in stack.env.items() if name != "PHASEWATCH_API_TOKEN"}
    with pytest.raises(AssertionError, match="set PHASEWATCH_API_TOKEN"):
        stack.compose("config", "--quiet", env=unset)


def test_runs_are_stored_and_served(stack: Stack) -> None:
    wait_for(lambda: len(_run_ids(stack)) >= 2, 10 * INTERVAL_S, "two runs stored")
    run = stack.get("/api/v1/runs", target=TARGET, limit=1).json()["items"][0]
    assert run["status"] == "complete" and run["n_ok"] == 2, run
    assert run["vantage"] == "phasewatch"  # the compose file's stable host name
    metrics = stack.get("/metrics")
    assert metrics.status_code == 200
    assert f'phasewatch_runs_stored_total{{target="{TARGET}",vantage="phasewatch"}}' in metrics.text


def test_a_restart_loses_no_run(stack: Stack) -> None:
    before = _run_ids(stack)
    restarted_at = datetime.now(UTC)
    stack.compose("restart", "phasewatch")
    wait_for(lambda: _healthy(stack), UP_S, "phasewatch healthy after its restart")
    wait_for(
        lambda: any(at > restarted_at for at in _run_ids(stack).values()),
        10 * INTERVAL_S,
        "a run after the restart",
    )
    assert before.keys() <= _run_ids(stack).keys()


def test_runs_during_a_database_outage_arrive_afterwards(stack: Stack) -> None:
    stopped_at = datetime.now(UTC)
    stack.compose("stop", "postgres")
    wait_for(lambda: _spooled(stack) >= 2, 10 * INTERVAL_S, "two intervals' runs spooled")
    assert stack.health("phasewatch") == "healthy"  # spooling is not a failure
    stack.compose("start", "postgres")
    wait_for(lambda: _spooled(stack) == 0, UP_S, "the spool flushed")
    during = [at for at in _run_ids(stack).values() if at > stopped_at]
    assert len(during) >= 2, during
