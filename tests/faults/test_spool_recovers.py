"""A database away while the spool's disk is full: the runs the disk cannot take wait in
memory, and those the memory cannot take either are lost, counted in /metrics and told in
the log once (with the number), not once a run. When the database is back the backlog
drains, oldest first and in batches, before any new run is dropped: losses stop at once,
and every run that reached the spool (or the memory behind it) is stored exactly once.

serve runs with its spool on a 256 KiB tmpfs of its own (``tests/faults/tmpfs.py``) and
its own PostgreSQL cluster, stopped for as long as it takes runs to be lost.
"""

from __future__ import annotations

import fcntl
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from app.demo.sim.server import SimServer
from app.runs.backlog import HELD_MAX
from tests.faults.support import problems, stop, stored
from tests.faults.tmpfs import in_own_mount_namespace, seen_by, tmpfs
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres, pytest.mark.timeout(420)]

# Room for ~250 runs beside the journals of the runs in flight (a page each on a tmpfs).
SPOOL_SIZE = "256k"
TARGETS = 20  # at 1 s: the memory behind a full spool (HELD_MAX runs) fills in ~50 s
QUIET_S = 8.0  # after the backlog drained, this long without a loss (~160 runs)
# Runs lost after the database is back, at most: those the first flush could not save (a
# second of runs, the pool reconnecting). Before the fix, losses went on for minutes.
LOST_AFTER_BACK = 2 * TARGETS
LOST_TOTAL = re.compile(r"^phasewatch_runs_lost_total (\S+)$", re.MULTILINE)


def targets_file(tmp_path: Path, sim: SimServer) -> Path:
    one = (
        "  - name: t{n}\n    kind: http\n    url: {url}/health\n    interval: 1s\n    samples: 1\n"
    )
    path = tmp_path / "phasewatch.yaml"
    path.write_text("targets:\n" + "".join(one.format(n=n, url=sim.url) for n in range(TARGETS)))
    return path


def lost(served: Serve) -> int:
    scraped = httpx.get(f"{served.base_url}/metrics", timeout=30).text
    found = LOST_TOTAL.search(scraped)
    assert found is not None, "phasewatch_runs_lost_total is not in /metrics"
    return int(float(found.group(1)))


def spooled_ids(spool: Path) -> set[str]:
    """The runs in the spool now, read under its lock as the process reads and writes it
    (none read while the lock file is missing)."""
    try:
        with (spool / "runs.lock").open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            lines = (spool / "runs.jsonl").read_bytes().split(b"\n")
    except FileNotFoundError:
        return set()
    assert lines[-1] == b"", "a torn last line in the spool"
    return {json.loads(line)["id"] for line in lines if line}


def epoch(at: datetime) -> float:
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def test_a_full_spool_loses_only_what_it_cannot_hold_and_drains_before_dropping_any_more(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    env = {"PHASEWATCH_DATABASE_URL": cluster.url, "PHASEWATCH_SPOOL_DIR": str(spool)}
    wrap = in_own_mount_namespace(tmpfs(SPOOL_SIZE), spool)
    served = serve("serve", targets_file(tmp_path, sim), wrap=wrap, **env)
    served.wait_ready()
    eventually(lambda: len(stored(cluster.url)) >= TARGETS, 30, "a run of every target stored")
    seen = seen_by(served.process.pid, spool)

    cluster.stop()
    down = time.time()
    spooled: set[str] = set()

    def losing() -> bool:
        spooled.update(spooled_ids(seen))  # every run seen in the spool must be stored
        return lost(served) > 0

    eventually(losing, 180, "runs lost: the spool and the memory behind it are full")
    assert "runs lost:" in problems(served)
    spooled.update(spooled_ids(seen))
    cluster.start()
    back, lost_then = time.time(), lost(served)

    eventually(lambda: "run(s) lost since" in served.output(), 60, "runs kept again")
    eventually(lambda: not spooled_ids(seen), 60, "the spool flushed")
    assert "runs lost:" not in problems(served)
    drained = lost(served)
    time.sleep(QUIET_S)
    assert lost(served) == drained  # no loss once the backlog drained
    assert drained - lost_then <= LOST_AFTER_BACK, (lost_then, drained)

    runs = stored(cluster.url)
    ids = [run.id for run in runs]
    assert len(ids) == len(set(ids))
    assert spooled and spooled <= set(ids), len(spooled - set(ids))
    during = [run for run in runs if down <= epoch(run.started_at) <= back]
    assert len(during) >= HELD_MAX, len(during)  # the memory behind the spool was stored too
    output = served.output()
    assert output.count("runs are being lost") == 1, output[-3000:]  # once, not per run
    told = [int(n) for n in re.findall(r"(\d+) run\(s\) lost since", output)]
    assert told == [drained], (told, drained)  # told once, with the number counted
    assert stop(served) == 0
