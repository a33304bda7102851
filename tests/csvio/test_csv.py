"""Samples as CSV: the layout, export filters, all-or-nothing import, and the CLI commands."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.analysis.llmmetrics import METRIC_NAMES
from app.clock import parse_timestamp
from app.csvio import export as csvexport
from app.csvio.export import export_samples
from app.csvio.importer import import_samples
from app.csvio.layout import (
    BASE_COLUMNS,
    CsvExportError,
    CsvImportError,
    CsvProblem,
    ImportResult,
    format_timestamp,
    phase_order,
)
from app.store.db import make_engine, transaction
from app.store.migrate import is_current
from app.store.models import RollupRow, RunDigestRow, RunRow, SampleRow, TargetRow
from app.store.reads.breakdown import current_breakdowns
from app.store.records import RunRecord, SampleRecord
from app.store.serieslatest import SeriesLatestRow
from tests.clirun import run_cli as cli
from tests.runfactory import store_records, streamed_sample

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
LLM = {"connect": 1 / 3, "network": 0.1 + 0.2, "queue": 1e-7, "prefill": 1e16, "generation": 2.5}
HTTP = {"connect": 0.0, "network": 12.75, "server": 80.125, "transfer": 3.0, "tls_extra": 0.5}


# Helpers ----------------------------------------------------------------------------------


def sample(idx: int, at: datetime, status: str, total: float, **phases: float) -> SampleRecord:
    return SampleRecord(idx=idx, started_at=at, status=status, total_ms=total, phases=phases)


def run(target: str, vantage: str, *samples: SampleRecord) -> RunRecord:
    return RunRecord(
        id=uuid.uuid4(),
        target=target,
        vantage=vantage,
        started_at=samples[0].started_at,
        status="complete",
        samples=samples,
    )


def varied_runs() -> list[RunRecord]:
    """Every status, missing phases, two targets, two vantages, runs that start together,
    and a run whose samples did not start in index order."""
    at = [T0 + timedelta(seconds=s, microseconds=7) for s in range(4)]
    return [
        run(
            "llm",
            "eu-west",
            sample(0, at[0], "ok", 2.5e9 + 0.1, **LLM),
            sample(1, at[1], "deadline_exceeded", 1500.0, connect=2.0, network=40.5, queue=9.25),
            sample(2, at[2], "error", 31.0, connect=31.0),
        ),
        run(
            "llm",
            "us-east",
            sample(0, at[0], "ok", 123.456, **LLM),
            sample(1, at[1], "error", 0.0),
        ),
        run(
            "web",
            "eu-west",
            sample(0, at[0] + timedelta(hours=5, minutes=30), "http_error", 96.375, **HTTP),
            sample(1, at[3], "ok", 0.1, server=0.1),
        ),
    ]


def store(sessions: sessionmaker[Session], runs: list[RunRecord]) -> None:
    store_records(sessions, runs, T0)


def export_text(
    engine: Engine,
    target: str | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> str:
    out = io.StringIO()
    count = export_samples(engine, out, target=target, start=start, end=end)
    assert count == out.getvalue().count("\n") - 1
    return out.getvalue()


def import_text(engine: Engine, text: str) -> ImportResult:
    return import_samples(engine, io.StringIO(text))


def empty(sessions: sessionmaker[Session]) -> None:
    with transaction(sessions) as session:
        for table in (SampleRow, RunRow, SeriesLatestRow, TargetRow):
            session.execute(delete(table))


def counts(engine: Engine) -> list[int | None]:
    """Targets, runs, samples."""
    with Session(engine) as session:
        tables = (TargetRow, RunRow, SampleRow)
        return [session.scalar(select(func.count()).select_from(table)) for table in tables]


GOOD_RUN = "0b9ac1b6-3b0e-4c36-9a5c-0e8f1c1f9e01"
OTHER_RUN = "5d2f8a61-7c4e-4b8a-8f0a-2a9e6c3d4b02"
GOOD_FILE = f"""\
timestamp,target,vantage,run_id,status,total_ms,connect_ms,server_ms
2024-05-01T12:00:00.000000Z,web,eu,{GOOD_RUN},ok,100.5,1.5,99.0
2024-05-01T12:00:01.000000Z,web,eu,{GOOD_RUN},error,3.0,3.0,
2024-05-01T12:00:02.000000Z,web,us,{OTHER_RUN},ok,50.0,,50.0
"""


def with_row(line: int, row: str) -> str:
    lines = GOOD_FILE.splitlines()
    lines[line - 1] = row
    return "\n".join(lines) + "\n"


# The layout -------------------------------------------------------------------------------


def test_phase_columns_follow_llm_order_then_server_then_others_alphabetically() -> None:
    names = ["zeta", "server", "transfer", "alpha", "connect", "queue", "generation"]
    expected = ["connect", "queue", "generation", "transfer", "server", "alpha", "zeta"]
    assert phase_order(names) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-05-01T12:00:00.000000Z", T0),
        ("2024-05-01T12:00:00+00:00", T0),
        ("2024-05-01T14:00:00+02:00", T0),
        ("2024-05-01 07:00:00.000000-05:00", T0),
    ],
)
def test_timestamps_with_any_offset_are_read_as_utc(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected and parsed.utcoffset() == timedelta(0)


def test_timestamps_are_written_fixed_width_with_z() -> None:
    assert format_timestamp(T0) == "2024-05-01T12:00:00.000000Z"
    later = datetime(2024, 5, 1, 14, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(later) == "2024-05-01T12:00:00.000005Z"


@pytest.mark.parametrize("text", ["2024-05-01T12:00:00", "2024-05-01", "yesterday", ""])
def test_timestamp_without_an_offset_or_not_iso_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


# Export -----------------------------------------------------------------------------------


def test_export_import_export_is_byte_identical(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, varied_runs())
    first = export_text(engine)
    empty(sessions)

    result = import_text(engine, first)

    assert result == ImportResult(runs_stored=3, samples_stored=7, runs_already_present=0)
    assert export_text(engine) == first


def streamed_runs() -> list[RunRecord]:
    """A streamed answer with its rhythm, a whole one with usage counts, an HTTP sample."""
    answer = streamed_sample(0, 120.5, 330.5, 22, 41.25, T0)
    usage = {"tokens": {"prompt": 9, "completion": 4, "reasoning": None}}
    whole = SampleRecord(1, T0 + timedelta(seconds=1), "ok", 80.0, {"server": 80.0}, details=usage)
    plain = sample(0, T0 + timedelta(seconds=2), "ok", 10.0, server=10.0)
    return [run("chat", "eu", answer, whole), run("web", "eu", plain)]


def test_llm_metrics_follow_the_phases_and_round_trip_byte_identical(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, streamed_runs())
    first = export_text(engine)
    head, answer, whole, plain = first.splitlines()
    assert head.endswith(",server_ms," + ",".join(METRIC_NAMES))
    cells = dict(zip(head.split(","), answer.split(","), strict=True))
    assert (cells["ttft_ms"], cells["tpot_ms"], cells["stall_ms"]) == ("120.5", "10.0", "41.25")
    assert (cells["input_tokens"], cells["output_tokens"]) == ("20.0", "22.0")
    cells = dict(zip(head.split(","), whole.split(","), strict=True))
    assert (cells["ttft_ms"], cells["output_tokens"], cells["output_tokens_per_s"]) == (
        "", "4.0", "50.0",
    )  # fmt: skip
    assert plain.endswith(",10.0" + "," * len(METRIC_NAMES))
    empty(sessions)
    assert import_text(engine, first).samples_stored == 3
    assert export_text(engine) == first


def test_an_export_without_llm_values_has_no_llm_columns_and_imports_as_before(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, [run("web", "eu", sample(0, T0, "ok", 10.0, server=10.0))])
    assert export_text(engine).splitlines()[0] == f"{','.join(BASE_COLUMNS)},server_ms"
    assert import_text(engine, GOOD_FILE).samples_stored == 3


def test_a_bad_llm_metric_cell_is_refused_with_its_column(engine: Engine) -> None:
    text = f"""\
