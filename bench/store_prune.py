"""Pruning: does ``prune_samples`` on a large table hold up a writer storing runs?

A writer stores a 20-sample run every ``--write-every`` ms (``store_run``, a transaction per
run, as the pipeline does), first alone (the baseline), then while ``prune_samples`` runs
in another process (as the service's retention loop runs beside the probes; a process of
its own, so the two share no GIL and the pruner can be stopped at its time budget). The
pruner reports every transaction: how long its SELECT took, and how long it held what
it deleted (from the DELETE's start to the end of its COMMIT: on SQLite the write lock).

The goal: the writer is never held up more than 100 ms, i.e. no store takes > 100 ms.

    .venv/bin/python -m bench.store_prune                      # own database, 2.2M samples
    .venv/bin/python -m bench.store_prune --db-name pw_bench_query --reuse --keep
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session

from app.store.db import make_sessions, write_transaction
from app.store.ingest import store_run
from app.store.models import RunRow, SampleRow
from app.store.prune import prune_samples
from app.store.retention import prune_raw
from bench.common import REPO_ROOT, machine_info, pct, print_table
from bench.store_candidates import prune_samples_before
from bench.store_common import (
    Layout,
    Synth,
    add_database_options,
    add_layout_options,
    add_quiet_option,
    backend_label,
    backends,
    bench_database,
    bench_engine,
    database_url,
    layout_from,
    pg_version,
    populate,
    target_kind,
    target_name,
    wait_quiet,
)

GOAL_MS = 100.0
WRITER_SAMPLES = 20


# --- the pruner, in its own process ----------------------------------------------------------


class TransactionLog:
    """Times every transaction ``prune_samples`` runs, from engine and session events."""

    def __init__(self, engine: Engine, out: IO[str], thread: int | None = None) -> None:
        self.out = out
        self.thread = thread  # only this thread's transactions (the writer shares the engine)
        self.tx: dict[str, Any] = {}
        self._statement_start = 0.0
        event.listen(Session, "after_begin", self._began)
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        event.listen(Session, "after_commit", self._committed)

    def _ours(self) -> bool:
        return self.thread is None or threading.get_ident() == self.thread

    def _began(self, *_: Any) -> None:
        if not self._ours():
            return
        self.tx = {"begin": time.monotonic(), "select": 0.0, "delete": 0.0, "rows": 0}

    def _before(self, *_: Any) -> None:
        if not self._ours():
            return
        self._statement_start = time.monotonic()

    def _after(self, conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        if not self._ours() or not self.tx:  # outside a Session's transaction (DDL)
            return
        took = time.monotonic() - self._statement_start
        if statement.lstrip().upper().startswith("DELETE"):
            self.tx.setdefault("delete_start", self._statement_start)
            self.tx["delete"] += took
            self.tx["rows"] += max(0, cursor.rowcount)
        else:
            self.tx["select"] += took

    def _committed(self, *_: Any) -> None:
        if not self._ours():
            return
        end = time.monotonic()
        tx = self.tx
        if not tx:
            return
        # The SELECT's rows are fetched after its execute returns (SQLite steps through
        # them as they are fetched): what it took is the time until the DELETE starts.
        line = {
            "begin": tx["begin"],
            "end": end,
            "select_s": tx.get("delete_start", end) - tx["begin"],
            "delete_s": tx["delete"],
            "held_s": end - tx.get("delete_start", end),
            "total_s": end - tx["begin"],
            "rows": tx["rows"],
        }
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()


DROP_DAYS = -2.0  # pause_ms meaning "--drop-days"


def prune(engine: Engine, before: datetime, batch: int, pause_ms: float) -> int:
    """The app's ``prune_samples``, or (``pause_ms`` < 0) the one from before the change,
    or (``DROP_DAYS``) what the service runs on partitioned PostgreSQL: whole days dropped
    (``prune_raw``: its DDL runs outside any Session, so no transaction is logged)."""
    if pause_ms == DROP_DAYS:
        return prune_raw(engine, datetime.now(UTC), before)
    if pause_ms < 0:
        return prune_samples_before(engine, before, batch)
    return prune_samples(engine, before, batch, pause_ms / 1000)


def prune_child(url: str, before: str, batch: int, pause_ms: float) -> None:
    engine = bench_engine(url)
    TransactionLog(engine, sys.stdout)
    deleted = prune(engine, datetime.fromisoformat(before), batch, pause_ms)
    print(json.dumps({"done": deleted}), flush=True)
    engine.dispose()


@dataclass
class Pruner:
    """``prune_child`` as a child process; its transactions are collected as they come."""

    url: str
    before: datetime
    batch: int
    pause_ms: float  # < 0: prune_samples_before
    transactions: list[dict[str, float]] = field(default_factory=list)
    deleted: int | None = None
    process: subprocess.Popen[str] | None = None
    _reader: threading.Thread | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "bench.store_prune", "--prune-child", self.url]
        command += [self.before.isoformat(), str(self.batch), str(self.pause_ms)]
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            data = json.loads(line)
            if "done" in data:
                self.deleted = data["done"]
            else:
                self.transactions.append(data)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> bool:
        """Ends the child (our own, by its handle) if still running; True if it was cut."""
        assert self.process is not None
        cut = self.running()
        if cut:
            self.process.terminate()
        self.process.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        return cut


class _Lines:
    """Where a thread's ``TransactionLog`` writes: straight into a list."""

    def __init__(self, into: list[dict[str, float]]) -> None:
        self.into = into

    def write(self, text: str) -> None:
        self.into.extend(json.loads(line) for line in text.splitlines() if line.strip())

    def flush(self) -> None:
        pass


