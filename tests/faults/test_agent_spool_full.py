"""An agent whose spool's disk fills while its server is down: no write leaves half a line,
a line that cannot be set aside in ``rejected.jsonl`` (the disk is full) is counted and the
flush goes on, the runs a push stored leave the spool even on a full disk, so the agent
never pushes the same runs again and again, and it stores new runs as soon as the server
is back.

The agent runs with its spool on a small tmpfs of its own (``tests/faults/tmpfs.py``); the
server (``serve`` on SQLite) is stopped, then started again on the same port and file.
The runs it was pushed are counted by its ``phasewatch_agent_runs_pushed`` (a replay
counts again) and set against the runs it stored meanwhile.
"""

from __future__ import annotations

import fcntl
import json
import re
import time
from pathlib import Path

import httpx
import pytest

from app.demo.sim.server import SimServer
from tests import agentprocs
from tests.agentprocs import Process, processes
from tests.faults.support import stored
from tests.faults.tmpfs import in_own_mount_namespace, seen_by, tmpfs
from tests.helpers import eventually, free_port

pytestmark = [pytest.mark.process, pytest.mark.timeout(300)]
__all__ = ["processes"]  # the fixture, used by name

VANTAGE, TOKEN = "edge-1", "token-edge-1-0123456789abcdef"
TARGETS = 5  # at 1 s; their journals in flight take a page each of the tmpfs
SPOOL_SIZE = "48k"  # room for a few dozen runs: full within a minute
NOT_A_RUN = b'{"not": "a run"}\n'  # set aside at the flush: rejected.jsonl, on a full disk
# Pushed but not stored, at most, once the server is back: a batch whose answer was lost
# as the server went away, pushed again once. A push loop makes thousands.
REPLAYS_MAX = 50
WATCH_S = 20.0  # after the spool drained, how long the pushes are watched


def config_file(tmp_path: Path, sim: SimServer) -> Path:
    one = "  - name: t{n}\n    kind: http\n    url: {url}/health\n    interval: 1s\n"
    path = tmp_path / "phasewatch.yaml"
    path.write_text(
        f"vantages:\n  {VANTAGE}: {{token: {TOKEN}}}\ntargets:\n"
        + "".join(
            one.format(n=n, url=sim.url) + f"    samples: 1\n    vantages: [{VANTAGE}]\n"
            for n in range(TARGETS)
        )
    )
    return path


def spool_lines(spool: Path) -> list[bytes]:
    """The spool's lines, read under its lock as the agent reads and writes it."""
    try:
        with (spool / "runs.lock").open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = (spool / "runs.jsonl").read_bytes()
    except FileNotFoundError:
        return []
    assert data.endswith(b"\n"), f"a torn last line: {data[-80:]!r}"
    return data.split(b"\n")[:-1]


def plant(spool: Path, line: bytes) -> None:
    with (spool / "runs.lock").open() as lock, (spool / "runs.jsonl").open("ab") as file:
        fcntl.flock(lock, fcntl.LOCK_EX)
        file.write(line)


def pushed(port: int) -> int:
    scraped = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    found = re.search(
        rf'^phasewatch_agent_runs_pushed{{vantage="{VANTAGE}"}} (\S+)$', scraped, re.M
    )
    return int(float(found.group(1))) if found else 0


def agent_runs(url: str) -> set[str]:
    return {run.id for run in stored(url)}


def test_an_agent_on_a_full_disk_never_tears_a_line_nor_pushes_the_same_runs_in_a_loop(
    tmp_path: Path, sim: SimServer, processes: list[Process]
) -> None:
    config, port, url = config_file(tmp_path, sim), free_port(), f"sqlite:///{tmp_path}/pw.db"
    spool = tmp_path / f"{VANTAGE}-spool"
    spool.mkdir()
    processes.append(agentprocs.start_serve(tmp_path, config, port, url))
    wrap = in_own_mount_namespace(tmpfs(SPOOL_SIZE), spool)
    agent = agentprocs.start_agent(tmp_path, port, VANTAGE, TOKEN, wrap=wrap)
    processes.append(agent)
    eventually(lambda: len(agent_runs(url)) >= TARGETS, 60, "the agent's runs stored")
    seen = seen_by(agent.process.pid, spool)

    processes[0].stop()  # the server goes away
    eventually(lambda: len(spool_lines(seen)) >= 1, 30, "runs spooled")
    plant(seen, NOT_A_RUN)
    mark = len(agent.output())
    full = "full: No space left"
    eventually(lambda: full in agent.output()[mark:], 120, "the spool's disk full")
    eventually(lambda: len(spool_lines(seen)) > 2, 5, "runs behind the planted line")
    time.sleep(3)  # and more held in memory, behind them
    lines = spool_lines(seen)
    assert all(json.loads(line) for line in lines)  # whole lines only, none torn
    kept = {json.loads(line).get("id") for line in lines} - {None}
    before = agent_runs(url)

    processes[0] = agentprocs.start_serve(tmp_path, config, port, url)
    eventually(lambda: not spool_lines(seen), 60, "the spool drained")
    back = len(agent_runs(url))
    eventually(lambda: len(agent_runs(url)) >= back + WATCH_S * TARGETS / 2, 60, "new runs stored")

    pushes = pushed(port)  # first: every run counted there is in the database by then
    now = agent_runs(url)
    replays = pushes - len(now - before)
    assert replays <= REPLAYS_MAX, (replays, len(now - before))  # no push loop
    assert kept <= now, "a spooled run never stored"
    output = agent.output()
    assert output.count("not set aside in rejected.jsonl") == 1, output[-3000:]
    assert "1 run(s) lost: refused for good and not set aside" in output
    agent.stop()
    assert agent.process.returncode == 0, output[-3000:]
