"""The spool's lines read a block at a time, in batches for a sink's ``store_batch``, and
each line's answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from app.runs.sink import Stored
from app.store.records import RunRecord

# A sink's batch form (``Sink.store_batch``): answers each run in order, True or False
# taken, a text why it never will be (set aside); fewer answers: the rest not taken.
StoreBatch = Callable[[Sequence[RunRecord]], Sequence[Stored]]


def lines_at(path: Path, offset: int, limit: int) -> tuple[list[str], int]:
    """Whole lines of ``path`` from byte ``offset`` on, about ``limit`` bytes of them (a
    longer line whole), blank ones skipped, and the offset after them. A last line without
    its newline is a write cut short (or going on): not a run, not read."""
    block: list[str] = []
    try:
        spool = path.open("rb")
    except FileNotFoundError:
        return block, offset
    with spool:
        spool.seek(offset)
        start = offset
        while offset - start < limit:
            line = spool.readline()
            if not line.endswith(b"\n"):
                break
            offset += len(line)
            if line.strip():
                # Undecodable bytes stay in the line, which is then set aside as not a run.
                block.append(line.decode(errors="replace"))
    return block, offset


def batches(lines: Iterable[str], runs: int, size: int) -> Iterator[list[str]]:
    """``lines`` in order, in lists of at most ``runs`` lines and ``size`` bytes of them
    (a line longer than ``size`` alone)."""
    batch: list[str] = []
    held = 0
    for line in lines:
        if batch and (len(batch) >= runs or held + len(line) > size):
            yield batch
            batch, held = [], 0
        batch.append(line)
        held += len(line)
    if batch:
        yield batch


def answered(batch: list[str], store: StoreBatch) -> list[Stored]:
    """Each line's answer, in order, as far as ``store`` answered: a line that is not a run
    is refused here, the runs go to ``store`` together."""
    parsed = [_parsed(line) for line in batch]
    records = [item for item in parsed if isinstance(item, RunRecord)]
    answers = iter(store(records) if records else ())
    answered: list[Stored] = []
    for item in parsed:
        answer = item if isinstance(item, str) else next(answers, None)
        if answer is None:
            break  # the rest were not taken
        answered.append(answer)
    return answered


def _parsed(line: str) -> RunRecord | str:
    try:
        return RunRecord.from_json(json.loads(line))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        return f"not a run: {type(exc).__name__}"