@dataclass
class ThreadPruner:
    """``prune_samples`` in a thread of this process, as the service's retention loop runs
    it beside the pipeline (both then share the process's SQLite write lock)."""

    engine: Engine
    before: datetime
    batch: int
    pause_ms: float
    transactions: list[dict[str, float]] = field(default_factory=list)
    deleted: int | None = None
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        TransactionLog(self.engine, _Lines(self.transactions), threading.get_ident())  # type: ignore[arg-type]
        self.deleted = prune(self.engine, self.before, self.batch, self.pause_ms)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def stop(self) -> bool:
        """A thread cannot be cut: waits for the prune to end; False (it was not cut)."""
        assert self._thread is not None
        self._thread.join()
        return False


# --- the writer --------------------------------------------------------------------------


@dataclass
class Writer:
    engine: Engine
    every_s: float
    synth: Synth = field(default_factory=lambda: Synth(11))
    stores: list[tuple[float, float]] = field(default_factory=list)  # (start, seconds)
    _n: int = 0

    def write_while(self, keep_going: Any, max_s: float) -> list[tuple[float, float]]:
        """Store a run every ``every_s`` while ``keep_going()`` and for at most ``max_s``."""
        sessions = make_sessions(self.engine)
        stores: list[tuple[float, float]] = []
        deadline = time.monotonic() + max_s
        due = time.monotonic()
        while keep_going() and time.monotonic() < deadline:
            record = self._next_run()
            due += self.every_s
            time.sleep(max(0.0, due - time.monotonic()))
            before = time.monotonic()
            with write_transaction(sessions) as session:  # as Pipeline.store does
                store_run(session, record, datetime.now(UTC))
            stores.append((before, time.monotonic() - before))
        return stores

    def _next_run(self) -> Any:
        self._n += 1
        t = self._n % 10
        now = datetime.now(UTC)
        return self.synth.run(target_name(t), "writer", target_kind(t), now, WRITER_SAMPLES, now)


# --- the benchmark ----------------------------------------------------------------------


def newest(engine: Engine) -> datetime:
    with Session(engine) as session:
        last: datetime | None = session.scalar(select(func.max(RunRow.started_at)))
    assert last is not None, "the database holds no runs"
    return last


def count_older(engine: Engine, before: datetime) -> int:
    with Session(engine) as session:
        query = select(func.count()).select_from(SampleRow).where(SampleRow.started_at < before)
        return int(session.scalar(query) or 0)


def growth(txs: list[dict[str, float]], key: str) -> str:
    tenth = len(txs) // 10
    first = pct([t[key] for t in txs[:tenth]], 50) * 1000
    last = pct([t[key] for t in txs[-tenth:]], 50) * 1000
    return f"{first:.1f} / {last:.1f} ms"


def latency_cells(stores: list[tuple[float, float]]) -> list[str]:
    seconds = [s for _, s in stores] or [0.0]
    over = sum(s * 1000 > GOAL_MS for s in seconds)
    return [
        f"{len(stores):,}",
        f"{pct(seconds, 50) * 1000:.1f}",
        f"{pct(seconds, 99) * 1000:.1f}",
        f"{max(seconds) * 1000:.1f}",
        str(over),
    ]


def slowest(stores: list[tuple[float, float]], txs: list[dict[str, float]], n: int = 5) -> None:
    """The slowest stores, each with the prune transactions it overlapped."""
    print("\nslowest stores during pruning, and the prune transactions they overlapped:")
    for start, took in sorted(stores, key=lambda s: -s[1])[:n]:
        end = start + took
        overlap = [t for t in txs if t["begin"] < end and t["end"] > start]
        described = ", ".join(
            f"tx {t['total_s'] * 1000:.0f} ms (select {t['select_s'] * 1000:.0f}, "
            f"delete→commit {t['held_s'] * 1000:.0f})"
            for t in overlap
        )
        print(f"  {took * 1000:7.1f} ms store: {described or 'no prune transaction open'}")


