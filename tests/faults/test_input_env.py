"""``${VAR}`` in the targets file: needed by what sends (serve, check-config, probe), not by
what only reads the file (backtest for its alert settings, export/import/db for its
database_url). One expansion, one rule, everywhere."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.csvio.layout import format_timestamp
from app.envvars import UnsetVariable, expand
from tests.faults.limited import run_limited

UNSET = ("PW_UNSET_KEY", "PW_UNSET_HOOK")  # cleared for every test, so for its children
TARGETS = """\
database_url: sqlite:///{db}
targets:
  - name: chat
    url: http://127.0.0.1:9/
    headers: {{Authorization: "Bearer ${{PW_UNSET_KEY}}"}}
    alerts: {{enabled: [dominant_shift]}}
notifiers:
  hook: {{type: webhook, url: "${{PW_UNSET_HOOK}}", headers: {{X-Token: "${{PW_UNSET_KEY}}"}}}}
"""


@pytest.fixture(autouse=True)
def unset(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)


def targets(tmp_path: Path, text: str = TARGETS) -> Path:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text.format(db=tmp_path / "from-file.db"))
    return path


def failing_runs(tmp_path: Path) -> Path:
    """Twelve runs of errors: probe_failing fires unless the file's alerts turn it off."""
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    rows = ["timestamp,target,vantage,run_id,status,total_ms,queue_ms"]
    for run in range(12):
        for index in range(3):
            at = format_timestamp(t0 + timedelta(minutes=15 * run, seconds=index))
            rows.append(f"{at},chat,eu,{uuid.UUID(int=run + 1)},error,,")
    path = tmp_path / "samples.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.process
def test_backtest_applies_the_files_alerts_without_its_variables_set(tmp_path: Path) -> None:
    samples = failing_runs(tmp_path)
    plain = run_limited(["backtest", str(samples), "--jobs", "1"], tmp_path)
    assert plain.code == 0 and "2 transition(s)" in plain.out, plain.err
    config = ["--config", str(targets(tmp_path))]
    done = run_limited(["backtest", str(samples), "--jobs", "1", *config], tmp_path)
    assert done.code == 0, done.err
    assert "0 transition(s)" in done.out  # enabled: [dominant_shift] was read and applied


@pytest.mark.process
def test_backtest_still_refuses_what_is_wrong_with_the_alert_settings(tmp_path: Path) -> None:
    config = targets(tmp_path, TARGETS.replace("dominant_shift", "dominant_shfit"))
    done = run_limited(["backtest", str(failing_runs(tmp_path)), "--config", str(config)], tmp_path)
    assert done.code == 1
    assert done.err.splitlines()[0].startswith(
        f"{config}:6: targets[chat].alerts.enabled: unknown detector 'dominant_shfit'"
    )


@pytest.mark.process
@pytest.mark.parametrize("command", [["check-config"], ["serve", "--config"]])
def test_serve_and_check_config_still_need_every_variable(
    tmp_path: Path, command: list[str]
) -> None:
    config = targets(tmp_path)
    done = run_limited([*command, str(config)], tmp_path)
    assert done.code == 1
    assert done.err.splitlines()[:3] == [
        f"{config}:5: targets[chat].headers.Authorization: environment variable PW_UNSET_KEY"
        " is not set",
        f"{config}:8: notifiers.hook.url: environment variable PW_UNSET_HOOK is not set",
        f"{config}:8: notifiers.hook.headers.X-Token: environment variable PW_UNSET_KEY is not set",
    ]


@pytest.mark.process
def test_probe_needs_its_header_variable_too(tmp_path: Path) -> None:
    header = "Authorization: Bearer ${PW_UNSET_KEY}"
    done = run_limited(["probe", "http://127.0.0.1:9/", "--header", header], tmp_path)
    assert done.code == 2
    assert "environment variable PW_UNSET_KEY is not set" in done.err


@pytest.mark.process
def test_db_upgrade_uses_the_files_database_without_its_variables_set(tmp_path: Path) -> None:
    # Before: the file was refused quietly and ./phasewatch.db was migrated instead.
    done = run_limited(["db", "upgrade", "--config", str(targets(tmp_path))], tmp_path)
    assert done.code == 0, done.err
    assert (tmp_path / "from-file.db").exists()
    assert not (tmp_path / "phasewatch.db").exists()


@pytest.mark.parametrize(
    ("value", "environ", "keep_unset", "expected"),
    [
        ("Bearer ${A}", {"A": "x"}, False, "Bearer x"),
        ("${A}${B}", {"A": "1", "B": "2"}, False, "12"),
        ("${A}", {"A": "${B}"}, False, "${B}"),  # a value is not expanded again
        ("$A and $${A", {}, False, "$A and $${A"),  # only ${NAME} is a reference
        ("Bearer ${A}", {}, True, "Bearer ${A}"),
        ("${A}:${B}", {"B": "2"}, True, "${A}:2"),
        ("", {}, False, ""),
    ],
)
def test_one_expansion(
    value: str, environ: dict[str, str], keep_unset: bool, expected: str
) -> None:
    assert expand(value, environ, keep_unset=keep_unset) == expected


def test_an_unset_variable_is_an_error_naming_it() -> None:
    with pytest.raises(UnsetVariable, match="^environment variable B is not set$"):
        expand("${A}${B}", {"A": "1"})
