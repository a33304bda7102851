"""Shared by the storage and scheduling benchmarks: throw-away databases and realistic runs.

Runs are synthetic but shaped like the probe's (compare ``phasewatch probe --json``): HTTP
targets split into connect, network, server, transfer; streaming LLM targets into connect,
network, queue, prefill, generation, transfer; marks consistent with the phases; the
detail keys a stored sample keeps (``app.store.records.DETAIL_KEYS``); about 2 % of
samples failed, censored or answered with an HTTP error.

Databases are created per benchmark (``pw_bench_*`` on the local PostgreSQL, files under
``--sqlite-dir``), migrated with the real Alembic scripts, and dropped at the end unless
``--keep``. ``populate`` fills one fast for the query and pruning benchmarks (COPY on
PostgreSQL, big ``executemany`` batches on SQLite); populating is never what is measured.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy import Engine, event, pool, select
from sqlalchemy.engine import make_url

from app.config import Target
from app.probe.sample import HTTP_PHASES, LLM_PHASES
from app.runtime.scheduler import first_run_offset
from app.runtime.targetsync import target_values
from app.store.db import make_engine, make_sessions, normalize_url
from app.store.ingest import _run_values, _sample_values
from app.store.migrate import upgrade
from app.store.models import TargetRow
from app.store.partitions import create_partition, existing_days, is_partitioned
from app.store.records import RunRecord, SampleRecord
from app.store.targets import sync_targets

PG_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SQLITE_DIR = Path("/tmp/pw_bench")
BACKENDS = ("postgresql", "sqlite")
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}$")
_MS = timedelta(milliseconds=1)


# --- databases ----------------------------------------------------------------------------


def add_database_options(
    parser: argparse.ArgumentParser, default_name: str, default_backends: str = ",".join(BACKENDS)
) -> None:
    parser.add_argument(
        "--backends",
        default=default_backends,
        help=f"comma-separated: postgresql, sqlite (default: {default_backends})",
    )
    parser.add_argument("--pg", default=PG_SERVER, help="a PostgreSQL server's maintenance URL")
    parser.add_argument("--sqlite-dir", type=Path, default=SQLITE_DIR, help="for SQLite files")
    parser.add_argument(
        "--db-name", default=default_name, help="database (file) name to create and drop"
    )
    parser.add_argument("--keep", action="store_true", help="do not drop the database at the end")


def backends(value: str) -> list[str]:
    chosen = [b.strip() for b in value.split(",") if b.strip()]
    unknown = [b for b in chosen if b not in BACKENDS]
    if unknown:
        raise SystemExit(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}")
    return chosen


def database_url(backend: str, name: str, pg_server: str, sqlite_dir: Path) -> str:
    if not _NAME.match(name):
        raise SystemExit(f"database name {name!r}: lower-case letters, digits, _ only")
    if backend == "sqlite":
        return f"sqlite:///{sqlite_dir / name}.db"
    return make_url(normalize_url(pg_server)).set(database=name).render_as_string(False)


def database_exists(url: str, pg_server: str) -> bool:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return Path(parsed.database or "").is_file()
    with _admin(pg_server) as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (parsed.database,))
        return found.fetchone() is not None


def create_database(url: str, pg_server: str) -> None:
    """A new, empty database at ``url`` (an old one of that name is dropped), at head."""
    drop_database(url, pg_server)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        Path(parsed.database or "").parent.mkdir(parents=True, exist_ok=True)
    else:
        with _admin(pg_server) as admin:
            admin.execute(f'CREATE DATABASE "{parsed.database}"')
    upgrade(url)


def drop_database(url: str, pg_server: str) -> None:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        for suffix in ("", "-wal", "-shm", ".serve-lock"):  # the lock: app.store.sqlitelock
            Path(f"{parsed.database}{suffix}").unlink(missing_ok=True)
        return
    with _admin(pg_server) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{parsed.database}" WITH (FORCE)')


@contextmanager
def bench_database(url: str, pg_server: str, *, keep: bool, reuse: bool = False) -> Iterator[bool]:
    """Create (or, with ``reuse``, keep using) the database; drop it afterwards unless ``keep``.

    Yields whether an existing database is being reused.
    """
    reused = reuse and database_exists(url, pg_server)
    if not reused:
        create_database(url, pg_server)
    try:
        yield reused
    finally:
        if keep:
            print(f"(kept {url})")
        else:
            drop_database(url, pg_server)


def _admin(pg_server: str) -> psycopg.Connection[Any]:
    conninfo = make_url(pg_server).set(drivername="postgresql").render_as_string(False)
    return psycopg.connect(conninfo, autocommit=True)


def pg_version(pg_server: str) -> str:
    with _admin(pg_server) as admin:
        row = admin.execute("SHOW server_version").fetchone()
        return str(row[0]) if row else "unknown"


def bench_engine(url: str) -> Engine:
    """An engine as the app makes it; NullPool-free, so connections are reused like in serve."""
    return make_engine(url)


def one_shot_engine(url: str) -> Engine:
    return make_engine(url, poolclass=pool.NullPool)


# --- realistic runs -------------------------------------------------------------------------

HTTP, LLM = "http", "openai"


def target_kind(index: int) -> str:
    """One target in three streams from an LLM; the others are plain HTTP APIs."""
    return LLM if index % 3 == 0 else HTTP


def target_name(index: int) -> str:
    return f"bench-{index:03d}"


@dataclass
class Synth:
    """Plausible samples and runs from a seeded generator."""

    seed: int = 1
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def run(
        self,
        target: str,
        vantage: str,
        kind: str,
        started_at: datetime,
        n_samples: int,
        scheduled_at: datetime | None = None,
    ) -> RunRecord:
        samples, at = [], started_at
        for idx in range(n_samples):
            sample = self.sample(kind, idx, at)
            samples.append(sample)
            at += (sample.total_ms + 1.0) * _MS
        return RunRecord(
            id=uuid.UUID(int=self.rng.getrandbits(128), version=4),
            target=target,
            vantage=vantage,
            started_at=started_at,
            status="complete",
            samples=tuple(samples),
            scheduled_at=scheduled_at,
            finished_at=at,
        )

    def sample(self, kind: str, idx: int, started_at: datetime) -> SampleRecord:
        draw = self.rng.random()
        if draw < 0.005:
            return self._failed(idx, started_at)
        phases = self._llm_phases(idx) if kind == LLM else self._http_phases(idx)
        status, http_status, error = "ok", 200, None
        if draw < 0.015:
            status, http_status, error = "http_error", 503, "HTTP 503: upstream overloaded"
        elif draw < 0.02:
            status = "deadline_exceeded"
        total = sum(phases.values())
        return SampleRecord(
            idx=idx,
            started_at=started_at,
            status=status,
            total_ms=round(total, 4),
            phases=phases,
            provenance=self._provenance(phases),
            marks=self._marks(phases, kind),
            error_class="HTTPStatusError" if error else None,
            error=error,
            http_status=http_status,
            details=self._details(kind, idx, phases),
        )

    def _lognormal(self, median_ms: float, sigma: float) -> float:
        return round(self.rng.lognormvariate(0.0, sigma) * median_ms, 4)

    def _http_phases(self, idx: int) -> dict[str, float]:
        return {
            "connect": 0.0 if idx else self._lognormal(45.0, 0.2),
            "network": self._lognormal(22.0, 0.1),
            "server": self._lognormal(38.0, 0.5),
            "transfer": self._lognormal(0.6, 0.4),
        }

    def _llm_phases(self, idx: int) -> dict[str, float]:
        return {
            "connect": 0.0 if idx else self._lognormal(45.0, 0.2),
            "network": self._lognormal(22.0, 0.1),
            "queue": self._lognormal(120.0, 0.6),
            "prefill": self._lognormal(60.0, 0.3),
            "generation": self._lognormal(900.0, 0.2),
            "transfer": self._lognormal(0.8, 0.4),
        }

    def _provenance(self, phases: dict[str, float]) -> dict[str, str]:
        server = {"queue", "prefill"}
        estimated = {"network", "server"}
        return {
            name: "server" if name in server else "estimated" if name in estimated else "measured"
            for name in phases
        }

    def _marks(self, phases: dict[str, float], kind: str) -> dict[str, int]:
        marks: dict[str, int] = {}
        if phases["connect"]:
            marks |= {"connect_start": 0, "tls_start": int(phases["connect"] * 4e5)}
            marks |= {"connect_end": marks["tls_start"], "tls_end": int(phases["connect"] * 1e6)}
        ns = int(phases["connect"] * 1e6)
        marks["request_start"] = ns
        marks["request_sent"] = ns + 120_000
        head = phases["network"] + phases.get("server", phases.get("queue", 0.0))
        marks["response_headers"] = ns + int(head * 1e6)
        marks["first_byte"] = marks["response_headers"] + 90_000
        if kind == LLM:
            first = head + phases["prefill"]
            marks["first_answer_token"] = ns + int(first * 1e6)
            marks["last_answer_token"] = ns + int((first + phases["generation"]) * 1e6)
        marks["stream_end"] = int(sum(phases.values()) * 1e6)
        return marks

    def _details(self, kind: str, idx: int, phases: dict[str, float]) -> dict[str, Any]:
        llm = kind == LLM
        return {
            "http_version": "HTTP/2" if llm else "HTTP/1.1",
            "connection_reused": idx > 0,
            "cold_start": False,
            "remote_address": f"10.0.{self.rng.randrange(256)}.{self.rng.randrange(256)}:443",
            "request_id": str(uuid.UUID(int=self.rng.getrandbits(128), version=4)),
            "rtt_ms": round(phases["network"] * 0.98, 3),
            "tokens": {"prompt": 14, "completion": 180, "reasoning": 0}
            if llm
            else {"prompt": None, "completion": None, "reasoning": None},
            "server_timing": {
                "usage.queue_time": phases["queue"],
                "usage.prompt_time": phases["prefill"],
                "usage.completion_time": round(phases["generation"] * 0.99, 4),
            }
            if llm
            else {"app": round(phases["server"] * 0.97, 3)},
            "unsplit": [],
        }

    def _failed(self, idx: int, started_at: datetime) -> SampleRecord:
        waited = self._lognormal(3000.0, 0.1)
        return SampleRecord(
            idx=idx,
            started_at=started_at,
            status="error",
            total_ms=waited,
            phases={},
            marks={"connect_start": 0},
            error_class="ConnectTimeout",
            error="timed out connecting to api.example.com:443",
            details={"http_version": None, "connection_reused": False, "unsplit": []},
        )


PHASE_NAMES = {HTTP: HTTP_PHASES, LLM: LLM_PHASES}


# --- bulk population ---------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """Who probes what, how often, for how long: the shape of the stored history."""

    targets: int = 29
    vantages: int = 2
    days: float = 90.0
    interval_s: float = 900.0
    samples_per_run: int = 20
    end: datetime = field(default_factory=lambda: datetime.now(UTC).replace(microsecond=0))

    @property
    def runs_per_series(self) -> int:
        return int(self.days * 86400 / self.interval_s)

    @property
    def runs(self) -> int:
        return self.targets * self.vantages * self.runs_per_series

    @property
    def samples(self) -> int:
        return self.runs * self.samples_per_run

    @property
    def start(self) -> datetime:
        return self.end - timedelta(days=self.days)

    def describe(self) -> str:
        return (
            f"{self.targets} targets x {self.vantages} vantages x {self.days:g} days x "
            f"{86400 / self.interval_s:g} runs/day (every {self.interval_s:g} s) x "
            f"{self.samples_per_run} samples = {self.runs:,} runs, {self.samples:,} samples"
        )

    def vantage(self, index: int) -> str:
        return f"vantage-{index}"

    def target(self, index: int) -> Target:
        return Target(
            name=target_name(index), url=f"https://api{index}.example.com/v1", interval=900
        )


def add_layout_options(parser: argparse.ArgumentParser, layout: Layout) -> None:
    group = parser.add_argument_group("stored history (populated, not measured)")
    group.add_argument("--targets", type=int, default=layout.targets)
    group.add_argument("--vantages", type=int, default=layout.vantages)
    group.add_argument("--days", type=float, default=layout.days)
    group.add_argument("--interval", type=float, default=layout.interval_s, help="seconds")
    group.add_argument("--samples-per-run", type=int, default=layout.samples_per_run)


def layout_from(args: argparse.Namespace) -> Layout:
    return Layout(args.targets, args.vantages, args.days, args.interval, args.samples_per_run)


@dataclass(frozen=True)
class _Template:
    """A realistic run, rendered once as database values, stamped out many times."""

    run: dict[str, Any]
    samples: list[dict[str, Any]]
    offsets_ms: list[float]
    duration_ms: float


def _templates(synth: Synth, kind: str, count: int, per_run: int) -> list[_Template]:
    start = datetime(2000, 1, 1, tzinfo=UTC)
    made = []
    for _ in range(count):
        record = synth.run("t", "v", kind, start, per_run)
        run = _run_values(record, 0)
        run["summary"] = json.dumps(run["summary"])
        samples = [_sample_values(record.id, s) for s in record.samples]
        for sample in samples:
            for column in ("phases", "provenance", "marks", "details"):
                sample[column] = json.dumps(sample[column])
        offsets = [(s.started_at - start) / _MS for s in record.samples]
        assert record.finished_at is not None
        made.append(_Template(run, samples, offsets, (record.finished_at - start) / _MS))
    return made


Stamped = tuple[dict[str, Any], list[dict[str, Any]]]
RUN_COLUMNS = (
    "id target_id vantage scheduled_at started_at finished_at status n_samples n_ok n_errors "
    "n_deadline_exceeded dominant_phase total_p50 total_p90 total_p95 total_p99 summary"
).split()
SAMPLE_COLUMNS = (
    "run_id idx started_at status error_class error http_status total_ms phases provenance "
    "marks details"
).split()


def _history(layout: Layout, ids: dict[str, int], seed: int) -> Iterator[Stamped]:
    """(run row, sample rows) in the order production would have written them."""
    synth = Synth(seed)
    kinds = {HTTP: _templates(synth, HTTP, 300, layout.samples_per_run)}
    kinds[LLM] = _templates(synth, LLM, 300, layout.samples_per_run)
    series = []
    for t in range(layout.targets):
        name = target_name(t)
        for v in range(layout.vantages):
            offset = first_run_offset(f"{name}@{v}", layout.interval_s)
            series.append((offset, ids[name], layout.vantage(v), kinds[target_kind(t)]))
    series.sort(key=lambda item: item[0])
    rng = synth.rng
    for slot in range(layout.runs_per_series):
        base = layout.start + timedelta(seconds=slot * layout.interval_s)
        for offset, target, vantage, templates in series:
            template = templates[rng.randrange(len(templates))]
            scheduled = base + timedelta(seconds=offset)
            started = scheduled + timedelta(microseconds=rng.randrange(300, 4000))
            run_id = uuid.UUID(int=rng.getrandbits(128), version=4)
            yield _stamp(template, run_id, target, vantage, scheduled, started)


def _stamp(
    template: _Template,
    run_id: uuid.UUID,
    target: int,
    vantage: str,
    scheduled: datetime,
    started: datetime,
) -> Stamped:
    run = template.run | {
        "id": run_id,
        "target_id": target,
        "vantage": vantage,
        "scheduled_at": scheduled,
        "started_at": started,
        "finished_at": started + template.duration_ms * _MS,
    }
    samples = [
        sample | {"run_id": run_id, "started_at": started + offset * _MS}
        for sample, offset in zip(template.samples, template.offsets_ms, strict=True)
    ]
    return run, samples


def ensure_targets(engine: Engine, layout: Layout) -> dict[str, int]:
    with make_sessions(engine).begin() as session:
        targets = [layout.target(t) for t in range(layout.targets)]
        sync_targets(session, target_values(targets), datetime.now(UTC))
        rows = session.execute(select(TargetRow.name, TargetRow.id))
        return dict(rows.all())


def populate(url: str, layout: Layout, *, seed: int = 7, budget_s: float = 3600.0) -> float:
    """Fill a fresh database with ``layout``'s history; returns the seconds it took."""
    started = time.monotonic()
    engine = one_shot_engine(url)
    try:
        ids = ensure_targets(engine, layout)
        history = _history(layout, ids, seed)
        if engine.dialect.name == "postgresql":
            _populate_postgres(engine, history, layout, started + budget_s)
        else:
            _populate_sqlite(engine, history, layout, started + budget_s)
    finally:
        engine.dispose()
    return time.monotonic() - started


