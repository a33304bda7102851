"""/metrics of a real serve with a real agent, judged by Prometheus' own tools."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.real.phasewatchstack import Stack, running_stack
from tests.real.prometheus import PROMTOOL, binary, promtool

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
