"""Schemathesis, every check, against a real `serve` holding runs, alerts and a silence: the
API answers what /openapi.json says, and never a 5xx.

Bounded: a fixed seed, at most ``EXAMPLES`` cases per operation and phase, one worker, a
timeout per request and one for the whole run. The exceptions to the checks, each a rule
no schema can state, are in schemathesis.toml beside this file.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select

from app.analysis.maintenance import MaintenanceWindow
from app.config import Settings, TargetsFile
from app.main import build_service
from app.runtime.service import Service
from app.store.migrate import upgrade
from app.store.models import AlertRow
from app.store.records import RunRecord
from tests.runfactory import failed_run, make_run, record_of
from tests.runtime.test_serve import Served

pytestmark = [pytest.mark.process, pytest.mark.timeout(600)]
CONFIG = Path(__file__).with_name("schemathesis.toml")
TOKEN = "schemathesis-token-0123456789"
EXAMPLES = 25
RUN_TIMEOUT_S = 480
TARGETS = """\
targets:
  - name: chat
    url: http://127.0.0.1:9/
    interval: 1d
  - name: openai/gpt-4o
    url: http://127.0.0.1:9/
    interval: 1d
"""


def stored_runs(now: datetime) -> list[RunRecord]:
    """Healthy runs of two targets (one with a '/' in its name) at one vantage, and
    failing runs of one at another: enough for a firing probe_failing alert."""
    rng = np.random.default_rng(1)
    records = [
        record_of(make_run(rng, now - timedelta(minutes=50 - 5 * k), target=name, n=5))
        for k in range(8)
        for name in ("chat", "openai/gpt-4o")
    ]
    return records + [
        record_of(failed_run(now - timedelta(minutes=10 - k), target="chat", vantage="us"))
        for k in range(4)
    ]


def seed(service: Service) -> dict[str, str]:
    """Stores runs through the service's own pipeline and alert engine, a silence
    and a maintenance window; returns the ids schemathesis.toml gives the detail routes."""
    now = datetime.now(UTC)
    records = stored_runs(now)
    for record in records:
        assert service.sink.store(record)
        service.after_store(record)
    with service.sessions() as session:
        alert = session.scalars(select(AlertRow.id).where(AlertRow.state == "firing")).one()
    silence = service.alerts.create_silence(
        [{"name": "target", "value": "openai/gpt-4o"}], now, now + timedelta(hours=2), "seed"
    )
    assert service.alerts.maintenance is not None
    window = MaintenanceWindow.model_validate(
        {"name": "seeded", "targets": ["chat"], "cron": "0 3 * * sat", "duration": "2h"}
    )
    stored = service.alerts.maintenance.create(window, "seed", now)
    return {
        "PHASEWATCH_ST_WINDOW_ID": str(stored.id),
        "PHASEWATCH_ST_RUN_ID": str(records[0].id),
        "PHASEWATCH_ST_ALERT_ID": str(alert),
        "PHASEWATCH_ST_SILENCE_ID": str(silence.id),
    }


def seeded_database(tmp_path: Path, config: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path}/pw.db"  # the database Served points serve at
    upgrade(url)
    settings = Settings(config=config, database_url=url, spool_dir=tmp_path / "seed-spool")
    service = build_service(settings, TargetsFile.model_validate({"targets": []}))
    try:
        return seed(service)
    finally:
        service.engine.dispose()


def schemathesis(
    server: Served, env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "schemathesis.cli", "--no-color"]
    command += ["--config-file", str(CONFIG), "run", f"http://127.0.0.1:{server.port}/openapi.json"]
    command += ["--max-examples", str(EXAMPLES), "--seed", "1"]
    command += ["--workers", "1", "--request-timeout", "10"]
    environ = os.environ | env | {"PHASEWATCH_API_TOKEN": TOKEN}
    return subprocess.run(
        command,
        env=environ,
        cwd=cwd,  # its cache (.schemathesis/) goes there
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_schemathesis_finds_no_failure_against_a_serve_with_data(
    tmp_path: Path, served: Callable[..., Served], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "phasewatch.yaml"
    config.write_text(TARGETS)
    ids = seeded_database(tmp_path, config)
    monkeypatch.setenv("PHASEWATCH_API_TOKEN", TOKEN)
    server = served(config)
    server.wait_ready()
    result = schemathesis(server, ids, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failures" not in result.stdout.lower()
    assert server.process.poll() is None, server.output()
