"""store.handoff.HandOff: a writer never waits for the lock's holder, and every holder after
``hand`` returned finds the item kept."""

from __future__ import annotations

import threading

from app.store.handoff import HandOff


def test_an_item_handed_over_while_the_lock_is_free_is_kept_at_once() -> None:
    kept: list[int] = []
    hand = HandOff(kept.append)
    hand.hand(1)
    hand.hand(2)
    assert kept == [1, 2]


def test_an_item_handed_over_while_a_reader_holds_the_lock_waits_for_its_next_holder() -> None:
    kept: list[int] = []
    hand = HandOff(kept.append)
    holding, done = threading.Event(), threading.Event()

    def reader() -> None:
        with hand.held():
            holding.set()
            done.wait(10)

    thread = threading.Thread(target=reader)
    thread.start()
    assert holding.wait(10)
    hand.hand(1)  # returns although the lock is held: nothing else could end the reader
    hand.hand(2)
    assert kept == []
    done.set()
    thread.join(10)
    with hand.held():
        assert kept == [1, 2]


def test_items_are_kept_under_the_lock() -> None:
    hand: HandOff[int]
    held: list[bool] = []
    hand = HandOff(lambda _item: held.append(not hand._lock.acquire(blocking=False)))
    hand.hand(1)
    assert held == [True]