timestamp,target,vantage,run_id,status,total_ms,server_ms,tpot_ms
2024-05-01T12:00:00.000000Z,chat,eu,{GOOD_RUN},ok,100.5,99.0,-1
2024-05-01T12:00:01.000000Z,chat,eu,{GOOD_RUN},ok,100.5,99.0,
"""
    with pytest.raises(CsvImportError) as refused:
        import_text(engine, text)
    assert [(p.line, p.column) for p in refused.value.problems] == [(2, "tpot_ms")]


def test_export_writes_one_row_per_sample_in_time_then_run_order(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    runs = varied_runs()
    store(sessions, runs)

    lines = export_text(engine).splitlines()

    assert lines[0] == (
        "timestamp,target,vantage,run_id,status,total_ms,connect_ms,network_ms,queue_ms,"
        "prefill_ms,generation_ms,transfer_ms,server_ms,tls_extra_ms"
    )
    # Two runs start at the same microsecond: their run ids order them.
    assert [line.split(",")[3] for line in lines[1:3]] == sorted(str(r.id) for r in runs[:2])
    at = "2024-05-01T12:00:01.000007Z"
    assert sorted(lines[3:5]) == sorted(
        [
            f"{at},llm,eu-west,{runs[0].id},deadline_exceeded,1500.0,2.0,40.5,9.25,,,,,",
            f"{at},llm,us-east,{runs[1].id},error,0.0,,,,,,,,",
        ]
    )
    assert lines[-1].startswith("2024-05-01T17:30:00.000007Z,web,eu-west,")
    assert lines[-1].endswith(",http_error,96.375,0.0,12.75,,,,3.0,80.125,0.5")


def test_export_floats_read_back_as_the_same_float(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, varied_runs())
    row = next(line for line in export_text(engine).splitlines() if ",us-east," in line)
    values = row.split(",")[5:11]
    assert [float(v) for v in values] == [123.456, *list(LLM.values())]
    assert values[1:4] == [repr(1 / 3), repr(0.1 + 0.2), "1e-07"]


def test_export_of_no_samples_is_the_header_alone(engine: Engine) -> None:
    assert export_text(engine) == "timestamp,target,vantage,run_id,status,total_ms\n"


def test_export_filters_by_target(engine: Engine, sessions: sessionmaker[Session]) -> None:
    store(sessions, varied_runs())
    text = export_text(engine, target="web")
    rows = text.splitlines()[1:]
    assert len(rows) == 2 and all(",web,eu-west," in row for row in rows)
    phases = "connect_ms,network_ms,transfer_ms,server_ms,tls_extra_ms"
    assert text.splitlines()[0].endswith(f",total_ms,{phases}")
    assert export_text(engine, target="nope").splitlines()[1:] == []


def test_export_time_window_includes_its_start_and_excludes_its_end(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    store(sessions, varied_runs())
    start = T0 + timedelta(seconds=1, microseconds=7)
    text = export_text(engine, start=start, end=start + timedelta(seconds=2))
    stamps = [row.split(",")[0] for row in text.splitlines()[1:]]
    assert stamps == ["2024-05-01T12:00:01.000007Z"] * 2 + ["2024-05-01T12:00:02.000007Z"]
    # Phases only of the samples in the window: the header is narrower too.
    assert text.splitlines()[0].endswith(",total_ms,connect_ms,network_ms,queue_ms")


def test_export_refuses_naive_bounds(engine: Engine) -> None:
    with pytest.raises(ValueError, match="aware"):
        export_samples(engine, io.StringIO(), start=datetime(2024, 5, 1))


def test_export_runs_in_a_given_session(engine: Engine, sessions: sessionmaker[Session]) -> None:
    store(sessions, varied_runs())
    out = io.StringIO()
    with Session(engine) as session:
        assert export_samples(session, out, target="llm") == 5
    assert out.getvalue() == export_text(engine, target="llm")


def test_export_refuses_a_phase_missing_from_its_header_rather_than_dropping_it(
    engine: Engine, sessions: sessionmaker[Session], monkeypatch: pytest.MonkeyPatch
) -> None:
    store(sessions, varied_runs())
    # As if a run with a new phase were stored between the header query and the rows.
    monkeypatch.setattr(csvexport, "_phase_names", lambda *_: ["connect", "network", "queue"])
    with pytest.raises(CsvExportError, match="appeared during the export"):
        export_text(engine)


# Import -----------------------------------------------------------------------------------


def test_import_groups_rows_into_runs_in_file_order(engine: Engine) -> None:
    result = import_text(engine, GOOD_FILE)

    assert result == ImportResult(runs_stored=2, samples_stored=3, runs_already_present=0)
    with Session(engine) as session:
        first = session.get(RunRow, uuid.UUID(GOOD_RUN))
        assert first is not None
        assert (first.status, first.vantage, first.n_samples, first.n_errors) == (
            "complete",
            "eu",
            2,
            1,
        )
        assert first.started_at == T0
        assert first.finished_at == T0 + timedelta(seconds=1, milliseconds=3)
        samples = session.scalars(
            select(SampleRow).where(SampleRow.run_id == first.id).order_by(SampleRow.idx)
        ).all()
    assert [(s.idx, s.status, s.phases) for s in samples] == [
        (0, "ok", {"connect": 1.5, "server": 99.0}),
        (1, "error", {"connect": 3.0}),
    ]


def test_reimporting_the_same_file_stores_nothing_new(engine: Engine) -> None:
    import_text(engine, GOOD_FILE)
    before = export_text(engine)

    again = import_text(engine, GOOD_FILE)

    assert again == ImportResult(runs_stored=0, samples_stored=0, runs_already_present=2)
    assert counts(engine) == [1, 2, 3]
    assert export_text(engine) == before


def test_an_import_digests_and_rolls_up_its_runs_however_old(engine: Engine) -> None:
    """As serve does for its own: else history past the raw retention would be pruned
    undigested, and the overview (which reads digests) would not know its targets."""
    import_text(engine, GOOD_FILE)  # two years old
    with Session(engine) as session:
        digested = set(session.scalars(select(RunDigestRow.run_id)))
        rolled = session.scalar(select(func.count()).select_from(RollupRow))
        current = current_breakdowns(session, datetime.now(UTC), exact=False)
    assert digested == {uuid.UUID(GOOD_RUN), uuid.UUID(OTHER_RUN)}
    assert rolled
    # The latest state of each series, however old: the hour up to its last run.
    assert [(b.target, b.vantage, b.runs) for b in current] == [("web", "eu", 1), ("web", "us", 1)]
    assert [b.last_run_at for b in current] == [
        datetime(2024, 5, 1, 12, tzinfo=UTC), datetime(2024, 5, 1, 12, 0, 2, tzinfo=UTC)
    ]  # fmt: skip


def test_import_reads_files_that_spreadsheets_write(engine: Engine) -> None:
    text = (
        "\ufeffrun_id,timestamp,status,target,vantage,server_ms,total_ms\r\n"
        f"{GOOD_RUN.upper()},2024-05-01T14:00:00+02:00,ok,web,eu,99.0,100\r\n"
        "\r\n"
        f"{{{GOOD_RUN}}},2024-05-01 12:00:01Z,ok,web,eu,,2\r\n"
    )
    assert import_text(engine, text).samples_stored == 2
    assert export_text(engine).splitlines()[1:] == [
        f"2024-05-01T12:00:00.000000Z,web,eu,{GOOD_RUN},ok,100.0,99.0",
        f"2024-05-01T12:00:01.000000Z,web,eu,{GOOD_RUN},ok,2.0,",
    ]


def test_import_reports_progress_in_rows(engine: Engine) -> None:
    seen: list[int] = []
    import_samples(engine, io.StringIO(GOOD_FILE), progress=seen.append)
    assert seen[-1] == 3


TEXT_IDS = """\
timestamp,target,vantage,run_id,status,total_ms,connect_ms,server_ms
2024-05-01T12:00:00Z,web,eu,run-1,ok,100.5,1.5,99.0
2024-05-01T12:00:01Z,web,eu,run-1,ok,90.0,1.0,89.0
2024-05-01T12:00:00Z,api,eu,run-1,ok,50.0,,50.0
2024-05-01T12:15:00Z,web,eu,run-2,ok,80.0,,80.0
"""


def test_text_run_ids_map_to_stable_uuids_per_target_and_vantage(engine: Engine) -> None:
    first = import_text(engine, TEXT_IDS)
    assert (first.runs_stored, first.samples_stored) == (3, 4)  # run-1 of web, of api; run-2
    again = import_text(engine, TEXT_IDS)
    assert (again.runs_stored, again.runs_already_present) == (0, 3)
    assert counts(engine) == [2, 3, 4]


MALFORMED = [
    ("bad timestamp", "2024-05-01T25:00:00Z", "timestamp", "is not an ISO-8601 time"),
    ("naive timestamp", "2024-05-01T12:00:00", "timestamp", "has no UTC offset"),
    ("bad status", "okay", "status", "'okay' is not one of ok, http_error, deadline_exceeded"),
    ("negative total", "-1.5", "total_ms", "'-1.5' is negative"),
    ("NaN total", "nan", "total_ms", "'nan' is not a finite number"),
    ("infinite total", "inf", "total_ms", "'inf' is not a finite number"),
    ("text total", "fast", "total_ms", "'fast' is not a number"),
    ("empty total", "", "total_ms", "'' is not a number"),
    ("bad phase", "x", "server_ms", "'x' is not a number"),
    ("empty run id", " ", "run_id", "is empty"),
    ("empty target", "", "target", "must be 1 to 200 characters"),
    ("run split across targets", "api", "target", "'api' differs from 'web' on line 2"),
    ("run split across vantages", "us", "vantage", "'us' differs from 'eu' on line 2"),
]
COLUMNS = GOOD_FILE.splitlines()[0].split(",")


def refused_with(engine: Engine, line: int, column: str, value: str) -> list[CsvProblem]:
    """The problems an import names when GOOD_FILE's ``line`` holds ``value`` in ``column``."""
    cells = GOOD_FILE.splitlines()[line - 1].split(",")
    cells[COLUMNS.index(column)] = value
    with pytest.raises(CsvImportError) as caught:
        import_text(engine, with_row(line, ",".join(cells)))
    return caught.value.problems


