"""A lock its writers never wait for: what is handed over while a reader holds it waits in
a queue that the next holder takes in first.

``DatabaseHistory`` holds its lock across a read's database round trips; the thread that
stored a run (an agent's push waits for it) hands the run over and goes on. Every reader
that takes the lock after ``hand`` returned finds the item taken in (bench/README.md,
push7: a tenth of pushes found the lock held, waiting up to 0.5 s).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

T = TypeVar("T")


class HandOff(Generic[T]):
    """``keep`` each item handed over, always under the lock, in the order handed."""

    def __init__(self, keep: Callable[[T], None]) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._waiting: deque[T] = deque()

    def hand(self, item: T) -> None:
        """Kept now when the lock is free, else by its next holder; never waits."""
        self._waiting.append(item)
        if self._lock.acquire(blocking=False):
            try:
                self._take()
            finally:
                self._lock.release()

    @contextmanager
    def held(self) -> Iterator[None]:
        """The lock, with everything handed over meanwhile kept first."""
        with self._lock:
            self._take()
            yield

    def _take(self) -> None:
        while self._waiting:
            self._keep(self._waiting.popleft())
