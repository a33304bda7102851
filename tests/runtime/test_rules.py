"""AlertRules: each target's settings by name, as the targets file last said."""

from __future__ import annotations

from app.config import Target, TargetsFile
from app.runtime.rules import DEFAULT_PARAMS, AlertRules


def target(name: str, recent_runs: int) -> Target:
    fields = {
        "name": name,
        "url": "http://127.0.0.1:9/health",
        "alerts": {"recent_runs": recent_runs},
    }
    return Target.model_validate(fields)


def test_a_target_is_found_by_name_and_again_after_the_file_is_replaced() -> None:
    rules = AlertRules(TargetsFile(targets=[target("a", 7), target("b", 9)]))
    assert rules.params_for("b").recent_runs == 9
    assert rules.params_for("unknown") is DEFAULT_PARAMS
    rules.targets = TargetsFile(targets=[target("b", 11)])  # a reload
    assert rules.params_for("b").recent_runs == 11
    assert rules.target("a") is None
