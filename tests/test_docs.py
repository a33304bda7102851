"""The docs keep up: every setting, targets-file field and command is in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.analysis.detectors import DetectorParams
from app.cli import cli
from app.config import Settings, Target, TargetsFile
from app.main import create_app

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


DETECTION = (Path(__file__).parent.parent / "docs" / "detection.md").read_text()
API = (Path(__file__).parent.parent / "docs" / "api.md").read_text()


@pytest.mark.parametrize("field", list(DetectorParams.model_fields))
def test_every_detector_setting_is_documented(field: str) -> None:
    assert f"`{field}`" in DETECTION


def api_operations() -> list[str]:
    app = create_app(Settings(), TargetsFile(targets=[]), probing=False)
    operations = []
    for path, methods in app.openapi()["paths"].items():
        if path.startswith("/api/v1/"):
            operations += [f"{method.upper()} {path.removeprefix('/api/v1')}" for method in methods]
    return operations


@pytest.mark.parametrize("operation", api_operations())
def test_every_api_endpoint_is_documented(operation: str) -> None:
    assert f"`{operation}" in API
