"""Which leases name a dead process this one restarts (pure: ids and a pid check in)."""

from __future__ import annotations

import pytest

from app.replicas.membership import predecessor_dead

ME = "node-a.example-7-0f0f0f"
GONE = {42}


@pytest.mark.parametrize(
    ("lease_id", "dead"),
    [
        ("node-a.example-42-a1b2c3", True),  # this host, its pid not running: crashed
        ("node-a.example-7-a1b2c3", True),  # this host, this pid: a container restarted
        ("node-a.example-43-a1b2c3", False),  # this host, its pid running: a sibling
        ("node-b.example-42-a1b2c3", False),  # another host: never known
        ("node-a.example-7-0f0f0f", False),  # this process's own lease
        ("a", False),  # not made by replica_id (tests, older ids)
        ("node-a.example-x-a1b2c3", False),  # no pid
        ("node-a.example-42-a1b2", False),  # not a replica_id's tail
        ("node-a-42-a1b2c3", False),  # a host that only begins like this one
    ],
)
def test_a_lease_is_a_dead_predecessors_only_on_this_host_and_its_pid_gone(
    lease_id: str, dead: bool
) -> None:
    assert predecessor_dead(lease_id, ME, lambda pid: pid not in GONE) is dead


def test_an_id_not_made_by_replica_id_is_never_judged() -> None:
    assert not predecessor_dead("node-a.example-42-a1b2c3", "me", lambda pid: False)
