"""Work someone waits for (an agent's push) ahead of work nobody waits for (evaluations, the
rollups' catch-up).

Threads of one process share the interpreter's lock: a push that arrives while an
evaluation computes gets the lock back only at switch intervals, for every socket and
database call it makes. So background work takes a quiet moment — no push in flight —
before each piece of it, waiting for one at most a bound, so it is never starved.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

YIELD_MAX_S = 0.25  # the longest a piece of background work waits for a quiet moment


class Foreground:
    def __init__(self) -> None:
        self._serving = 0
        self._changed = threading.Condition()

    @contextmanager
    def serving(self) -> Iterator[None]:
        with self._changed:
            self._serving += 1
        try:
            yield
        finally:
            with self._changed:
                self._serving -= 1
                if not self._serving:
                    self._changed.notify_all()

    def quiet(self, max_wait_s: float = YIELD_MAX_S) -> bool:
        """Wait until nothing is being served, ``max_wait_s`` at most; False: still busy."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._serving, max_wait_s)