@pytest.mark.parametrize(
    ("case", "value", "column", "reason"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_row_is_reported_with_its_line_and_nothing_is_stored(
    engine: Engine, case: str, value: str, column: str, reason: str
) -> None:
    [problem] = refused_with(engine, 3, column, value)
    assert (problem.line, problem.column) == (3, column)
    assert reason in problem.reason
    assert str(problem).startswith(f"3: {column}: ")
    assert counts(engine) == [0, 0, 0]


@pytest.mark.parametrize("row", ["2024-05-01T12:00:01Z,web,eu", "a,b,c,d,e,f,g,h,i"])
def test_row_with_the_wrong_number_of_columns_is_reported(engine: Engine, row: str) -> None:
    with pytest.raises(CsvImportError) as caught:
        import_text(engine, with_row(4, row))
    found = len(row.split(","))
    assert caught.value.problems == [CsvProblem(4, None, f"expected 8 columns, found {found}")]
    assert counts(engine) == [0, 0, 0]


def test_every_problem_is_counted_but_only_the_first_twenty_are_listed(engine: Engine) -> None:
    bad = f"2024-05-01T12:00:00Z,web,eu,{GOOD_RUN},okay,1.0,,\n"
    text = GOOD_FILE + bad * 30 + f"yesterday,web,eu,{GOOD_RUN},ok,-1,,\n"

    with pytest.raises(CsvImportError) as caught:
        import_text(engine, text)

    assert caught.value.count == 32 and caught.value.unlisted == 12
    assert [p.line for p in caught.value.problems] == list(range(5, 25))
    assert counts(engine) == [0, 0, 0]


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        ('2024-05-01T12:00:03Z,"we"b,eu,x,ok,1,,\n', CsvProblem(5, None, "not CSV")),
        ("2024-05-01T12:00:03Z,w\udcffb,eu,x,ok,1,,\n", CsvProblem(5, None, "not UTF-8 text")),
    ],
)
def test_a_file_that_is_not_csv_text_is_refused(
    engine: Engine, tail: str, problem: CsvProblem
) -> None:
    data = (GOOD_FILE + tail).encode("utf-8", "surrogateescape")
    with pytest.raises(CsvImportError) as caught:
        import_samples(engine, io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=""))
    [found] = caught.value.problems
    assert found.line <= problem.line and found.reason.startswith(problem.reason)
    assert counts(engine) == [0, 0, 0]


