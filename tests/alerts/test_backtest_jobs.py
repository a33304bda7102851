"""The backtest's targets are independent: each has its own random numbers, a target filter
reads only its runs, and ``--jobs 2`` prints what one process prints, in its order."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from app.alerts.backtest.csvruns import read_numbered, read_runs
from app.alerts.backtest.jobs import SHARED_FROM, default_jobs
from app.alerts.backtest.replay import replay
from app.analysis.detectors import DetectorParams
from app.csvio.layout import format_timestamp
from tests.clirun import run_cli
from tests.runfactory import EVERY, T0

PHASES = ("network", "queue", "generation")
HEADER = ["timestamp", "target", "vantage", "run_id", "status", "total_ms"]
TARGETS = ("chat", "embed", "rerank")


def corpus(targets: tuple[str, ...], days: float = 3.0, samples: int = 6) -> str:
    """Runs every 15 minutes at two vantages, all starting at the same times (ties), a
    generation collapse after two thirds: enough for references, bootstrap and transitions."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER + [f"{phase}_ms" for phase in PHASES])
    runs = int(days * 96)
    for index in range(runs):
        for target in targets:
            for vantage in ("eu", "us"):
                rng = np.random.default_rng([index, sum(map(ord, target + vantage))])
                generation = 50.0 if index >= runs * 2 // 3 else 1500.0
                for k in range(samples):
                    at = format_timestamp(T0 + index * EVERY + timedelta(seconds=k))
                    phases = [30.0, 120.0, generation] * rng.lognormal(0, 0.1, 3)
                    run_id = f"{target}-{vantage}-{index}"
                    writer.writerow([at, target, vantage, run_id, "ok", sum(phases), *phases])
    return out.getvalue()


def transitions_of(text: str, target: str) -> list[tuple[object, ...]]:
    found = replay(read_runs(io.StringIO(text)), lambda _t: DetectorParams(), seed=3)
    return [
        (t.at, t.identity, t.before, t.after, t.summary)
        for t in found
        if t.identity.target == target
    ]


def test_a_targets_alerts_are_the_same_alone_and_beside_other_targets() -> None:
    alone = transitions_of(corpus(("embed",)), "embed")
    assert alone, "the corpus should make the detectors move"
    assert transitions_of(corpus(TARGETS), "embed") == alone


def test_a_target_filter_yields_exactly_the_filtered_runs_with_their_positions() -> None:
    text = corpus(TARGETS, days=0.5)
    everything = list(read_numbered(io.StringIO(text)))
    kept = list(read_numbered(io.StringIO(text), keep=lambda target: target != "embed"))
    expected = [(n, run.run_id) for n, run in everything if run.target != "embed"]
    assert [(n, run.run_id) for n, run in kept] == expected
    filtered = read_runs(io.StringIO(text), keep=lambda target: target == "embed")
    assert [run.run_id for run in filtered] == [
        run.run_id for _, run in everything if run.target == "embed"
    ]


def jsonl(
    path: Path, jobs: int, capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[dict[str, object]], str]:
    argv = ["backtest", str(path), "--format", "jsonl", "--jobs", str(jobs)]
    code, out, err = run_cli(argv, capsys)
    found = [json.loads(line) for line in out.splitlines()]
    for transition in found:
        transition.pop("alert_id")  # random
    return code, found, err


def test_two_jobs_print_what_one_process_prints_in_its_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "samples.csv"
    path.write_text(corpus(TARGETS))
    one, two = jsonl(path, 1, capsys), jsonl(path, 2, capsys)
    assert one[0] == 0 and len(one[1]) > 2
    assert {t["target"] for t in one[1]} == set(TARGETS)
    assert two == one


@pytest.mark.parametrize(
    "bad",
    [
        lambda line: line.replace(",ok,", ",ok,1,"),  # a column too many
        lambda line: line.replace("ok,", "ok,x"),  # a total that is not a number
    ],
    ids=["columns", "number"],
)
def test_a_bad_line_is_reported_the_same_with_two_jobs(
    bad: Callable[[str], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = corpus(TARGETS).splitlines(keepends=True)
    at = len(lines) * 5 // 6  # after the collapse: transitions come before the error
    lines[at] = bad(lines[at])
    path = tmp_path / "samples.csv"
    path.write_text("".join(lines))
    one, two = jsonl(path, 1, capsys), jsonl(path, 2, capsys)
    assert one[0] == 1 and str(path) in one[2] and "line " in one[2]
    assert one[1], "some transitions should come before the bad line"
    assert two == one


@pytest.mark.parametrize(
    ("size", "cpus", "jobs"),
    [
        (0, 4, 1),  # empty, or not a regular file (a pipe's size is 0)
        (SHARED_FROM - 1, 4, 1),  # short in one process: a second costs more than it saves
        (SHARED_FROM, 4, 2),
        (SHARED_FROM, 2, 2),
        (SHARED_FROM, 1, 1),
        (SHARED_FROM, None, 1),  # the count of cores unknown
        (10 * SHARED_FROM, 8, 2),
    ],
)
def test_default_jobs_one_process_below_the_size_that_pays_for_a_second(
    size: int, cpus: int | None, jobs: int
) -> None:
    assert default_jobs(size, cpus) == jobs
