"""`phasewatch serve` and `phasewatch agent` as real processes on loopback, for the agent
process tests: launching them, and reading what the server stored and lists."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest
from sqlalchemy import select

from app.store.db import make_engine, make_sessions
from app.store.models import Base, RunRow, SampleRow, TargetRow
from tests.helpers import eventually


class Process:
    """``wrap`` goes before the command: a program that ends by exec'ing the rest."""

    def __init__(
        self, log: Path, command: list[str], env: dict[str, str], wrap: tuple[str, ...] = ()
    ) -> None:
        self.path = log
        self.log: IO[str] = log.open("a")
        self.process = subprocess.Popen(
            [*wrap, sys.executable, "-m", "app", *command],
            env=os.environ | env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=15)
        self.log.close()

    def kill(self) -> None:
        """A crash: SIGKILL, nothing flushed."""
        self.process.kill()
        self.process.wait()
        self.log.close()

    def output(self) -> str:
        return self.path.read_text()


@pytest.fixture
def processes() -> Iterator[list[Process]]:
    started: list[Process] = []
    yield started
    for process in started:
        if process.process.poll() is None:
            process.process.kill()
            process.process.wait()
        process.log.close()


def start_serve(
    tmp_path: Path, config: Path, port: int, db_url: str, vantage: str = "server-1", **env: str
) -> Process:
    variables = {
        "PHASEWATCH_DATABASE_URL": db_url,
        "PHASEWATCH_SPOOL_DIR": str(tmp_path / "server-spool"),
        "PHASEWATCH_VANTAGE": vantage,
        **env,
    }
    command = ["serve", "--config", str(config), "--port", str(port)]
    served = Process(tmp_path / "serve.log", command, variables)
    try:
        eventually(lambda: up(port) or served.process.poll() is not None, 30, "serve up")
        assert served.process.poll() is None, served.output()
    except AssertionError:
        served.kill()  # not handed to the caller: nobody else would end it
        raise
    return served


def start_agent(
    tmp_path: Path, port: int, vantage: str, token: str, wrap: tuple[str, ...] = (), **env: str
) -> Process:
    command = ["agent", "--server", f"http://127.0.0.1:{port}", "--vantage", vantage]
    variables = {
        "PHASEWATCH_AGENT_TOKEN": token,
        "PHASEWATCH_SPOOL_DIR": str(tmp_path / f"{vantage}-spool"),
        **env,
    }
    return Process(tmp_path / f"{vantage}.log", [*command, "--refresh", "1"], variables, wrap)


def up(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code < 600
    except httpx.HTTPError:
        return False


def api(port: int, path: str, **params: Any) -> Any:
    """``GET /api/v1{path}``'s JSON, or None while the server does not answer it."""
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/api/v1{path}", params=params, timeout=5)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.is_success else None


def listed_vantages(port: int, target: str) -> set[str]:
    found = api(port, "/runs", target=target, limit=500)
    return {run["vantage"] for run in found["items"]} if found else set()


def spooled(tmp_path: Path, vantage: str) -> int:
    path = tmp_path / f"{vantage}-spool" / "runs.jsonl"
    return len(path.read_text().splitlines()) if path.exists() else 0


def stored(db_url: str) -> tuple[list[tuple[str, str, str]], list[str]]:
    """(vantage, target, status) of every run, and every sample's request id."""
    engine = make_engine(db_url)
    try:
        with make_sessions(engine)() as session:
            query = select(RunRow.vantage, TargetRow.name, RunRow.status).join(TargetRow)
            runs = [(str(v), str(t), str(s)) for v, t, s in session.execute(query)]
            details = session.scalars(select(SampleRow.details))
            return runs, [str(found.get("request_id")) for found in details]
    finally:
        engine.dispose()


def database_dump(db_url: str) -> str:
    engine = make_engine(db_url)
    try:
        with engine.connect() as connection:
            tables = Base.metadata.sorted_tables
            return "\n".join(repr(row) for t in tables for row in connection.execute(t.select()))
    finally:
        engine.dispose()
