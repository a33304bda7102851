"""The cyclic garbage collector's passes while a benchmark runs, counted by generation
(``gc.callbacks``): how many, and the CPU each took on the thread it landed on
(``time.thread_time``, the clock ``bench.push_cpu`` times its steps with), so a step's time
can be told apart from the collections that fell inside it."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

GENERATIONS = 3


class GcTally:
    """Collections and their CPU seconds by generation, while ``counting()``."""

    def __init__(self) -> None:
        self.passes = [0] * GENERATIONS
        self.cpu = [0.0] * GENERATIONS
        self._began = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.thread_time()
            return
        generation = info["generation"]
        self.passes[generation] += 1
        self.cpu[generation] += time.thread_time() - self._began

    @contextmanager
    def counting(self) -> Iterator[GcTally]:
        gc.callbacks.append(self._callback)
        try:
            yield self
        finally:
            gc.callbacks.remove(self._callback)

    def row(self, runs: int) -> list[str]:
        """Per generation: passes, then ms of CPU a run; then all generations' ms a run,
        and the objects the collector still watches (young and old) and has frozen."""
        each = max(runs, 1)
        cells = [f"{n} / {s * 1000 / each:.3f}" for n, s in zip(self.passes, self.cpu, strict=True)]
        watched = sum(len(gc.get_objects(g)) for g in range(GENERATIONS))
        return [*cells, f"{sum(self.cpu) * 1000 / each:.3f}", str(watched),
                str(gc.get_freeze_count())]  # fmt: skip


HEADERS = ["gen 0 passes / ms a run", "gen 1", "gen 2 (full)", "GC ms a run"]
HEADERS += ["objects watched at the end", "frozen"]
