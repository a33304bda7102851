"""Which live replica owns which target's slot: the same answer from the same leases."""

from __future__ import annotations

from collections import Counter

import pytest

from app.replicas.assign import Member, View, owner

TARGETS = [f"target-{k:03d}" for k in range(300)]
FOREVER = 10**15


def view(me: str, *members: Member, read_ms: int = 1_000, current: bool = True) -> View:
    return View(me, members, read_ms, current)


A, B, C = (Member(name, 0, FOREVER) for name in "abc")


@pytest.mark.parametrize(
    ("members", "at_ms", "current", "live"),
    [
        # (effective, expires) against the moment asked about
        ((Member("a", 0, 2_000),), 1_999, True, ["a"]),
        ((Member("a", 0, 2_000),), 2_000, True, []),  # the lease is over at its expiry
        ((Member("a", 500, 2_000),), 499, True, []),  # a joiner counts from its effective time
        ((Member("a", 500, 2_000),), 500, True, ["a"]),
        # Not current (the database away): alive when last read is alive since.
        ((Member("a", 0, 2_000),), 5_000, False, ["a"]),
        ((Member("a", 0, 900),), 5_000, False, []),  # but over before the read: over
        ((Member("a", 4_000, FOREVER),), 3_000, False, []),  # a joiner still waits
        ((A, Member("b", 0, 1_500), Member("c", 0, 3_000)), 2_000, True, ["a", "c"]),
    ],
)
def test_a_replica_is_live_from_its_effective_time_until_its_lease_ends(
    members: tuple[Member, ...], at_ms: int, current: bool, live: list[str]
) -> None:
    assert view("a", *members, read_ms=1_000, current=current).live(at_ms) == live


def test_every_replica_computes_the_same_owner_from_the_same_leases() -> None:
    views = [view(me, A, B, C) for me in "abc"]
    shares = [set(v.share(TARGETS, 10)) for v in views]
    assert set.union(*shares) == set(TARGETS)  # every target owned
    assert sum(map(len, shares)) == len(TARGETS)  # by exactly one
    assert all(v.owner(t, 10) == owner(t, ["c", "b", "a"]) for v in views for t in TARGETS)


def test_targets_are_spread_about_evenly() -> None:
    counts = Counter(owner(target, ["a", "b", "c"]) for target in TARGETS)
    assert set(counts) == {"a", "b", "c"}
    assert all(70 <= n <= 130 for n in counts.values()), counts  # 100 each on average


def test_a_replica_that_leaves_gives_its_targets_away_and_nothing_else_moves() -> None:
    before = {t: owner(t, ["a", "b", "c"]) for t in TARGETS}
    after = {t: owner(t, ["a", "c"]) for t in TARGETS}
    moved = {t for t in TARGETS if before[t] != after[t]}
    assert moved == {t for t in TARGETS if before[t] == "b"}


def test_a_replica_that_joins_takes_only_from_the_others_and_about_its_share() -> None:
    before = {t: owner(t, ["a", "b"]) for t in TARGETS}
    after = {t: owner(t, ["a", "b", "c"]) for t in TARGETS}
    moved = [t for t in TARGETS if before[t] != after[t]]
    assert all(after[t] == "c" for t in moved)
    assert 70 <= len(moved) <= 130


def test_a_dead_replicas_slots_go_to_its_successor_from_its_lease_end_on() -> None:
    dying = Member("b", 0, 5_000)
    leases = (A, dying, C)
    theirs = [t for t in TARGETS if owner(t, ["a", "b", "c"]) == "b"]
    for me in "ac":
        mine_before = set(view(me, *leases).share(theirs, 4_999))
        mine_after = set(view(me, *leases).share(theirs, 5_000))
        assert mine_before == set()
        assert mine_after == {t for t in theirs if owner(t, ["a", "c"]) == me}


def test_a_joiner_and_the_old_owner_hand_over_at_the_same_slot() -> None:
    joiner = Member("c", 7_000, FOREVER)
    leases = (A, B, joiner)
    taken = [t for t in TARGETS if owner(t, ["a", "b", "c"]) == "c"]
    for slot in (6_999, 7_000):
        owners = {me: set(view(me, *leases).share(taken, slot)) for me in "abc"}
        assert sum(map(len, owners.values())) == len(taken)  # never twice, never none
        assert (owners["c"] == set(taken)) is (slot >= 7_000)


def test_a_replica_that_cannot_read_the_leases_keeps_its_share_and_takes_nobodys() -> None:
    dead = Member("b", 0, 1_500)  # its lease ran out after the last read
    stale = view("a", A, dead, read_ms=1_000, current=False)
    fresh = view("a", A, dead, read_ms=1_000, current=True)
    theirs = [t for t in TARGETS if owner(t, ["a", "b"]) == "b"]
    assert stale.share(theirs, 9_000) == []
    assert fresh.share(theirs, 9_000) == theirs
    assert stale.share(TARGETS, 9_000) == [t for t in TARGETS if owner(t, ["a", "b"]) == "a"]


def test_nobody_owns_anything_when_nobody_is_live() -> None:
    assert owner("x", []) is None
    assert view("a").share(TARGETS, 0) == []
