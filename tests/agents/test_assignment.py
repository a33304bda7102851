"""An agent's assignment is valid at the agent for every kind of target: what the server
sends validates as the same target (an openai target's default ``follow_redirects`` once
came back as set, and was refused)."""

from __future__ import annotations

import pytest

from app.agents.server.assignments import assignment
from app.config import Target, TargetsFile

TOKEN = {"token": "token-a-0123456789abcdef"}


@pytest.mark.parametrize("kind", ["http", "openai", "anthropic"])
def test_an_assigned_target_validates_at_the_agent_as_it_was(kind: str) -> None:
    target = Target(name="t", kind=kind, url="http://x.invalid/", vantages=["a"])  # type: ignore[arg-type]
    file = TargetsFile(targets=[target], vantages={"a": TOKEN})  # type: ignore[dict-item]
    (sent,) = assignment(file, "a").targets
    received = Target.model_validate(sent)
    kept_back = {"alerts", "notifiers"}
    assert received.model_dump(exclude=kept_back) == target.model_dump(exclude=kept_back)


@pytest.mark.parametrize("propagate", [False, True])
def test_propagate_is_sent_only_when_set_so_older_agents_take_the_rest(propagate: bool) -> None:
    target = Target(name="t", url="http://x.invalid/", vantages=["a"], propagate=propagate)
    file = TargetsFile(targets=[target], vantages={"a": TOKEN})  # type: ignore[dict-item]
    (sent,) = assignment(file, "a").targets
    assert ("propagate" in sent) is propagate
    assert Target.model_validate(sent).propagate is propagate
