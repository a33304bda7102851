"""SIGTERM stops ``serve`` within its budget in every case, and by itself (exit code 0):
a client that holds a request body open gets the web server's bounded drain, a frozen
(not refusing) PostgreSQL gets the store stage's budget, and what it could not store by
then waits in the spool. The stop times are measured in ``bench/stop_time.py``.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from app.demo.sim.server import SimServer
from tests.faults.support import journalled_for, stop, stored, targets_file
from tests.helpers import eventually
from tests.pgcluster import PgCluster, Serve

pytestmark = pytest.mark.process

PARTIAL_POST = (
    b"POST /api/v1/silences HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    b"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n"
    b'{"matchers": {"target": '
)


def test_sigterm_stops_serve_although_a_client_holds_a_request_body_open(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = targets_file(tmp_path, sim, "api", interval="1s", samples="1")
    served = serve("serve", config, PHASEWATCH_DATABASE_URL=f"sqlite:///{tmp_path}/pw.db")
    served.wait_ready()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as client:
        client.sendall(PARTIAL_POST)  # and never the rest
        time.sleep(0.5)  # the request has reached the app, which waits for its body
        assert stop(served) == 0, served.output()
    output = served.output()
    assert "timeout graceful shutdown exceeded" in output  # the drain's bound, not the client
    assert "stopped in" in output


@pytest.mark.postgres
def test_sigterm_stops_serve_while_postgres_is_frozen_and_spools_what_it_did_not_store(
    tmp_path: Path, cluster: PgCluster, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    config = targets_file(tmp_path, sim, "api", interval="1s", samples="2")
    env = {"PHASEWATCH_DATABASE_URL": cluster.url, "PHASEWATCH_LEADER_CHECK_S": "1"}
    served = serve("frozen", config, **env)
    served.wait_ready()
    eventually(lambda: len(stored(cluster.url)) >= 2, 15, "two runs stored")

    cluster.freeze()
    eventually(lambda: journalled_for(served.spool_dir, 2.0), 15, "a store stuck")
    assert stop(served) == 0, served.output()
    output = served.output()
    assert "storing the last runs" not in output  # the writer's close kept its own budget
    assert "the database did not take left in the spool" in output, output
    spooled = served.spooled_ids()
    assert spooled

    cluster.thaw()
    again = serve("again", config, PHASEWATCH_SPOOL_DIR=str(served.spool_dir), **env)
    again.wait_ready()
    eventually(lambda: not again.spooled_ids(), 20, "the spool flushed")
    ids = [run.id for run in stored(cluster.url)]
    assert len(ids) == len(set(ids))
    assert set(spooled) <= set(ids)
    assert stop(again) == 0
