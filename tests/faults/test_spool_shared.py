"""Two ``serve`` processes on one spool directory and one database, as Compose replicas
sharing a data volume are: one's runs in flight are never taken for the other's crash
leftovers, and a process killed with ``kill -9`` still has its run recovered (aborted).
"""

from __future__ import annotations

import contextlib
import json
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from app.demo.sim.server import SimServer
from tests.faults.support import early_name, stop, stored, targets_file
from tests.helpers import eventually
from tests.pgcluster import Serve

pytestmark = [pytest.mark.process, pytest.mark.postgres]

INTERVAL_S = 40.0  # one run in the test's time
SAMPLES = 20  # 1 s apart: a run in flight for 20 s, long enough to start a replica in
RECOVERED = "left by a process that died"
# The target's first run: 5 to 10 s from when the targets file is written (its grid is
# shared by every process, not begun at a process's start), once the leader is up; a
# leader slower to come up than that has it a whole interval later, which the waits allow.
FIRST_RUN_AFTER_S, FIRST_RUN_WITHIN_S = 5.0, 5.0
FIRST_RUN_WAIT_S = FIRST_RUN_AFTER_S + FIRST_RUN_WITHIN_S + INTERVAL_S


def long_runs(tmp_path: Path, sim: SimServer) -> Path:
    name = early_name("long", INTERVAL_S, FIRST_RUN_WITHIN_S, after_s=FIRST_RUN_AFTER_S)
    return targets_file(
        tmp_path, sim, name, interval=f"{INTERVAL_S}s", samples=str(SAMPLES), spacing="1s"
    )


def in_flight(spool: Path, pid: int | None = None) -> list[str]:
    """Run ids journalled in flight (by the process ``pid`` only, if given)."""
    found = []
    for path in (spool / "inflight").glob("*.json" if pid is None else f"{pid}-*.json"):
        with contextlib.suppress(OSError, ValueError):  # gone, or being written
            found.append(json.loads(path.read_text())["id"])
    return found


def replicas(
    tmp_path: Path, postgres_url: str, serve: Callable[..., Serve], sim: SimServer
) -> Callable[[str], Serve]:
    config, spool = long_runs(tmp_path, sim), tmp_path / "shared-spool"
    env = {
        "PHASEWATCH_DATABASE_URL": postgres_url,
        "PHASEWATCH_SPOOL_DIR": str(spool),
        "PHASEWATCH_LEADER_CHECK_S": "1",
    }

    def start(name: str) -> Serve:
        served = serve(name, config, **env)
        served.wait_ready()
        return served

    return start


def test_a_second_serve_on_the_spool_leaves_the_leaders_run_in_flight_alone(
    tmp_path: Path, postgres_url: str, serve: Callable[..., Serve], sim: SimServer
) -> None:
    start = replicas(tmp_path, postgres_url, serve, sim)
    leader = start("leader")
    spool = leader.spool_dir
    eventually(lambda: bool(in_flight(spool)), FIRST_RUN_WAIT_S, "the leader's run in flight")
    (run_id,) = in_flight(spool)

    second = start("second")  # its start looks for leftovers while the run is in flight
    assert in_flight(spool) == [run_id]  # still: the second started during the run
    done = eventually(lambda: any(r.id == run_id for r in stored(postgres_url)), 30, "run stored")

    (run,) = [r for r in stored(postgres_url) if r.id == run_id]
    assert (run.status, run.samples) == ("complete", SAMPLES), (run, done)
    assert RECOVERED not in second.output()
    assert all(r.status == "complete" for r in stored(postgres_url))
    assert (stop(second), stop(leader)) == (0, 0)
    assert not list((spool / "inflight").iterdir())  # both journals and locks gone


def test_a_run_left_by_kill_9_is_recovered_by_the_live_replica_as_aborted(
    tmp_path: Path, postgres_url: str, serve: Callable[..., Serve], sim: SimServer
) -> None:
    start = replicas(tmp_path, postgres_url, serve, sim)
    doomed = start("doomed")
    survivor = start("survivor")  # while the leader's first run is in flight
    spool, pid = doomed.spool_dir, doomed.process.pid
    # The replicas share the target slot by slot: the first slot may be the survivor's
    # (a slow start, and it joined in time), so wait for one of the doomed one's.
    wait_s = FIRST_RUN_WAIT_S + 2 * INTERVAL_S
    eventually(lambda: bool(in_flight(spool, pid)), wait_s, "the doomed one's run in flight")
    (run_id,) = in_flight(spool, pid)

    doomed.process.send_signal(signal.SIGKILL)
    doomed.process.wait(timeout=10)
    eventually(lambda: any(r.id == run_id for r in stored(postgres_url)), 20, "run recovered")

    (run,) = [r for r in stored(postgres_url) if r.id == run_id]
    assert (run.status, run.samples) == ("aborted", 0)  # what its journal knew
    assert f"run {run_id} of" in survivor.output() and RECOVERED in survivor.output()
    assert not list((spool / "inflight").glob(f"{doomed.process.pid}-*"))  # lock and journal
    assert stop(survivor) == 0
