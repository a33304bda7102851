"""/metrics of a real serve with a real agent, judged by Prometheus' own tools, and the
shipped recording rules, alerting rules and Grafana dashboard proven against it: promtool
checks and unit-tests the rules, and a real Prometheus scraping the serve every 3 seconds
answers every expression of the rules and the dashboard with data."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import eventually
from tests.real.phasewatchstack import Stack, running_stack
from tests.real.prometheus import (
    ALERTS,
    DASHBOARD,
    PROMTOOL,
    RULES,
    Prometheus,
    active_alerts,
    alert_exprs,
    binary,
    dashboard_exprs,
    promtool,
    recorded_exprs,
    running_prometheus,
    without_data,
)

pytestmark = [pytest.mark.timeout(300), pytest.mark.process]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    binary(PROMTOOL)  # fail (in CI) or skip before starting anything
    with running_stack(tmp_path_factory.mktemp("stack")) as running:
        yield running


def test_every_metric_name_passes_promtool_check_metrics(stack: Stack) -> None:
    text = stack.metrics()
    checked = promtool("check", "metrics", stdin=text)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "phasewatch_request_duration_seconds_bucket{" in text
    assert "# TYPE phasewatch_agent_runs_pushed_total counter" in text


def test_the_old_names_are_gone_or_deprecated_in_their_help(stack: Stack) -> None:
    text = stack.metrics()
    assert "# HELP phasewatch_request_seconds DEPRECATED" in text
    assert "phasewatch_agent_runs_pushed{" not in text


# --- The shipped rules and dashboard (docs/prometheus/, docs/grafana/) ------------------


@pytest.mark.parametrize("path", [RULES, ALERTS], ids=["rules", "alerts"])
def test_the_shipped_rules_pass_promtool_check_rules(path: Path) -> None:
    checked = promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", ["rules_test.yml", "alerts_test.yml", "alerts_history_test.yml"])
def test_the_rules_unit_tests_pass_promtool_test_rules(name: str) -> None:
    tested = promtool("test", "rules", str(RULES.parent / name))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_dashboard_is_one_grid_on_its_datasource_variable() -> None:
    """What Grafana needs to lay the panels out and query the chosen Prometheus."""
    dashboard = json.loads(DASHBOARD.read_text())
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        for target in panel.get("targets", []):
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    assert variables == ["datasource", "target", "vantage", "phase"]


@pytest.fixture(scope="module")
def prometheus(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), stack.address) as running:
        yield running


def test_every_recording_rule_and_dashboard_query_answers_with_data(
    stack: Stack, prometheus: Prometheus
) -> None:
    """One sweep in which every expression answers with data (a sweep takes seconds at
    load, and a scrape that failed meanwhile leaves every series stale until the next, so
    the sweep is tried again)."""
    wanted = recorded_exprs() + dashboard_exprs()
    assert len(wanted) > 50
    try:
        eventually(lambda: not without_data(prometheus, wanted), 150, "every expression has data")
    except AssertionError:
        failed = prometheus.query("count_over_time(up[10m]) - sum_over_time(up[10m])")
        said = f"failed scrapes: {failed}\n{stack.output()}"
        pytest.fail(f"{without_data(prometheus, wanted)}\n{said}", pytrace=False)
    answers = {expr: prometheus.query(expr) for expr in wanted}
    assert {e: a for e, a in answers.items() if a["status"] != "success"} == {}


def test_every_alerting_rule_evaluates_and_the_ones_the_stack_meets_fire(
    stack: Stack, prometheus: Prometheus
) -> None:
    """``down`` refuses every request and ``late`` misses every deadline (so no request
    of it is available either); the slow-burn tickets wait while the pages fire, as
    phasewatch's own do."""
    meant = {
        ("PhasewatchProbeFailing", "down"),
        ("PhasewatchDeadlineBudgetBurn", "late"),
        ("PhasewatchObjectiveBudgetBurn", "late"),
    }
    eventually(lambda: meant <= active_alerts(prometheus), 150, f"{meant} pending or firing")
    for expr in alert_exprs():
        answer = prometheus.query(expr)
        assert answer["status"] == "success", (expr, answer)
    rules = [r for g in prometheus.get("/api/v1/rules")["groups"] for r in g["rules"]]
    assert len(rules) == len(recorded_exprs()) + len(alert_exprs())
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
    active = active_alerts(prometheus)
    assert ("PhasewatchDeadlineBudgetBurnSlow", "late") not in active
    assert ("PhasewatchObjectiveBudgetBurnSlow", "late") not in active
    assert not {alert for alert in active if alert[1] == "edge"}
