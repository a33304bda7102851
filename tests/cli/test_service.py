"""`check-config` and `db`: what operators run before `serve`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.clirun import run_cli as run

EXAMPLE = Path(__file__).parents[2] / "docs" / "phasewatch.example.yaml"


def test_check_config_accepts_the_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "k1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k2")
    monkeypatch.setenv("OPS_HOOK_TOKEN", "k3")
    monkeypatch.setenv("SLACK_WEBHOOK_URL", "https://hooks.slack.invalid/x")
    code, out, _ = run(["check-config", str(EXAMPLE)], capsys)
    assert code == 0
    assert out == "ok: 3 target(s): translate-prod, translate-edge, homepage\n"


def test_check_config_lists_every_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("targets:\n  - {name: a, url: 'http://x/', samples: 0}\n  - {name: b}\n")
    code, out, err = run(["check-config", str(path)], capsys)
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0] == f"{path}:2: targets[a].samples: Input should be greater than or equal to 1"
    assert lines[1] == f"{path}:3: targets[b].url: Field required"
    assert lines[2] == f"phasewatch: error: {path}: 2 problem(s)"


def test_db_upgrade_then_current(empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["db", "current", "--database-url", empty_db_url], capsys)
    assert code == 1 and out.startswith("database at revision none; head is ")
    code, out, _ = run(["db", "upgrade", "--database-url", empty_db_url], capsys)
    assert code == 0 and out.endswith("(head)\n")
    code, out, _ = run(["db", "current", "--database-url", empty_db_url], capsys)
    assert code == 0


@pytest.mark.parametrize("command", ["upgrade", "current"])
def test_db_on_an_unreachable_database_is_one_line(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = "postgresql+psycopg://nobody@127.0.0.1:1/none?connect_timeout=2"
    code, _, err = run(["db", command, "--database-url", url], capsys)
    assert code == 1
    assert err.count("\n") == 1 and err.startswith("phasewatch: error: database: ")


UNUSABLE = [
    ("mysql://u@127.0.0.1/db", "mysql:// is not supported: phasewatch stores into SQLite"),
    ("postgresql+asyncpg://u@h/db", "postgresql+asyncpg:// is not supported"),
]
NO_FOLDER = ("sqlite:////no/such/folder/x.db", "SQLite file /no/such/folder/x.db: its folder")


@pytest.mark.parametrize(
    ("command", "url", "reason"),
    [
        *(
            (command, *case)
            for command in ("db upgrade", "db current", "export", "import x.csv")
            for case in UNUSABLE
        ),
        # Export only reads: a file that is not there is a database not initialised.
        *((command, *NO_FOLDER) for command in ("db upgrade", "db current", "import x.csv")),
    ],
)
def test_a_database_phasewatch_cannot_use_is_one_line_naming_why(
    command: str, url: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "x.csv").write_text("timestamp,target,vantage,run_id,status,total_ms\n")
    argv = [*command.split(), "--database-url", url]
    argv = [str(tmp_path / a) if a == "x.csv" else a for a in argv]
    code, out, err = run(argv, capsys)
    assert (code, out) == (1, "")
    assert err.startswith(f"phasewatch: error: database: {reason}"), err
    assert err.count("\n") == 1


@pytest.mark.postgres
@pytest.mark.parametrize("command", ["upgrade", "current"])
def test_a_database_not_in_utf8_is_refused_in_one_line_naming_the_fix(
    non_utf8_postgres_url: str, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["db", command, "--database-url", non_utf8_postgres_url], capsys)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("phasewatch: error: database: database ")
    assert "phasewatch needs UTF8: CREATE DATABASE ... ENCODING 'UTF8'" in err, err


def test_the_targets_files_database_url_is_used_when_nothing_else_names_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PHASEWATCH_DATABASE_URL", raising=False)
    database = tmp_path / "from-file.db"
    config = tmp_path / "phasewatch.yaml"
    config.write_text(f"database_url: sqlite:///{database}\ntargets: []\n")
    code, _, _ = run(["db", "upgrade", "--config", str(config)], capsys)
    assert code == 0 and database.exists()
