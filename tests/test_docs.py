"""The docs keep up: every setting, targets-file field and command is in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import cli
from app.config import Settings, Target, TargetsFile

README = (Path(__file__).parent.parent / "README.md").read_text()


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_environment_variable_is_documented(field: str) -> None:
    assert f"PHASEWATCH_{field.upper()}" in README


@pytest.mark.parametrize("field", [*TargetsFile.model_fields, *Target.model_fields])
def test_every_targets_file_field_is_documented(field: str) -> None:
    assert f"`{field}`" in README


def command_names() -> list[str]:
    names = [command.name or command.callback.__name__ for command in cli.registered_commands]  # type: ignore[union-attr]
    for group in cli.registered_groups:
        names += [f"{group.name} {c.name}" for c in group.typer_instance.registered_commands]  # type: ignore[union-attr]
    return names


@pytest.mark.parametrize("command", command_names())
def test_every_command_is_documented(command: str) -> None:
    assert f"phasewatch {command}" in README
