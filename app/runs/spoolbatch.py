"""The spool's lines in batches for a sink's ``store_batch``, and each line's answer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence

from app.runs.sink import Stored
from app.store.records import RunRecord

# A sink's batch form (``Sink.store_batch``): answers each run in order, True or False
# taken, a text why it never will be (set aside); fewer answers: the rest not taken.
StoreBatch = Callable[[Sequence[RunRecord]], Sequence[Stored]]


def batches(lines: Sequence[str], runs: int, size: int) -> Iterator[list[str]]:
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
