"""``alerts.objectives`` in the targets file: a bad objective is a config error naming the
file, the line, the target, the objective's field and the reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.analysis.objectives import Objective
from app.config import load_targets
from tests.config.test_targets_file import problems, write

HEAD = (
    "targets:\n  - name: a\n    kind: openai\n    url: http://x/\n    alerts:\n      objectives:\n"
)


def test_objectives_are_read_in_the_files_order(tmp_path: Path) -> None:
    text = HEAD + (
        "        ttft_ms: {p: 99, below: 500}\n        availability: {target: 99.5}\n"
        "        tpot_ms: {p: 90, below: 40}\n        stall_ms: {p: 99, below: 1000}\n"
    )
    (target,) = load_targets(write(tmp_path, text), {}).targets
    assert target.alerts.objective_list() == (
        Objective("ttft_ms", 0.99, 500.0),
        Objective("availability", 0.995),
        Objective("tpot_ms", 0.90, 40.0),
        Objective("stall_ms", 0.99, 1000.0),
    )


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            "        ttft: {p: 99, below: 500}\n",
            "phasewatch.yaml:7: targets[a].alerts.objectives.ttft: unknown objective;"
            " objectives: availability, end_to_end_ms, ttft_ms, tpot_ms, stall_ms",
        ),
        (
            "        availability: {p: 99.5}\n",
            "phasewatch.yaml:7: targets[a].alerts.objectives.availability.p: not for"
            " availability (it takes {target: 99.5})",
        ),
        (
            "        availability: {}\n",
            "phasewatch.yaml:7: targets[a].alerts.objectives.availability.target: missing:"
            " availability takes {target: 99.5}",
        ),
        (
            "        ttft_ms:\n          p: 99\n",
            "phasewatch.yaml:7: targets[a].alerts.objectives.ttft_ms.below: missing: ttft_ms"
            " takes {p: 99, below: 500}",
        ),
        (
            "        ttft_ms:\n          p: 99\n          below: 500\n          target: 99\n",
            "phasewatch.yaml:10: targets[a].alerts.objectives.ttft_ms.target: not for ttft_ms",
        ),
        (
            "        ttft_ms:\n          p: 100\n          below: 500\n",
            "phasewatch.yaml:8: targets[a].alerts.objectives.ttft_ms.p: Input should be less"
            " than 100",
        ),
        (
            "        end_to_end_ms:\n          p: 99\n          below: -1\n",
            "phasewatch.yaml:9: targets[a].alerts.objectives.end_to_end_ms.below: Input should"
            " be greater than 0",
        ),
        (
            "        ttft_ms:\n          p: 99\n          bellow: 500\n",
            "phasewatch.yaml:9: targets[a].alerts.objectives.ttft_ms.bellow: unknown field;"
            " did you mean 'below'?",
        ),
    ],
)
def test_a_bad_objective_names_file_line_target_field_and_reason(
    tmp_path: Path, lines: str, expected: str
) -> None:
    found = [p.replace(f"{tmp_path}/", "") for p in problems(write(tmp_path, HEAD + lines))]
    assert any(problem.startswith(expected) for problem in found), found


def test_a_token_objective_on_a_plain_http_target_is_refused(tmp_path: Path) -> None:
    text = HEAD.replace("kind: openai", "kind: http") + "        ttft_ms: {p: 99, below: 500}\n"
    (problem,) = [p.replace(f"{tmp_path}/", "") for p in problems(write(tmp_path, text))]
    assert problem == (
        "phasewatch.yaml:7: targets[a].alerts.objectives.ttft_ms: ttft_ms: kind http reads no"
        " tokens; use kind openai or anthropic"
    )


def test_availability_and_end_to_end_suit_a_plain_http_target(tmp_path: Path) -> None:
    text = (
        HEAD.replace("kind: openai", "kind: http")
        + "        availability: {target: 99.9}\n        end_to_end_ms: {p: 95, below: 300}\n"
    )
    (target,) = load_targets(write(tmp_path, text), {}).targets
    assert [o.metric for o in target.alerts.objective_list()] == ["availability", "end_to_end_ms"]
