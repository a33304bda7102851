"""An import's rows held column by column until they are stored (app.csvio.importer)."""

from __future__ import annotations

import math
import uuid
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from app.csvio.goodput import GOODPUT_COLUMNS, flags_details
from app.csvio.layout import SPLIT_COLUMNS, STATUSES
from app.store.records import RunRecord, RunStatus, SampleRecord

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_FLAG = {None: -1, False: 0, True: 1}
_FLAG_OF = {code: flag for flag, code in _FLAG.items()}


@dataclass(slots=True)
class TableRun:
    target: str
    vantage: str
    line: int
    rows: array[int] = field(default_factory=lambda: array("q"))


class Table:
    """The file's samples column by column, about 17 + 8 bytes per phase a row.

    A million rows would take gigabytes as objects; as arrays they take tens of megabytes.
    """

    def __init__(
        self, phases: Sequence[str], metrics: Sequence[str] = (), flags: bool = False
    ) -> None:
        self.phases = tuple(phases)
        self.metrics = tuple(metrics)  # LLM metric columns (docs/metrics.md), after the phases
        # The goodput columns (app.csvio.goodput), one byte each: -1 empty, 0 false, 1 true.
        self.flags = [array("b") for _ in GOODPUT_COLUMNS] if flags else []
        self.micros = array("q")  # start, microseconds since the epoch
        self.status = bytearray()  # index into STATUSES
        self.total = array("d")
        # Each phase's, then each metric's. NaN: the sample has no such phase or value.
        self.values = [array("d") for _ in (*self.phases, *self.metrics)]
        self.lines = array("q")  # where each row is in the file
        self.runs: dict[uuid.UUID, TableRun] = {}

    def append(
        self,
        line: int,
        started_at: datetime,
        status: str,
        total: float,
        values: list[float],
        flags: Sequence[bool | None] = (),
    ) -> int:
        self.lines.append(line)
        self.micros.append((started_at - _EPOCH) // _MICROSECOND)
        self.status.append(STATUSES.index(status))
        self.total.append(total)
        for column, value in zip(self.values, values, strict=True):
            column.append(value)
        for code, flag in zip(self.flags, flags, strict=True):
            code.append(_FLAG[flag])
        return len(self.total) - 1

    def cells(self, row: int) -> tuple[object, ...]:
        """What a row says, comparable: an absent phase is None (NaN equals nothing)."""
        values = (column[row] for column in self.values)
        phases = (None if math.isnan(value) else value for value in values)
        flags = (column[row] for column in self.flags)
        return (self.micros[row], self.status[row], self.total[row], *phases, *flags)

    def record(self, run_id: uuid.UUID, run: TableRun) -> RunRecord:
        samples = tuple(self._sample(idx, row) for idx, row in enumerate(run.rows))
        finished = max(s.started_at + timedelta(milliseconds=s.total_ms) for s in samples)
        return RunRecord(
            id=run_id,
            target=run.target,
            vantage=run.vantage,
            started_at=min(s.started_at for s in samples),
            finished_at=finished,
            status=RunStatus.COMPLETE,
            samples=samples,
        )

    def _sample(self, idx: int, row: int) -> SampleRecord:
        names = (*self.phases, *self.metrics)
        values = zip(names, (column[row] for column in self.values), strict=True)
        found = {name: value for name, value in values if not math.isnan(value)}
        # Imported metrics are kept as the file says them (``details["llm"]``): the marks
        # and the stream they were measured from did not travel with them.
        llm = {name: found.pop(name) for name in self.metrics if name in found}
        split = {part: found.pop(name) for name, part in SPLIT_COLUMNS.items() if name in found}
        judged = flags_details([_FLAG_OF[column[row]] for column in self.flags])
        return SampleRecord(
            idx=idx,
            started_at=_EPOCH + self.micros[row] * _MICROSECOND,
            status=STATUSES[self.status[row]],
            total_ms=self.total[row],
            phases=found,
            details=({"connect_split": split} if split else {})
            | ({"llm": llm} if llm else {})
            | judged,
        )
