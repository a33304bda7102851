"""The seam: ``RunExporter`` exports a stored run; ``MemoryExporter`` keeps what it would
send (tests), ``app.export.otlp.OtlpExporter`` sends it over OTLP/HTTP."""

from __future__ import annotations

import itertools
from typing import Protocol

from app.config import Target
from app.export.facts import TargetFacts
from app.export.mapping import Point, SpanSpec, points, spans
from app.store.records import RunRecord


class RunExporter(Protocol):
    """Exports each run it is given, once stored (``Service.after_store``, and the count of
    pushed runs an evaluation skipped). Every implementation keeps this contract
    (tests/export/test_exporter.py runs it over each):

    * ``export(run, target)`` never raises and never waits on the network: it is called on
      the store's thread, and probing must never wait for a collector. ``target`` is the
      run's target as the file says now; None (a target no longer in the file, an
      imported run) exports nothing.
    * ``close()`` exports what is queued, then stops: later runs are dropped. The caller
      bounds how long it waits (a collector that does not answer is left behind).
    * ``failures()``: failed export attempts by signal since the start (``/metrics``);
      ``problems()``: what fails now, one line each (``/healthz``).
    """

    def export(self, run: RunRecord, target: Target | None) -> None: ...

    def close(self) -> None: ...

    def failures(self) -> dict[str, int]: ...

    def problems(self) -> list[str]: ...


class MemoryExporter:
    """What would be exported, kept in lists; span ids count up from 1."""

    def __init__(self) -> None:
        self.points: list[Point] = []
        self.spans: list[SpanSpec] = []
        self.closed = False
        self._ids = itertools.count(1)

    def export(self, run: RunRecord, target: Target | None) -> None:
        if self.closed or target is None:
            return
        facts = TargetFacts.of(target)
        self.points.extend(points(run, facts))
        self.spans.extend(spans(run, facts, lambda _bits: next(self._ids)))

    def close(self) -> None:
        self.closed = True

    def failures(self) -> dict[str, int]:
        return {}

    def problems(self) -> list[str]:
        return []