def measure(url: str, args: argparse.Namespace, layout: Layout) -> list[str]:
    with bench_database(url, args.pg, keep=args.keep, reuse=args.reuse) as reused:
        if reused:
            print("reusing the populated database")
        else:
            print(f"populating: {layout.describe()}")
            print(f"populated in {populate(url, layout, budget_s=args.populate_budget):.0f} s")
        engine = bench_engine(url)
        older_than = args.older_than_days or layout.days / 2
        before = newest(engine) - timedelta(days=older_than)
        doomed = count_older(engine, before)
        print(f"{doomed:,} samples older than {older_than:g} days to prune")
        writer = Writer(engine, args.write_every / 1000)
        wait_quiet(args.wait_quiet)
        baseline = writer.write_while(lambda: True, args.baseline_seconds)
        batch = args.runs_per_batch if args.before else args.rows_per_batch
        pause_ms = -1.0 if args.before else args.pause_ms
        pause_ms = DROP_DAYS if args.drop_days else pause_ms
        pruner: Pruner | ThreadPruner = (
            ThreadPruner(engine, before, batch, pause_ms)
            if args.threaded
            else Pruner(url, before, batch, pause_ms)
        )
        started = time.monotonic()
        pruner.start()
        during = writer.write_while(pruner.running, args.max_prune_seconds)
        cut = pruner.stop()
        took = time.monotonic() - started
        gone = doomed - count_older(engine, before)
        engine.dispose()
    txs = pruner.transactions
    deleted = gone if args.drop_days else sum(int(t["rows"]) for t in txs)
    held = [t["held_s"] for t in txs] or [0.0]
    totals = [t["total_s"] for t in txs] or [0.0]
    selects = [t["select_s"] for t in txs] or [0.0]
    label = backend_label(url) + (" before" if args.before else "")
    label += ", days dropped" if args.drop_days else ""
    label += ", pruning in a thread" if args.threaded else ", pruning in a process"
    writer_rows = [[label, "alone", *latency_cells(baseline)]]
    writer_rows.append([label, "while pruning", *latency_cells(during)])
    print_table(WRITER_HEADERS, writer_rows)
    slowest(during, txs)
    if len(txs) >= 20:
        print("median of the first / last tenth of prune transactions:")
        print(f"  finding rows {growth(txs, 'select_s')}, delete→commit {growth(txs, 'held_s')}")
    worst = max(s for _, s in during) * 1000 if during else 0.0
    row = [
        label,
        f"{deleted:,}" + (" (cut)" if cut else ""),
        f"{took:.0f}",
        f"{deleted / took:,.0f}",
        f"{len(txs):,}",
        f"{pct(held, 99) * 1000:.1f}",
        f"{max(held) * 1000:.1f}",
        f"{max(selects) * 1000:.1f}",
        f"{max(totals) * 1000:.1f}",
        f"{worst:.1f}",
        "yes" if worst <= GOAL_MS else "NO",
    ]
    print_table(PRUNE_HEADERS, [row])
    return row


WRITER_HEADERS = ["backend", "writer", "stores", "p50 ms", "p99 ms", "max ms", "> 100 ms"]
PRUNE_HEADERS = [
    "backend",
    "deleted",
    "prune s",
    "samples/s",
    "transactions",
    "delete→commit p99 ms",
    "delete→commit max ms",
    "finding rows max ms",
    "transaction max ms",
    "writer max ms",
    "writer <= 100 ms",
]


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_database_options(parser, "pw_bench_prune")
    add_layout_options(parser, Layout(days=40))
    add_quiet_option(parser)
    parser.add_argument("--reuse", action="store_true", help="use a kept database as it is")
    parser.add_argument(
        "--older-than-days", type=float, help="prune samples older than this (default: half)"
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="prune with prune_samples as it was before (store_candidates.prune_samples_before)",
    )
    parser.add_argument(
        "--drop-days",
        action="store_true",
        help="PostgreSQL partitioned by day: drop whole days as the service does (prune_raw)",
    )
    parser.add_argument("--runs-per-batch", type=int, default=20, help="--before's batch")
    parser.add_argument("--rows-per-batch", type=int, default=500, help="prune_samples' batch")
    parser.add_argument(
        "--pause-ms", type=float, default=50.0, help="prune_samples' pause between batches"
    )
    parser.add_argument(
        "--threaded",
        action="store_true",
        help="prune in a thread of the writer's process, as the service does (default: a process)",
    )
    parser.add_argument("--write-every", type=float, default=50.0, metavar="MS")
    parser.add_argument("--baseline-seconds", type=float, default=30.0)
    parser.add_argument("--max-prune-seconds", type=float, default=600.0)
    parser.add_argument("--populate-budget", type=float, default=3600.0, metavar="S")
    parser.add_argument("--prune-child", nargs=4, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = arguments(argv)
    if args.prune_child:
        url, before, per_batch, pause_ms = args.prune_child
        prune_child(url, before, int(per_batch), float(pause_ms))
        return
    chosen = backends(args.backends)
    pg = f"; PostgreSQL {pg_version(args.pg)}" if "postgresql" in chosen else ""
    print(f"# Pruning beside a writer\n{machine_info()}{pg}\n")
    layout = layout_from(args)
    rows = []
    for backend in chosen:
        url = database_url(backend, args.db_name, args.pg, args.sqlite_dir)
        print(f"## {backend_label(url)}")
        rows.append(measure(url, args, layout))
        print()
    print("## all")
    print_table(PRUNE_HEADERS, rows)


if __name__ == "__main__":
    main()
