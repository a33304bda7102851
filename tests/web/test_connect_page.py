"""The target page shows the last hour's connect split and says when connect moved between
DNS, TCP and TLS; the API's breakdown has the window's split: SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from pathlib import Path

from app.clock import utcnow
from app.config import Settings, TargetsFile
from app.config.targets import Target
from app.main import create_app
from app.store.db import make_engine, make_sessions, transaction
from app.store.ingest import store_run
from app.store.records import RunRecord, RunStatus, SampleRecord
from tests.apiapp import in_process


def run_at(at: datetime, dns: float, tcp: float, tls: float) -> RunRecord:
    connect = dns + tcp + tls
    samples = tuple(
        SampleRecord(
            idx=i,
            started_at=at + timedelta(seconds=i),
            status="ok",
            total_ms=connect + 10,
            phases={"connect": connect, "network": 1, "server": 8, "transfer": 1},
            details={
                "connect_split": {"dns": dns, "tcp": tcp, "tls": tls},
                "address_family": "ipv4",
            },
        )
        for i in range(4)
    )
    return RunRecord(uuid.uuid4(), "chat", "eu", at, RunStatus.COMPLETE, samples, finished_at=at)


def test_the_target_page_shows_the_split_and_notes_a_move_to_dns(
    db_url: str, tmp_path: Path
) -> None:
    now = utcnow()
    engine = make_engine(db_url)
    with transaction(make_sessions(engine)) as session:
        store_run(session, run_at(now - timedelta(hours=3), 1, 2, 20), now)
        store_run(session, run_at(now - timedelta(minutes=10), 90, 2, 20), now)
    engine.dispose()
    settings = Settings(
        database_url=db_url, spool_dir=tmp_path / "spool", vantage="eu", config=tmp_path / "no"
    )
    targets = TargetsFile(targets=[Target(name="chat", url="http://127.0.0.1:9/")])
    app = create_app(settings, targets)
    try:
        with in_process(app) as client:
            page = client.get("/targets/chat?vantage=eu")
            api = client.get("/api/v1/targets/chat/breakdown?vantage=eu").json()
    finally:
        app.state.service.engine.dispose()
    assert page.status_code == 200
    assert "connect, 4 new connections (ipv4), median: dns 90" in page.text
    assert "connect moved from tls to dns: dns 1.0 → 90.0 ms median" in page.text
    # The API's breakdown (the last 24 hours: both runs) has the split of the same samples.
    assert api["connect_split"] == {
        "n": 8,
        "medians": {"dns": 45.5, "tcp": 2.0, "tls": 20.0},
        "families": {"ipv4": 8},
    }