_SAMPLE_INDEXES_PG = (
    "ALTER TABLE samples ADD CONSTRAINT pk_samples PRIMARY KEY {key}",
    "CREATE INDEX ix_samples_started_at ON samples (started_at)",
    "ALTER TABLE samples ADD CONSTRAINT fk_samples_run_id_runs FOREIGN KEY (run_id)"
    " REFERENCES runs (id) ON DELETE CASCADE",
)


def partition_days(engine: Engine, start: datetime, end: datetime) -> bool:
    """Samples partitioned by day (migration 0010): each day from ``start`` to ``end`` made
    before the rows come, as the service's upkeep makes them ahead (rows moved out of the
    default partition later would leave dead rows behind); whether the table is partitioned."""
    with engine.begin() as connection:
        if not is_partitioned(connection):
            return False
        present = set(existing_days(connection))
        for n in range((end.date() - start.date()).days + 1):
            if (day := start.date() + timedelta(days=n)) not in present:
                create_partition(connection, day)
    return True


def _populate_postgres(
    engine: Engine, history: Iterator[Stamped], layout: Layout, deadline: float
) -> None:
    # A partitioned table's primary key holds its partition key.
    key = (
        "(run_id, idx, started_at)"
        if partition_days(engine, layout.start, layout.end)
        else "(run_id, idx)"
    )
    raw = engine.raw_connection()
    try:
        connection: psycopg.Connection[Any] = raw.driver_connection  # type: ignore[assignment]
        connection.autocommit = True
        # As a bulk load is done: constraints and indexes after the rows, not per row.
        connection.execute("ALTER TABLE samples DROP CONSTRAINT fk_samples_run_id_runs")
        connection.execute("ALTER TABLE samples DROP CONSTRAINT pk_samples")
        connection.execute("DROP INDEX ix_samples_started_at")
        _copy_postgres(connection, history, layout, deadline)
        connection.execute("SET maintenance_work_mem = '1GB'")
        for statement in _SAMPLE_INDEXES_PG:
            _progress(f"  {statement.split(' ADD ')[-1][:60]} ...")
            connection.execute(statement.format(key=key))
        _progress("  VACUUM ANALYZE ...")
        connection.execute("VACUUM ANALYZE runs")
        connection.execute("VACUUM ANALYZE samples")
        # Written out now, so the benchmark's first checkpoint does not pay for the load.
        connection.execute("CHECKPOINT")
    finally:
        raw.close()


