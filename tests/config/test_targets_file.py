"""The targets file: every error names file, line, target, field and reason."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from app.config import ConfigError, Settings, load_targets
from app.durations import parse_duration
from app.probe.spec import Kind, RttMethod

EXAMPLE = Path(__file__).parents[2] / "docs" / "phasewatch.example.yaml"
SECRETS = {
    "OPENAI_API_KEY": "sk-test-1",
    "ANTHROPIC_API_KEY": "ak-test-2",
    "OPS_HOOK_TOKEN": "hook-3",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.invalid/T/B/x",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    return path


def problems(path: Path, environ: dict[str, str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_targets(path, environ or {})
    return caught.value.problems


def test_the_shipped_example_is_valid_and_means_what_its_comments_say() -> None:
    parsed = load_targets(EXAMPLE, SECRETS)
    prod, edge, homepage = parsed.targets
    assert parsed.vantage == "seoul-1" and parsed.raw_retention_days == 30
    assert (prod.kind, prod.interval, prod.jitter, prod.samples) == (Kind.OPENAI, 900, 30, 20)
    assert (prod.spacing, prod.deadline_ms, prod.timeout) == (1.0, 1500, 60)
    assert prod.headers["Authorization"] == "Bearer sk-test-1"
    assert prod.probe_spec().method == "POST"
    assert edge.rtt is RttMethod.TTFB and edge.headers["x-api-key"] == "ak-test-2"
    assert homepage.probe_spec().method == "GET"
    assert homepage.server_timing_map["edge"] == "processing"
    assert set(parsed.notifiers) == {"am", "ops-hook", "chat"}
    assert prod.notifiers == ["am", "chat"] and homepage.notifiers == []
    assert prod.alerts.dominant_lead_pp == 5 and prod.alerts.slo.objective == 0.99
    assert prod.alerts.slo.budget_window == timedelta(days=30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "targets:\n  - name: a\n    url: http://x/\n    deadline_ms: -5\n",
            "phasewatch.yaml:4: targets[a].deadline_ms: Input should be greater than 0",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    interval: soon\n",
            "phasewatch.yaml:4: targets[a].interval: 'soon' is not a duration",
        ),
        (
            "targets:\n  - name: a\n    url: ftp://x/\n",
            "phasewatch.yaml:3: targets[a].url: must start with http:// or https://",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    kind: grpc\n",
            "phasewatch.yaml:4: targets[a].kind: Input should be 'openai', 'anthropic' or 'http'",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    sampels: 3\n",
            "phasewatch.yaml:4: targets[a].sampels: unknown field; did you mean 'samples'?",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    alerts: {enabeld: [tail_shift]}\n",
            "phasewatch.yaml:4: targets[a].alerts.enabeld: unknown field; did you mean 'enabled'?",
        ),
        (
            "targets: []\nnotifiers:\n  hook: {type: webhook, url: 'http://h/', timout: 5}\n",
            "phasewatch.yaml:3: notifiers.hook.timout: unknown field; did you mean 'timeout'?",
        ),
        (
            "targets: []\nzzz: 1\n",
            "phasewatch.yaml:2: zzz: unknown field\n",
        ),
        (
            "targets:\n  - url: http://x/\n",
            "phasewatch.yaml:2: targets[0].name: Field required",
        ),
        (
            "targets:\n  - {name: a, url: 'http://x/'}\n  - {name: a, url: 'http://y/'}\n",
            "phasewatch.yaml:1: targets: target name 'a' is used twice",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    interval: 10s\n    jitter: 10s\n",
            "phasewatch.yaml:2: targets[a]: jitter must be shorter than the interval",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    server_timing_map: {q: queueing}\n",
            "phasewatch.yaml:4: targets[a].server_timing_map: maps to ['queueing']",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n"
            "    headers: {Authorization: 'Bearer ${NOPE}'}\n",
            "phasewatch.yaml:4: targets[a].headers.Authorization: "
            "environment variable NOPE is not set",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    alerts:\n"
            "      enabled: [dominant_shift, tail_shfit]\n",
            "phasewatch.yaml:5: targets[a].alerts.enabled: unknown detector "
            "'tail_shfit'; known: dominant_shift, tail_shift, level_shift, deadline_miss, "
            "composition_shift, probe_failing, baseline_drift",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    alerts:\n      deadline_slo: 0.05\n",
            "phasewatch.yaml:4: targets[a].alerts: deadline_slo was replaced by slo.objective",
        ),
        (
            "targets:\n  - name: a\n    url: http://x/\n    alerts:\n      slo:\n"
            "        ticket: [{long: 6h, short: 3d, burn: 1}]\n",
            "phasewatch.yaml:6: targets[a].alerts.slo.ticket.0: short must not be",
        ),
        ("vantage: ''\n", "phasewatch.yaml:1: vantage: String should have at least 1 character"),
        (
            "vantage: home\nvantages: {nu: {token: short}}\ntargets: []\n",
            "phasewatch.yaml:2: vantages.nu.token: a token needs at least 16 characters",
        ),
        (
            "vantage: home\nvantages: {nu: {token: '0123456789abcdef'}}\ntargets:\n"
            "  - {name: a, url: 'http://x/', vantages: [nu, home, mars]}\n",
            "phasewatch.yaml:4: targets[a].vantages.2: no vantage 'mars' (nothing would probe it"
            " there); known: nu, this server's own 'home'",
        ),
        (
            "maintenance:\n  - name: w\n    targets: [a]\n    cron: '0 3 * * *'\n"
            "    duration: 1h\n    time_zone: Mars/Olympus\n",
            "phasewatch.yaml:6: maintenance[w].time_zone: unknown time zone 'Mars/Olympus'",
        ),
        (
            "maintenance:\n  - name: w\n    targets: [a]\n    cron: '0 25 * * *'\n"
            "    duration: 1h\n",
            "phasewatch.yaml:2: maintenance[w]: cron '0 25 * * *'",
        ),
        (
            "maintenance:\n  - name: w\n    targets: [a]\n    weekly:\n"
            "      - {days: [sat], from: '2:00', to: '04:00'}\n",
            "phasewatch.yaml:5: maintenance[w].weekly.0.from: String should match pattern",
        ),
        (
            "maintenance:\n  - {name: w, targets: [a], start: '2026-01-01T00:00:00Z',"
            " end: '2026-01-02T00:00:00Z'}\n  - {name: w, targets: [b], start:"
            " '2026-01-01T00:00:00Z', end: '2026-01-02T00:00:00Z'}\n",
            "phasewatch.yaml:1: maintenance: maintenance window name(s) ['w'] used twice",
        ),
        ("targets: [\n", "phasewatch.yaml: not valid YAML: line 2"),
        ("- just a list\n", "phasewatch.yaml: the file must be a mapping"),
    ],
)
def test_each_error_names_file_line_target_field_and_reason(
    tmp_path: Path, text: str, expected: str
) -> None:
    found = problems(write(tmp_path, text))
    shown = [problem.replace(f"{tmp_path}/", "") + "\n" for problem in found]
    assert any(problem.startswith(expected) for problem in shown), shown


AGENT_FILE = (
    "vantage: home\nvantages: {nu: {token: '${AGENT_TOKEN}'}}\ntargets:\n"
    "  - {name: a, url: 'http://x/', vantages: [nu, edge]}\n"
)


def test_the_servers_own_vantage_is_the_environments_before_the_files(tmp_path: Path) -> None:
    path = write(tmp_path, AGENT_FILE)
    environ = {"AGENT_TOKEN": "0123456789abcdef", "PHASEWATCH_VANTAGE": "edge"}
    (target,) = load_targets(path, environ).targets
    assert target.vantages == ["nu", "edge"]
    (problem,) = problems(path, {"AGENT_TOKEN": "0123456789abcdef"})
    assert "no vantage 'edge'" in problem and "this server's own 'home'" in problem


def test_a_command_that_needs_no_variables_reads_a_token_left_unset(tmp_path: Path) -> None:
    path = write(tmp_path, AGENT_FILE.replace("edge", "home"))
    loaded = load_targets(path, {}, require_env=False)
    assert loaded.vantages["nu"].token.get_secret_value() == "${AGENT_TOKEN}"
    (problem,) = problems(path, {})
    assert problem.endswith("vantages.nu.token: environment variable AGENT_TOKEN is not set")


def test_problems_are_listed_in_the_order_of_their_lines(tmp_path: Path) -> None:
    text = (
        "targets:\n  - name: a\n    samples: 0\n    url: http://x/\n"
        "    headers: {A: '${NOPE}'}\n  - {name: b, url: nope}\n"
    )
    found = [problem.replace(f"{tmp_path}/", "") for problem in problems(write(tmp_path, text))]
    assert [problem.split(":")[1] for problem in found] == ["3", "5", "6"]


def test_every_error_is_reported_not_only_the_first(tmp_path: Path) -> None:
    text = "targets:\n  - {name: a, url: 'http://x/', samples: 0}\n  - {name: b, url: nope}\n"
    found = problems(write(tmp_path, text))
    assert len(found) == 2
    assert "targets[a].samples" in found[0] and "targets[b].url" in found[1]


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    found = problems(tmp_path / "absent.yaml")
    assert found == [f"{tmp_path / 'absent.yaml'}: cannot read: No such file or directory"]


@pytest.mark.parametrize(
    ("value", "seconds"),
    [("15m", 900), ("1.5s", 1.5), ("500ms", 0.5), ("2h", 7200), ("1d", 86400), (30, 30), ("7", 7)],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds


def test_environment_wins_over_the_file_for_global_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write(tmp_path, "vantage: from-file\ndatabase_url: sqlite:///file.db\ntargets: []\n")
    monkeypatch.setenv("PHASEWATCH_DATABASE_URL", "sqlite:///env.db")
    resolved = Settings(config=path).resolved(load_targets(path, {}))
    assert resolved.database_url == "sqlite:///env.db"
    assert resolved.vantage == "from-file"
    assert resolved.raw_retention_days == 30


def test_public_view_of_a_target_never_shows_header_values(tmp_path: Path) -> None:
    path = write(tmp_path, "targets:\n  - {name: a, url: 'http://x/', headers: {K: '${S}'}}\n")
    target = load_targets(path, {"S": "hunter2"}).targets[0]
    assert "hunter2" not in repr(target.public())
    assert target.public()["headers"] == {"K": "<redacted>"}
