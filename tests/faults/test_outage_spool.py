"""A spool directory that is read-only or full never stops probing while the database is
up: every run is stored, /healthz says what is wrong with the spool, the log says it once
(not a traceback per run), and no failed write leaves a file behind.

The spool is a tmpfs mounted in a mount namespace of serve's own (``unshare``), so the
test needs no mount on the machine and leaves none; its files are seen through
``/proc/<pid>/root``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from app.demo.sim.server import SimServer
from tests.faults.support import problems, quick_health, stop, stored, targets_file
from tests.faults.tmpfs import in_own_mount_namespace, seen_by
from tests.helpers import eventually
from tests.pgcluster import Serve

pytestmark = pytest.mark.process

# $1 is the spool directory; the rest is serve, exec'd once the tmpfs is ready.
READ_ONLY = (
    'mount -t tmpfs -o size=1m tmpfs "$1" && mkdir "$1/inflight" && mount -o remount,ro "$1"'
)
FULL = (
    'mount -t tmpfs -o size=64k tmpfs "$1" && mkdir "$1/inflight"'
    ' && ! head -c 1M /dev/zero > "$1/filler"'
)


def probing_on(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve], setup: str
) -> tuple[Serve, str]:
    spool = tmp_path / "spool"
    spool.mkdir()
    url = f"sqlite:///{tmp_path}/pw.db"
    config = targets_file(tmp_path, sim, "api", interval="1s", samples="2")
    wrap = in_own_mount_namespace(setup, spool)
    env = {"PHASEWATCH_DATABASE_URL": url, "PHASEWATCH_SPOOL_DIR": str(spool)}
    served = serve("serve", config, wrap=wrap, **env)
    served.wait_ready()
    eventually(lambda: len(stored(url)) >= 3, 15, "three runs stored")
    return served, url


def assert_probing_went_on(served: Serve, url: str, kind: str) -> None:
    assert {(run.status, run.samples) for run in stored(url)} == {("complete", 2)}
    health = quick_health(served)
    assert (health["spool"], health["status"], health["database"]) == (
        kind, "degraded", "reachable"
    )  # fmt: skip
    assert f"spool {kind}:" in problems(served)
    output = served.output()
    assert "Traceback" not in output
    assert output.count("probing goes on") == 1, output  # said once, not per run


def test_a_read_only_spool_never_stops_probing(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served, url = probing_on(tmp_path, sim, serve, READ_ONLY)
    assert_probing_went_on(served, url, "unwritable")
    assert stop(served) == 0


def test_a_full_spool_never_stops_probing_and_leaves_no_empty_file(
    tmp_path: Path, sim: SimServer, serve: Callable[..., Serve]
) -> None:
    served, url = probing_on(tmp_path, sim, serve, FULL)
    assert_probing_went_on(served, url, "full")
    spool = seen_by(served.process.pid, tmp_path / "spool")
    left = sorted(str(p.relative_to(spool)) for p in spool.rglob("*") if p.is_file())
    # The filler that filled it, and nothing a failed journal, lock, spool or check write
    # would have left.
    assert left == ["filler"], left
    assert stop(served) == 0
