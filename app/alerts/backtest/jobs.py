"""The backtest in several processes: targets are independent in the evaluator (each has its
own random numbers), so each worker replays a share of them and the parent merges.

Worker ``i`` of ``n`` reads the whole file (so it checks every line, as one process would)
but builds and replays only the runs of its targets: the ``i``-th, ``i + n``-th, … that
the file names (see Share). Every run carries its position in the file's reading order,
so the merge gives exactly the order, and on a bad line exactly the output before the
error, of a single process.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import heapq
import multiprocessing
import operator
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from app.alerts.backtest.coverage import Coverage
from app.alerts.backtest.csvruns import BacktestError, read_numbered
from app.alerts.backtest.replay import replay_numbered
from app.alerts.identity import Transition
from app.analysis.detectors import DetectorParams

Numbered = list[tuple[int, list[Transition]]]
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
RARELY = (50_000, 20, 100)  # the collector's thresholds while replaying (defaults 700, 10, 10)
# A file this large or larger is replayed by two processes by default: below it one process
# takes some 20 s or less, and a second one's start and its own pass over the file cost
# more CPU than the wall time it saves (bench/README.md, "Backtest speed").
SHARED_FROM = 200 * 2**20  # bytes, about a million samples as the export writes them


@dataclass(frozen=True)
class ParamsTable:
    """``params_for`` as data, so that it can be sent to a worker process."""

    default: DetectorParams = field(default_factory=DetectorParams)
    by_target: dict[str, DetectorParams] = field(default_factory=dict)

    def __call__(self, target: str) -> DetectorParams:
        return self.by_target.get(target, self.default)


@dataclass
class Share:
    """Worker ``index`` of ``jobs``: the targets it replays. Targets are dealt in the order
    the file first names them, which every worker reads alike, so the shares are as even
    as can be (a hash of a few names splits them unevenly, and the larger share sets the
    wall time)."""

    index: int
    jobs: int
    dealt: dict[str, bool] = field(default_factory=dict)

    def __call__(self, target: str) -> bool:
        kept = self.dealt.get(target)
        if kept is None:
            kept = self.dealt[target] = len(self.dealt) % self.jobs == self.index
        return kept


@dataclass(frozen=True)
class ShareResult:
    """A worker's moved transitions by run position, and the error that stopped it."""

    numbered: Numbered
    coverage: Coverage
    error: str | None = None
    runs_before: int = 0


def replay_file(
    path: Path,
    params_for: ParamsTable,
    *,
    seed: int,
    jobs: int,
    initializer: Callable[[], None] | None = None,
    coverage: Coverage | None = None,
) -> Iterator[Transition]:
    """Every moved transition of the file, in a single process's order; a BacktestError
    (after the transitions a single process would have made before it) if a line is bad.
    ``coverage`` gets every worker's."""
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads
    with ProcessPoolExecutor(jobs - 1, mp_context=context, initializer=initializer) as pool:
        futures = [
            pool.submit(_worker, path, params_for, seed, Share(i, jobs)) for i in range(1, jobs)
        ]
        # This process replays the first share meanwhile: one process fewer to start.
        results = [_worker(path, params_for, seed, Share(0, jobs))]
        results += [future.result() for future in futures]
    for result in results:
        if coverage is not None:
            coverage.merge(result.coverage)
    failed = [o for o in results if o.error is not None]
    first = min(failed, key=operator.attrgetter("runs_before"), default=None)
    stop = first.runs_before if first is not None else None
    merged = heapq.merge(*(o.numbered for o in results), key=operator.itemgetter(0))
    for number, transitions in merged:
        if stop is not None and number >= stop:
            break
        yield from transitions
    if first is not None:
        raise BacktestError(first.error)


def default_jobs(size: int, cpus: int | None) -> int:
    """The processes a backtest of a ``size``-byte file uses without ``--jobs``."""
    return 1 if size < SHARED_FROM else min(2, cpus or 1)


def prepare_worker() -> None:
    """A worker process's settings: the memory the CLI's own process keeps, and the
    collector's thresholds of ``collecting_rarely`` for the worker's whole life."""
    keep_freed_memory()
    gc.set_threshold(*RARELY)


@contextlib.contextmanager
def collecting_rarely() -> Iterator[None]:
    """The cyclic garbage collector a hundred times less often, meanwhile. A replay makes
    some hundred thousand small objects a simulated day (runs, their memos, findings) that
    reference counting frees or the history keeps for days, and almost no cycles: the
    collector's passes over them find nothing to free (bench/README.md's backtest section
    says what they cost); peak memory is the same."""
    previous = gc.get_threshold()
    gc.set_threshold(*RARELY)
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def keep_freed_memory() -> None:
    """Let glibc's malloc keep what it frees. The detectors' numpy temporaries are about a
    megabyte each; by default every one is mapped from the kernel and unmapped again (or
    the heap trimmed), and those page faults are a visible share of the replay's CPU time
    (``bench.backtest_speed``). (Here,
    not beside the CLI, so that a worker process it initialises imports no command line.)"""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 32 * 2**20)  # glibc's largest
        libc.mallopt(M_TRIM_THRESHOLD, 256 * 2**20)
    except (OSError, AttributeError):
        pass  # not glibc: its allocator's defaults then


def _worker(path: Path, params_for: ParamsTable, seed: int, share: Share) -> ShareResult:
    numbered: Numbered = []
    coverage = Coverage()
    try:
        with path.open(newline="") as rows:
            runs = read_numbered(rows, keep=share)
            replayed = replay_numbered(runs, params_for, seed=seed, coverage=coverage)
            for number, transitions in replayed:
                moved = [t for t in transitions if t.moved]
                if moved:
                    numbered.append((number, moved))
    except BacktestError as exc:
        return ShareResult(numbered, coverage, str(exc), exc.runs_before)
    return ShareResult(numbered, coverage)
