"""Python's cyclic garbage collector, set for a long-running ``serve`` once its start-up is
done (``Service.start``), and set back when it stops.

A full collection walks every object the collector tracks. Serve keeps many for its whole
life (modules, the app, the engine and its caches, the configuration): frozen, no
collection walks them again. And its work makes many short-lived containers at once (a
push body's JSON, a batch's records and documents, a read's rows): collected every 700 new
ones, they were promoted while still in use and made the old generations grow, so that full
collections came every few hundred pushed runs and landed on whatever allocated next.
Few of serve's objects form cycles (reference counting frees them); bench/README.md's
"Pushes: the cyclic GC" section has the numbers.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

# The young generation is collected once this many containers more were made than freed
# (Python's default: 700). Its garbage waits that long: a few MB at most.
YOUNG_THRESHOLD = 50_000


class _Settled:
    """The collector is the process's, shared by every service in it (the tests run several
    at once): the first to settle it keeps the thresholds it found, the last to leave puts
    them back and unfreezes."""

    users = 0
    found: tuple[int, int, int] = gc.get_threshold()


def settle_collector() -> Callable[[], None]:
    """Freeze the objects made so far and collect the young generation less often;
    returns what undoes both once no other service in the process still runs (the frozen
    objects collectable again: a process that builds and stops many services, as the tests
    do, keeps none of them for good). Undoing twice does nothing more."""
    return _settle(YOUNG_THRESHOLD)


@contextmanager
def frozen() -> Iterator[None]:
    """The objects made so far frozen while the block runs (``phasewatch probe``'s samples),
    the thresholds left as they are. Thawed after it, unless a service in the process still
    keeps its own start-up frozen: a command run inside a longer process (the tests call
    ``main``) leaves the collector as it found it, not frozen for the rest of that process,
    holding back whatever was garbage then until some later full collection."""
    undo = _settle(None)
    try:
        yield
    finally:
        undo()


def _settle(young: int | None) -> Callable[[], None]:
    if _Settled.users == 0:
        _Settled.found = gc.get_threshold()
    _Settled.users += 1
    gc.freeze()
    if young is not None:
        gc.set_threshold(young, _Settled.found[1], _Settled.found[2])
    undone = False

    def undo() -> None:
        nonlocal undone
        if undone:
            return
        undone = True
        _Settled.users -= 1
        if _Settled.users == 0:
            gc.set_threshold(*_Settled.found)
            gc.unfreeze()

    return undo