@pytest.mark.parametrize(
    ("first_line", "problem"),
    [
        ("", CsvProblem(1, None, "no header: expected timestamp,target")),
        ("timestamp,target,vantage,run_id,status", CsvProblem(1, "total_ms", "column missing")),
        (
            "timestamp,target,vantage,run_id,status,total_ms,notes",
            CsvProblem(1, "notes", "not a column"),
        ),
        (
            "timestamp,target,vantage,run_id,status,total_ms,queue_ms,queue_ms",
            CsvProblem(1, "queue_ms", "column appears twice"),
        ),
    ],
)
def test_a_bad_header_is_reported_on_line_one(
    engine: Engine, first_line: str, problem: CsvProblem
) -> None:
    with pytest.raises(CsvImportError) as caught:
        import_text(engine, first_line + "\n" if first_line else "")
    [found] = caught.value.problems
    assert (found.line, found.column) == (problem.line, problem.column)
    assert found.reason.startswith(problem.reason)


# The commands -----------------------------------------------------------------------------


def test_cli_export_writes_the_csv_to_stdout(
    engine: Engine, sessions: sessionmaker[Session], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store(sessions, varied_runs())
    code, out, err = cli(["export", "--database-url", db_url], capsys)
    assert (code, err) == (0, "")
    assert out == export_text(engine)


def test_cli_export_filters_by_target_and_time(
    engine: Engine, sessions: sessionmaker[Session], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store(sessions, varied_runs())
    window = ["--from", "2024-05-01T14:00:01+02:00", "--to", "2024-05-01T12:00:02.000007"]
    code, out, _ = cli(["export", "--database-url", db_url, "--target", "llm", *window], capsys)
    assert code == 0
    assert out == export_text(
        engine,
        target="llm",
        start=T0 + timedelta(seconds=1),
        end=T0 + timedelta(seconds=2, microseconds=7),
    )
    assert len(out.splitlines()) == 3


def test_cli_import_stores_the_file_and_says_how_many_runs(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "samples.csv"
    path.write_text(GOOD_FILE)

    code, out, _ = cli(["import", str(path), "--database-url", db_url], capsys)
    assert code == 0
    assert out == "imported 2 runs (3 samples); 0 runs were already present\n"

    code, out, _ = cli(["import", str(path), "--database-url", db_url], capsys)
    assert out == "imported 0 runs (0 samples); 2 runs were already present\n"
    assert counts(engine) == [1, 2, 3]


def test_cli_import_lists_each_problem_and_exits_1(
    engine: Engine, db_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "samples.csv"
    path.write_text(with_row(3, f"2024-05-01T12:00:01Z,web,eu,{GOOD_RUN},okay,-3,3.0,"))

    code, out, err = cli(["import", str(path), "--database-url", db_url], capsys)

    assert (code, out) == (1, "")
    assert err.splitlines() == [
        f"{path}:3: status: 'okay' is not one of ok, http_error, deadline_exceeded, timeout,"
        " error, invalid_answer",
        f"{path}:3: total_ms: '-3' is negative",
        f"phasewatch: error: nothing imported: 2 problems in {path}",
    ]
    assert counts(engine) == [0, 0, 0]


def test_cli_import_reads_standard_input_for_a_dash(
    engine: Engine,
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD_FILE))
    code, out, _ = cli(["import", "-", "--database-url", db_url], capsys)
    assert (code, out) == (0, "imported 2 runs (3 samples); 0 runs were already present\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["export", "--from", "soon"], "'soon' is not an ISO-8601 time"),
        (["export", "--from", "2024-05-02", "--to", "2024-05-01"], "--from must be earlier"),
        (["import", "missing.csv"], "cannot read missing.csv: No such file or directory"),
        (["import"], "Missing argument"),
    ],
)
def test_cli_bad_arguments_are_one_line_and_exit_2(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    database = tmp_path / "phasewatch.db"
    code, out, err = cli([*argv, "--database-url", f"sqlite:///{database}"], capsys)
    assert (code, out) == (2, "")
    assert err.startswith("phasewatch: error: ") and message in err
    assert len(err.splitlines()) == 1


def test_cli_import_into_a_new_database_creates_and_migrates_it_as_serve_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, database = tmp_path / "samples.csv", tmp_path / "new" / "phasewatch.db"
    path.write_text(GOOD_FILE)
    database.parent.mkdir()
    url = f"sqlite:///{database}"
    code, out, err = cli(["import", str(path), "--database-url", url], capsys)
    assert (code, err) == (0, "")
    assert out == "imported 2 runs (3 samples); 0 runs were already present\n"
    engine = make_engine(url)
    try:
        assert is_current(engine) and counts(engine) == [1, 2, 3]
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", [["export"], ["import", "-", "--no-migrate"]])
def test_cli_says_when_the_database_is_not_initialised(
    command: list[str], empty_db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli([*command, "--database-url", empty_db_url], capsys)
    assert (code, out) == (1, "")
    assert err == "phasewatch: error: database is not initialised: run 'phasewatch db upgrade'\n"
    if empty_db_url.startswith("sqlite:///"):
        assert not Path(empty_db_url.removeprefix("sqlite:///")).exists()


def test_cli_says_when_an_existing_sqlite_file_has_no_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty.db").touch()  # an empty file is an empty SQLite database
    code, _, err = cli(["export", "--database-url", f"sqlite:///{tmp_path / 'empty.db'}"], capsys)
    assert code == 1 and "database is not initialised" in err


def test_cli_database_url_defaults_to_the_environment(
    engine: Engine,
    sessions: sessionmaker[Session],
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store(sessions, varied_runs())
    monkeypatch.setenv("PHASEWATCH_DATABASE_URL", db_url)
    code, out, _ = cli(["export", "--target", "web"], capsys)
    assert code == 0 and out == export_text(engine, target="web")


AT_THE_DOOR = [
    ("dated 9999", "9999-12-31T00:00:00.000000Z", "timestamp", "ahead of the receiver's clock"),
    ("dated before 2000", "1999-12-31T23:59:59.000000Z", "timestamp", "before 2000-01-01"),
]


@pytest.mark.parametrize(
    ("case", "value", "column", "reason"), AT_THE_DOOR, ids=[m[0] for m in AT_THE_DOOR]
)
def test_a_run_the_door_refuses_is_reported_with_its_line_and_nothing_is_stored(
    engine: Engine, case: str, value: str, column: str, reason: str
) -> None:
    problems = refused_with(engine, 4, column, value)
    assert [(p.line, p.column) for p in problems] == [(4, column)] * 2
    assert reason in problems[0].reason
    assert counts(engine) == [0, 0, 0]


def test_history_from_the_first_days_of_2000_is_imported(engine: Engine) -> None:
    text = GOOD_FILE.replace("2024-05-01", "2000-01-01")
    assert import_text(engine, text).runs_stored == 2
