"""What Compose and Docker would not notice in docker-compose.yml and the Dockerfile.

tests/test_compose.py runs both for real (healthchecks, start order, the spool volume, the
required variables); what is left here are the names Compose passes along without knowing
what they mean: a misspelt ``PHASEWATCH_*`` variable is silently ignored by phasewatch, and
a provider key missing from the pass-through list is only found when a target needs it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from app.cli import every_command
from app.config import Settings

ROOT = Path(__file__).parent.parent
COMPOSE_FILES = (ROOT / "docker-compose.yml", ROOT / ".ci" / "compose" / "ci.yml")
DOCKERFILE_TEXT = (ROOT / "Dockerfile").read_text()
EXAMPLE_TARGETS = (ROOT / "docs" / "phasewatch.example.yaml").read_text()
SETTINGS_VARIABLES = {f"PHASEWATCH_{name.upper()}" for name in Settings.model_fields}
# `phasewatch agent`'s own options from the environment (app/cli/agent.py).
AGENT_VARIABLES = {str(param.envvar) for param in every_command()["agent"].params if param.envvar}
# Compose's own variables: they choose images, ports and the agent's vantage and never
# reach phasewatch under their own names.
COMPOSE_ONLY = {
    "PHASEWATCH_IMAGE",
    "PHASEWATCH_POSTGRES_IMAGE",
    "PHASEWATCH_PUBLISHED_PORT",
    "PHASEWATCH_AGENT_VANTAGE",
}


def _compose(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text())
    return loaded


def _environment(service: dict[str, Any]) -> set[str]:
    env = service.get("environment") or {}
    return set(env) if isinstance(env, dict) else {item.split("=", 1)[0] for item in env}


def _dockerfile_env() -> set[str]:
    return set(re.findall(r"\b(PHASEWATCH_\w+)=", DOCKERFILE_TEXT))


def _dockerfile_cmd() -> list[str]:
    line = next(line for line in DOCKERFILE_TEXT.splitlines() if line.startswith("CMD "))
    command: list[str] = json.loads(line.removeprefix("CMD "))
    return command


def test_every_phasewatch_variable_set_for_the_container_is_a_setting() -> None:
    names = _dockerfile_env()
    for path in COMPOSE_FILES:
        for service in _compose(path)["services"].values():
            names |= {name for name in _environment(service) if name.startswith("PHASEWATCH_")}
    assert names, "found no PHASEWATCH_ variable: the parsing above is wrong"
    assert names - SETTINGS_VARIABLES - AGENT_VARIABLES == set()


def test_the_variables_compose_itself_reads_are_not_settings() -> None:
    text = " ".join(path.read_text() for path in COMPOSE_FILES)
    interpolated = set(re.findall(r"\$\{(PHASEWATCH_\w+)", text))
    assert interpolated - SETTINGS_VARIABLES <= COMPOSE_ONLY
    assert COMPOSE_ONLY & (SETTINGS_VARIABLES | AGENT_VARIABLES) == set()


def test_every_key_the_example_targets_file_uses_is_passed_through() -> None:
    wanted = set(re.findall(r"\$\{(\w+)\}", EXAMPLE_TARGETS))
    assert {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= wanted
    service = _compose(COMPOSE_FILES[0])["services"]["phasewatch"]
    passed = {name for name, value in service["environment"].items() if value is None}
    assert wanted <= passed


def test_the_image_and_compose_run_the_same_serve_command() -> None:
    service = _compose(COMPOSE_FILES[0])["services"]["phasewatch"]
    assert service["command"] == _dockerfile_cmd()
