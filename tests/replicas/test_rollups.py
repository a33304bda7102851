"""Which targets' rollups a replica keeps (``share_of``, pure): those it owns, by the ids
the database gives their names; those it did not keep before are ``fresh``."""

from __future__ import annotations

import pytest

from app.replicas.rollups import Share, share_of

IDS = {"a": 1, "b": 2, "c": 3}


@pytest.mark.parametrize(
    ("owned", "kept", "share"),
    [
        ([], [], Share(frozenset(), frozenset())),  # waiting for the leases: nothing
        (["a", "b", "c"], [], Share(frozenset({1, 2, 3}), frozenset({1, 2, 3}))),  # at start
        (["a", "b"], [1, 2], Share(frozenset({1, 2}), frozenset())),  # as before
        (["a", "b", "c"], [1, 2], Share(frozenset({1, 2, 3}), frozenset({3}))),  # c taken over
        (["a"], [1, 2], Share(frozenset({1}), frozenset())),  # b given away
        (["a", "x"], [1], Share(frozenset({1}), frozenset())),  # x: not in the database yet
    ],
)
def test_a_replica_keeps_the_targets_it_owns_and_knows_which_are_new_to_it(
    owned: list[str], kept: list[int], share: Share
) -> None:
    found = share_of(IDS, owned, kept)
    assert found == share
    assert found.kept == share.mine - share.fresh
