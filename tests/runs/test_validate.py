"""The door (app.runs.validate): each rule refuses what it should, naming the field, and
every run the probe, the run factory and the database sink's callers make passes."""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from app.clock import utcnow
from app.config import Target
from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from app.probe.spec import Kind
from app.runs import validate
from app.runs.dbsink import DatabaseSink
from app.runs.memsink import MemorySink
from app.runs.pipeline import Pipeline
from app.runs.sink import SinkRefused
from app.runs.slots import epoch_ms
from app.runs.spool import Spool
from app.runs.validate import (
    EARLIEST,
    MAX_AHEAD,
    MAX_SAMPLES,
    PHASE_SUM_TOLERANCE_MS,
    Door,
    check_run,
)
from app.runs.writer import Writer
from app.store.models import RunRow
from app.store.records import RunRecord, RunStatus
from tests.runfactory import failed_run, make_run, record_of

NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def good(n: int = 4) -> RunRecord:
    return record_of(make_run(np.random.default_rng(3), NOW - timedelta(hours=1), n=n, failed=1))


def with_sample(record: RunRecord, index: int, **changes: Any) -> RunRecord:
    samples = list(record.samples)
    samples[index] = replace(samples[index], **changes)
    return replace(record, samples=tuple(samples))


def with_phase(record: RunRecord, index: int, phase: str, value: float) -> RunRecord:
    """``phase`` set to ``value``; the total follows while it is a finite number."""
    sample = record.samples[index]
    phases = {**sample.phases, phase: value}
    total = math.fsum(phases.values()) if math.isfinite(value) else sample.total_ms
    return with_sample(record, index, phases=phases, total_ms=total)


def censored_with(record: RunRecord, total_ms: float) -> RunRecord:
    return with_sample(record, 0, status="deadline_exceeded", total_ms=total_ms)


@dataclass(frozen=True)
class Case:
    name: str
    record: RunRecord
    field: str | None  # None: no problem
    kind: str | None = None
    words: str = ""