def _copy_postgres(
    connection: psycopg.Connection[Any],
    history: Iterator[Stamped],
    layout: Layout,
    deadline: float,
) -> None:
    batch_runs = 20_000
    done = 0
    while done < layout.runs:
        chunk = [item for _, item in zip(range(batch_runs), history, strict=False)]
        if not chunk:
            break
        with connection.transaction(), connection.cursor() as cursor:
            with cursor.copy(f"COPY runs ({', '.join(RUN_COLUMNS)}) FROM STDIN") as copy:
                for run, _ in chunk:
                    copy.write_row([run[c] for c in RUN_COLUMNS])
            with cursor.copy(f"COPY samples ({', '.join(SAMPLE_COLUMNS)}) FROM STDIN") as copy:
                for _, samples in chunk:
                    for sample in samples:
                        copy.write_row([sample[c] for c in SAMPLE_COLUMNS])
        done += len(chunk)
        _loading(done, layout, deadline)


def _populate_sqlite(
    engine: Engine, history: Iterator[Stamped], layout: Layout, deadline: float
) -> None:
    raw = engine.raw_connection()
    try:
        connection: Any = raw.driver_connection
        connection.isolation_level = None
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute("PRAGMA cache_size=-1000000")
        connection.execute("DROP INDEX ix_samples_started_at")
        run_sql = _sqlite_insert("runs", RUN_COLUMNS)
        sample_sql = _sqlite_insert("samples", SAMPLE_COLUMNS)
        done = 0
        while done < layout.runs:
            chunk = [item for _, item in zip(range(10_000), history, strict=False)]
            if not chunk:
                break
            connection.execute("BEGIN")
            connection.executemany(run_sql, [_sqlite_row(run, RUN_COLUMNS) for run, _ in chunk])
            rows = (_sqlite_row(s, SAMPLE_COLUMNS) for _, samples in chunk for s in samples)
            connection.executemany(sample_sql, rows)
            connection.execute("COMMIT")
            done += len(chunk)
            _loading(done, layout, deadline)
        _progress("  CREATE INDEX ix_samples_started_at ...")
        connection.execute("CREATE INDEX ix_samples_started_at ON samples (started_at)")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        # The load ran with synchronous=OFF: put it on disk now, or the benchmark's first
        # checkpoint (synchronous=NORMAL fsyncs the file) waits for gigabytes of it.
        os.sync()
    finally:
        raw.close()


