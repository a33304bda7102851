"""`phasewatch probe`: the JSON document, the human table, and one-line usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.demo.sim.app import SimConfig
from app.demo.sim.server import SimServer
from tests.clirun import run_cli as run

FAST = SimConfig(one_way_ms=5, queue_median_ms=10, queue_sigma=0, prefill_ms=5, tokens=5)


def test_json_output_has_every_sample_and_the_summary(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["probe", "--demo", "--samples", "4", "--json"], capsys)
    assert code == 0
    document = json.loads(out)
    assert [s["index"] for s in document["samples"]] == [0, 1, 2, 3]
    sample = document["samples"][0]
    for key in ("status", "error", "total_ms", "phases", "provenance", "connection_reused"):
        assert key in sample
    assert set(sample["phases"]) == {
        "connect", "network", "queue", "prefill", "generation", "transfer"
    }  # fmt: skip
    summary = document["summary"]
    assert summary["n"] == 4 and summary["deadline_exceeded"] == 0
    assert set(summary["total"]) >= {"p50", "p90", "p99"}
    shares = [phase["share"] for phase in summary["phases"].values()]
    assert sum(shares) == pytest.approx(1, abs=0.01)
    top = max(summary["phases"], key=lambda name: summary["phases"][name]["share"])
    assert summary["dominant"] == top


def test_text_output_shows_the_table_and_flags_a_thin_p99(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "m", "stream": True, "messages": []}))
    with SimServer(FAST) as sim:
        url = f"{sim.url}/v1/chat/completions"
        argv = ["probe", url, "--kind", "openai", "--body", f"@{body}", "--samples", "3"]
        code, out, _ = run([*argv, "--deadline-ms", "1500"], capsys)
    assert code == 0
    for text in ("generation", "end-to-end", "dominant phase:", "deadline exceeded: 0/3"):
        assert text in out
    assert "low confidence" in out


def test_deadline_misses_are_reported(capsys: pytest.CaptureFixture[str]) -> None:
    with SimServer(FAST) as sim:
        url = f"{sim.url}/v1/chat/completions"
        argv = ["probe", url, "--kind", "openai", "--samples", "2", "--deadline-ms", "20"]
        code, out, err = run([*argv, "--body", '{"stream": true}'], capsys)
    assert code == 1  # late answers are no success
    assert "deadline exceeded: 2/2" in out
    assert err == "phasewatch: no sample of 2 succeeded (2 deadline_exceeded)\n"


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["probe", "--demo", "--samples", "0"], "--samples"),
        (["probe", "http://127.0.0.1:1", "--demo"], "give a URL, or --demo"),
        (["probe"], "give a URL, or --demo"),
        (["probe", "http://127.0.0.1:1", "--body", "{bad"], "not JSON"),
        (["probe", "http://127.0.0.1:1", "--body", "@/nonexistent.json"], "cannot read"),
        (["probe", "http://127.0.0.1:1", "--header", "no-colon"], "is not 'Name: value'"),
        (["probe", "http://127.0.0.1:1", "--header", "A: ${PW_UNSET_VAR}"], "PW_UNSET_VAR"),
        (["probe", "http://127.0.0.1:1", "--kind", "grpc"], "--kind"),
        (["probe", "--no-such-flag"], "no-such-flag"),
    ],
)
def test_bad_arguments_get_one_line_and_exit_2(
    argv: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("phasewatch: error: ")
    assert reason in err


def test_header_values_expand_environment_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.cli.probe import parse_header

    monkeypatch.setenv("PW_TOKEN", "s3cret")
    assert parse_header("Authorization: Bearer ${PW_TOKEN}") == ("Authorization", "Bearer s3cret")


def test_phases_the_server_timing_does_not_split_are_one_row(
    capsys: pytest.CaptureFixture[str],
) -> None:
    untimed = SimConfig(
        one_way_ms=5,
        queue_median_ms=30,
        queue_sigma=0,
        prefill_ms=5,
        tokens=5,
        server_timing="none",
    )
    with SimServer(untimed) as sim:
        url = f"{sim.url}/v1/chat/completions"
        code, out, _ = run(["probe", url, "--kind", "openai", "--samples", "3"], capsys)
    assert code == 0
    rows = [line.split()[0] for line in out.splitlines() if line.strip()]
    assert "queue+prefill" in rows
    assert "queue" not in rows and "prefill" not in rows  # never a 0 that reads as measured
    assert "dominant phase: queue+prefill" in out
    assert "queue+prefill: the server reported no timing that splits these phases" in out
