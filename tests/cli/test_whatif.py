"""`phasewatch whatif` against a real database: the answer, and clear refusals."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import Engine, update
from sqlalchemy.orm import Session, sessionmaker

from app.store.models import TargetRow
from tests.clirun import run_cli
from tests.runfactory import EVERY, T0, make_run, record_of, store_records, streamed_sample

WINDOW = ["--from", T0.isoformat(), "--to", (T0 + timedelta(days=1)).isoformat()]


@pytest.fixture
def url(engine: Engine, sessions: sessionmaker[Session]) -> str:
    rng = np.random.default_rng(2)
    records = [record_of(make_run(rng, T0 + i * EVERY, target="chat")) for i in range(12)]
    slow = {"network": 30.0, "queue": 60.0, "generation": 400.0}
    records += [record_of(make_run(rng, T0 + i * EVERY, slow, target="edge")) for i in range(6)]
    store_records(sessions, records, T0 + timedelta(days=1))
    return engine.url.render_as_string(hide_password=False)


def test_json_holds_before_and_after_with_intervals_and_the_levers(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["whatif", "chat", "network=15ms", "queue=0", "generation=@edge", "--json"]
    code, out, err = run_cli([*argv, *WINDOW, "--database-url", url], capsys)
    assert (code, err) == (0, "")
    body = json.loads(out)
    for side in ("before", "after"):
        for name in ("p50_ms", "p90_ms", "p99_ms"):
            lo, hi = body[side][name]["interval"]
            assert lo <= body[side][name]["value"] <= hi
        assert {"miss_rate", "shares", "dominant"} <= set(body[side])
    assert body["before"]["samples"] == 12 * 20
    assert body["before"]["dominant"] == "queue"
    assert body["after"]["dominant"] == "generation"  # edge's slow generation came along
    assert body["after"]["p50_ms"]["value"] > body["before"]["p50_ms"]["value"]
    assert [lever["phase"] for lever in body["levers"]][0] == "queue"


def test_the_table_shows_both_sides_and_the_levers_now(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["whatif", "chat", "generation*1.5", "deadline=300ms", *WINDOW, "--vantage", "eu"]
    code, out, _ = run_cli([*argv, "--database-url", url], capsys)
    assert code == 0
    assert "changes: generation*1.5 deadline=300ms" in out
    assert "miss rate (deadline 300 ms)" in out
    assert "levers now: the biggest lever now is queue" in out


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["chat", "netwrk=15ms"], 2, "'netwrk=15ms': no phase 'netwrk'"),
        (["chat", "server*2"], 2, "'server*2': the samples have no phase 'server'"),
        (["chat", "generation=@nobody"], 2, "'generation=@nobody': no target 'nobody'"),
        (["nobody", "queue=0"], 1, "no target 'nobody' in the database"),
        (["chat", "queue=0", "--vantage", "mars"], 1, "chat at vantage mars has no timed samples"),
    ],
)
def test_a_bad_change_or_an_empty_window_is_one_clear_line(
    url: str, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    found, out, err = run_cli(["whatif", *argv, *WINDOW, "--database-url", url], capsys)
    assert found == code
    assert message in err
    assert err.startswith("phasewatch: error:") and err.count("\n") == 1
    assert out == ""


def test_a_target_with_objectives_is_told_how_each_would_be_met(
    url: str, sessions: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    objectives = {"ttft_ms": {"p": 99, "below": 300}, "availability": {"target": 99.5}}
    with sessions.begin() as session:
        session.execute(
            update(TargetRow)
            .where(TargetRow.name == "chat")
            .values(config={"alerts": {"objectives": objectives}})
        )
    argv = ["whatif", "chat", "queue*4", *WINDOW, "--database-url", url]
    code, out, _ = run_cli([*argv, "--json"], capsys)
    assert code == 0
    by_metric = {o["metric"]: o for o in json.loads(out)["objectives"]}
    assert set(by_metric) == {"ttft_ms", "goodput"}
    assert by_metric["ttft_ms"]["before"] == 1.0 and by_metric["ttft_ms"]["after"] == 0.0
    assert by_metric["ttft_ms"]["after_interval"] == [0.0, 0.0]
    assert by_metric["ttft_ms"]["burn_after"]["value"] == pytest.approx(100.0)
    ranked = {o["metric"]: o for o in json.loads(out)["objective_levers"]}
    assert set(ranked) == {"ttft_ms", "goodput"}
    assert ranked["ttft_ms"]["headline"] == "ttft_ms ≤ 300 ms, 100.0% met now: no lever raises it"
    code, out, _ = run_cli(argv, capsys)
    assert code == 0 and "ttft_ms ≤ 300 ms" in out and "objective (share met)" in out
    assert "burn" in out and "0.0× → 100.0×" in out
    assert "levers for ttft_ms ≤ 300 ms, 100.0% met now: no lever raises it" in out


def test_a_tpot_objective_follows_the_generations_pace(
    url: str, sessions: sessionmaker[Session], capsys: pytest.CaptureFixture[str]
) -> None:
    # Four runs of streamed answers of 11 tokens, TPOT 30, 50, 60 and 90 ms: 1 of 4 within
    # 40 ms; with generation halved, 15 … 45 ms: 3 of 4.
    records = []
    for i, tpot in enumerate((30.0, 50.0, 60.0, 90.0)):
        at = T0 + i * EVERY
        run = record_of(make_run(np.random.default_rng(i), at, target="pace", n=1))
        sample = streamed_sample(0, 100.0, 100.0 + 10 * tpot, 11, 2 * tpot, at)
        records.append(replace(run, samples=(sample,)))
    store_records(sessions, records, T0 + timedelta(days=1))
    objectives = {"tpot_ms": {"p": 99, "below": 40}}
    with sessions.begin() as session:
        session.execute(
            update(TargetRow)
            .where(TargetRow.name == "pace")
            .values(config={"alerts": {"objectives": objectives}})
        )
    argv = ["whatif", "pace", "generation*0.5", *WINDOW, "--database-url", url]
    code, out, _ = run_cli([*argv, "--json"], capsys)
    assert code == 0
    by_metric = {o["metric"]: o for o in json.loads(out)["objectives"]}
    assert by_metric["tpot_ms"]["before"] == 0.25 and by_metric["tpot_ms"]["after"] == 0.75
    assert by_metric["goodput"]["after"] == 0.75
    ranked = {o["metric"]: o for o in json.loads(out)["objective_levers"]}
    assert [lever["phase"] for lever in ranked["tpot_ms"]["levers"]] == ["generation"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0 and "tpot_ms ≤ 40 ms" in out and "not predicted" not in out