RUN = good()
FIRST = RUN.samples[0]
SUMMED = math.fsum(FIRST.phases.values())
AT = RUN.started_at
SLOT = epoch_ms(AT) - 1_000
CASES = [
    Case("a factory run", RUN, None),
    Case("status not a run status", replace(RUN, status="pwned"), "status", "status", "'pwned'"),
    Case(
        "sample status unknown",
        with_sample(RUN, 2, status="great"),
        "samples[2].status",
        "sample_status",
        "'great'",
    ),
    Case(
        "negative phase",
        with_phase(RUN, 3, "queue", -5.0),
        "samples[3].phases.queue",
        "phase",
        "-5.0 is negative",
    ),
    Case(
        "infinite phase",
        with_phase(RUN, 1, "prefill", math.inf),
        "samples[1].phases.prefill",
        "phase",
        "not finite",
    ),
    Case(
        "NaN phase",
        with_phase(RUN, 1, "network", math.nan),
        "samples[1].phases.network",
        "phase",
        "not finite",
    ),
    Case(
        "sample status not a string",
        with_sample(RUN, 0, status=["ok"]),
        "samples[0].status",
        "sample_status",
        "['ok']",
    ),
    Case(
        "phases not an object",
        with_sample(RUN, 1, phases=[1.0, 2.0]),
        "samples[1].phases",
        "phase",
        "not an object",
    ),
    Case(
        "a phase not a number",
        with_sample(RUN, 1, phases={**RUN.samples[1].phases, "queue": "5"}),
        "samples[1].phases.queue",
        "phase",
        "'5' is not a number",
    ),
    Case("negative total", with_sample(RUN, 0, total_ms=-1.0), "samples[0].total_ms", "total"),
    Case(
        "infinite total of an error sample",
        with_sample(RUN, 4, total_ms=math.inf),
        "samples[4].total_ms",
        "total",
    ),
    Case(
        "phases off the total by more than the tolerance",
        with_sample(RUN, 0, total_ms=SUMMED + 2 * PHASE_SUM_TOLERANCE_MS),
        "samples[0].phases",
        "phase_sum",
        "add up to",
    ),
    Case(
        "phases off the total within the tolerance",
        with_sample(RUN, 0, total_ms=SUMMED + PHASE_SUM_TOLERANCE_MS / 2),
        None,
    ),
    Case(
        "a censored sample's phases off its total",
        censored_with(RUN, SUMMED + 50),
        "samples[0].phases",
        "phase_sum",
    ),
    Case(
        "an error sample's phases are not summed",
        with_sample(RUN, 0, status="error", total_ms=SUMMED + 50),
        None,
    ),
    Case("a slot just before its scheduled time", replace(RUN, scheduled_at=AT, slot=SLOT), None),
    Case("no slot (an older agent)", replace(RUN, slot=None), None),
    Case(
        "a slot not a whole number",
        replace(RUN, slot="12"),  # type: ignore[arg-type]
        "slot",
        "slot",
        "'12' is not a whole number",
    ),
    Case("a slot that is a boolean", replace(RUN, slot=True), "slot", "slot"),
    Case(
        "a slot after the run's scheduled time",
        replace(RUN, scheduled_at=RUN.started_at, slot=SLOT + 60_000),
        "slot",
        "slot",
        "is after scheduled_at",
    ),
    Case(
        "a slot in 9999",
        replace(RUN, slot=epoch_ms(datetime(9999, 1, 1, tzinfo=UTC))),
        "slot",
        "slot",
        "ahead of the receiver's clock",
    ),
    Case("a slot before 2000", replace(RUN, slot=-5), "slot", "slot", "before 2000-01-01"),
    Case("a slot beyond any date", replace(RUN, slot=10**20), "slot", "slot", "beyond any date"),
    Case(
        "dated 9999",
        replace(RUN, started_at=datetime(9999, 12, 31, tzinfo=UTC), finished_at=None),
        "started_at",
        "time",
        "ahead of the receiver's clock",
    ),
    Case(
        "dated year 1",
        replace(RUN, started_at=datetime(1, 1, 1, tzinfo=UTC)),
        "started_at",
        "time",
        "before 2000-01-01",
    ),
    Case(
        "finished far ahead",
        replace(RUN, finished_at=NOW + MAX_AHEAD + timedelta(seconds=1)),
        "finished_at",
        "time",
    ),
    Case(
        "an agent's clock a little ahead",
        replace(RUN, started_at=NOW + MAX_AHEAD / 2, finished_at=NOW + MAX_AHEAD),
        None,
    ),
    Case(
        "history from the first day",
        replace(RUN, started_at=EARLIEST, finished_at=EARLIEST + timedelta(seconds=5)),
        None,
    ),
    Case(
        "no time zone",
        replace(RUN, started_at=RUN.started_at.replace(tzinfo=None)),
        "started_at",
        "time",
        "no time zone",
    ),
    Case(
        "finished before it started",
        replace(RUN, finished_at=RUN.started_at - timedelta(seconds=1)),
        "finished_at",
        "order",
        "before started_at",
    ),
    Case("a complete run of no sample", replace(RUN, samples=()), "samples", "samples"),
    Case("an aborted run of no sample", replace(RUN, samples=(), status="aborted"), None),
    Case(
        "more samples than a target may ask for",
        replace(RUN, samples=(FIRST,) * (MAX_SAMPLES + 1)),
        "samples",
        "samples",
        f"more than {MAX_SAMPLES}",
    ),
    Case(
        "as many samples as a target may ask for",
        replace(RUN, samples=(FIRST,) * MAX_SAMPLES),
        None,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_rule_refuses_its_field_and_only_it(case: Case) -> None:
    problems = check_run(case.record, NOW)
    if case.field is None:
        assert problems == []
        return
    assert [(p.field, p.kind) for p in problems] == [(case.field, case.kind)]
    assert case.words in str(problems[0])
    assert str(problems[0]).startswith(f"{case.field}: ")


def test_the_phase_sum_is_left_out_when_asked() -> None:
    off = with_sample(RUN, 0, total_ms=SUMMED + 50)
    assert check_run(off, NOW, phase_sums=False) == []
    assert check_run(with_phase(RUN, 0, "queue", -1), NOW, phase_sums=False) != []


def test_every_problem_of_a_run_is_named() -> None:
    bad = with_phase(replace(RUN, status="pwned"), 2, "queue", -1.0)
    fields = [p.field for p in check_run(bad, NOW)]
    assert fields == ["status", "samples[2].phases.queue"]


@pytest.mark.parametrize("seed", range(20))
def test_the_run_factory_runs_pass(seed: int) -> None:
    rng = np.random.default_rng(seed)
    made = make_run(
        rng, NOW - timedelta(days=seed), n=20, censored=3, failed=2, slow=0.2, slow_ms=900
    )
    assert check_run(record_of(made), NOW) == []
    assert check_run(record_of(failed_run(NOW - timedelta(days=1))), NOW) == []


def test_a_refusal_is_counted_each_time_and_logged_once_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    counted: list[tuple[str, str]] = []
    door = Door(lambda: NOW, lambda vantage, kind: counted.append((vantage, kind)))
    negative = with_phase(RUN, 0, "queue", -1.0)
    for _ in range(3):
        assert door.refusal(replace(negative, id=uuid.uuid4())) == (
            "samples[0].phases.queue: -1.0 is negative"
        )
    assert door.refusal(replace(RUN, status="pwned")) is not None
    assert door.refusal(RUN) is None
    assert counted == [("eu", "phase")] * 3 + [("eu", "status")]
    logged = [r.getMessage() for r in caplog.records if r.name == "app.runs.validate"]
    assert len(logged) == 2 and "(phase;" in logged[0] and "(status;" in logged[1]


# --- The real probe's runs, and the database sink refusing --------------------------------

FAST = SimConfig(one_way_ms=2, queue_median_ms=5, queue_sigma=0, prefill_ms=2, tokens=5)
SLOW = SimConfig(one_way_ms=2, queue_median_ms=300, queue_sigma=0, prefill_ms=2, tokens=5)


@pytest.fixture(params=[FAST, SLOW], ids=["answered", "cut-at-the-deadline"])
def sim_config(request: pytest.FixtureRequest) -> SimConfig:
    config: SimConfig = request.param
    return config


def chat_target(sim: SimServer, deadline_ms: int) -> Target:
    return Target.model_validate(
        {
            "name": "chat",
            "kind": Kind.OPENAI,
            "url": f"{sim.url}/v1/chat/completions",
            "body": {"model": "sim", "stream": True, "messages": []},
            "samples": 4,
            "deadline_ms": deadline_ms,
        }
    )


@pytest.mark.anyio
async def test_the_real_probes_runs_pass(
    sim: SimServer, sim_config: SimConfig, tmp_path: Path
) -> None:
    sink = MemorySink()
    # The answered case's deadline is far above its ~20 ms so that a busy machine cannot cut
    # it (150 ms did once at load 12); the cut case's 150 ms is half its fixed 300 ms queue.
    deadline_ms = 10_000 if sim_config is FAST else 150
    record = await Pipeline(Writer(sink, Spool(tmp_path / "spool")), vantage="here").run(
        chat_target(sim, deadline_ms)
    )
    statuses = {sample.status for sample in record.samples}
    assert statuses == {"ok" if sim_config is FAST else "deadline_exceeded"}
    assert len(record.samples) == 4
    assert check_run(record, utcnow()) == []
    again = RunRecord.from_json(record.to_json())  # as an agent pushes it, as the spool keeps it
    assert check_run(again, utcnow()) == []


def test_the_database_sink_refuses_a_bad_run_alone_and_stores_its_batch_mates(
    sessions: sessionmaker[Session],
) -> None:
    counted: list[tuple[str, str]] = []
    sink = DatabaseSink(sessions, refused=lambda vantage, kind: counted.append((vantage, kind)))
    now = utcnow()
    fresh = record_of(make_run(np.random.default_rng(1), now - timedelta(minutes=1)))
    future = replace(fresh, id=uuid.uuid4(), started_at=datetime(9999, 12, 31, tzinfo=UTC))
    with pytest.raises(SinkRefused, match=r"^started_at: 9999-12-31"):
        sink.store(future)
    mate = replace(fresh, id=uuid.uuid4())
    answers = sink.store_batch([fresh, with_phase(fresh, 0, "queue", -5.0), mate])
    assert answers[0] is True and answers[2] is True
    assert answers[1] == "samples[0].phases.queue: -5.0 is negative"
    with sessions() as session:
        stored = set(session.scalars(select(RunRow.id)))
        assert session.scalar(select(func.count()).select_from(RunRow)) == 2
    assert stored == {fresh.id, mate.id}
    assert counted == [("eu", "time"), ("eu", "phase")]
    assert sink.problem is None and RunStatus.COMPLETE == fresh.status


def test_a_spooled_run_the_door_refuses_is_set_aside_and_never_blocks_the_flush(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    spool = Spool(tmp_path / "spool")
    now = utcnow()
    runs = [
        record_of(make_run(np.random.default_rng(seed), now - timedelta(minutes=seed)))
        for seed in range(1, 4)
    ]
    bad = replace(runs[1], finished_at=runs[1].started_at - timedelta(seconds=1))
    for record in (runs[0], bad, runs[2]):
        spool.append(record)
    assert spool.flush(DatabaseSink(sessions).store_batch, 50, 1 << 20) == 3
    assert not spool.has_pending()
    rejected = (tmp_path / "spool" / "rejected.jsonl").read_text().splitlines()
    assert [RunRecord.from_json(json.loads(line)).id for line in rejected] == [bad.id]
    with sessions() as session:
        assert set(session.scalars(select(RunRow.id))) == {runs[0].id, runs[2].id}


QUICK = [
    FIRST,
    replace(FIRST, total_ms=int(FIRST.total_ms)),
    replace(FIRST, phases={name: int(v) for name, v in FIRST.phases.items()}),
    replace(FIRST, phases={**FIRST.phases, "queue": True}),
    replace(FIRST, phases={**FIRST.phases, "queue": -0.0}),
    replace(FIRST, phases={**FIRST.phases, "queue": math.nan}),
    replace(FIRST, phases={**FIRST.phases, "queue": -math.inf, "server": math.inf}),
    replace(FIRST, phases={**FIRST.phases, "queue": math.nan, "server": -1.0}),
    replace(FIRST, total_ms=math.nan),
    replace(FIRST, total_ms=-1e-9),
    replace(FIRST, total_ms=FIRST.total_ms + 1.0),
    replace(FIRST, status="error", total_ms=FIRST.total_ms + 1.0),
    replace(FIRST, status=RunStatus.COMPLETE),
    replace(FIRST, status=["ok"]),
    replace(FIRST, phases=[("queue", 1.0)]),
    replace(FIRST, phases={}),
]


@pytest.mark.parametrize("sample", QUICK)
@pytest.mark.parametrize("phase_sums", [True, False])
def test_the_quick_look_at_a_plain_sample_finds_what_the_full_check_finds(
    sample: Any, phase_sums: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = replace(RUN, samples=(sample, *RUN.samples[1:]))
    quick = check_run(run, NOW, phase_sums=phase_sums)
    monkeypatch.setattr(validate, "_plainly_fine", lambda sample, phase_sums: False)
    assert check_run(run, NOW, phase_sums=phase_sums) == quick