def _sqlite_insert(table: str, columns: Sequence[str]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"


def _sqlite_row(values: dict[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    """Values as SQLAlchemy stores them on SQLite: hex UUIDs, naive UTC text times."""
    row = []
    for column in columns:
        value = values[column]
        if isinstance(value, uuid.UUID):
            value = value.hex
        elif isinstance(value, datetime):
            value = value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        row.append(value)
    return tuple(row)


def _loading(done: int, layout: Layout, deadline: float) -> None:
    if done % 100_000 < 20_000 or done >= layout.runs:
        _progress(f"  {done:,}/{layout.runs:,} runs loaded")
    if time.monotonic() > deadline:
        raise SystemExit("populating took longer than its time budget; stopped")


def _progress(message: str) -> None:
    print(message, flush=True)


# --- the machine -------------------------------------------------------------------------


def busy_cores(window_s: float = 2.0) -> float:
    """How many cores were busy (all processes) over ``window_s``, from /proc/stat."""

    def busy() -> tuple[int, int]:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(ticks[:8]) - ticks[3] - ticks[4], sum(ticks[:8])

    b0, t0 = busy()
    time.sleep(window_s)
    b1, t1 = busy()
    cores = os.cpu_count() or 1
    return (b1 - b0) / max(1, t1 - t0) * cores


def wait_quiet(max_wait_s: float, threshold: float = 0.25) -> None:
    """Wait (bounded) until other work on this small machine calms down, and say so.

    Other benchmarks may share the machine; a measurement taken while they run says
    more about them than about us.
    """
    if max_wait_s <= 0:
        return
    deadline = time.monotonic() + max_wait_s
    while (cores := busy_cores()) >= threshold and time.monotonic() < deadline:
        pass
    state = "quiet" if cores < threshold else "STILL BUSY, measuring anyway"
    print(f"(machine {state}: {cores:.2f} cores busy before measuring)", flush=True)


def add_quiet_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--wait-quiet",
        type=float,
        default=120.0,
        metavar="S",
        help="before each measurement wait up to S s for the machine to be idle (0: don't)",
    )


# --- reporting ---------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def backend_label(url: str) -> str:
    return "PostgreSQL" if make_url(url).get_backend_name() == "postgresql" else "SQLite (WAL)"


def _size(value: Any) -> int:
    """The length of ``value`` as text; a JSON parameter's (psycopg's ``Json``, whose repr is
    cut short) as the JSON sent."""
    if hasattr(value, "obj"):
        return len(json.dumps(value.obj, default=str))
    if isinstance(value, dict):
        return sum(_size(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_size(v) for v in value)
    return len(str(value))


class SentStatements:
    """Statements sent to ``engine``'s database while ``counting``, and the length of their
    parameters as text."""

    def __init__(self, engine: Engine) -> None:
        self.count, self.bytes, self._on = 0, 0, False
        event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, _conn: Any, _cursor: Any, _statement: str, params: Any, *_: Any) -> None:
        if self._on:
            self.count += 1
            self.bytes += _size(params)

    @contextmanager
    def counting(self) -> Iterator[None]:
        self._on = True
        try:
            yield
        finally:
            self._on = False
