"""The docs keep up: every setting, targets-file field and command is in the README."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.analysis.detectors import DetectorParams
from app.cli import cli
from app.config import Settings, Target, TargetsFile, load_targets
from app.main import create_app
from app.notifiers.alertmanager import AlertmanagerConfig
from app.notifiers.base import IDEMPOTENCY_HEADER, BasicAuth
from app.notifiers.slack import SlackConfig
from app.notifiers.webhook import WebhookConfig
from app.safeyaml import MAX_ALIAS_NODES, MAX_DEPTH, MAX_FILE_BYTES
from tests import clidoc

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()


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


def test_the_command_reference_is_the_commands_own() -> None:
    """docs/cli.md lists every argument and option of every command with its help."""
    written = (ROOT / "docs" / "cli.md").read_text()
    assert written == clidoc.render(), (
        "docs/cli.md is out of date: .venv/bin/python -m tests.clidoc > docs/cli.md"
    )


@pytest.mark.parametrize(("command", "option"), clidoc.options())
def test_the_command_reference_names_every_option(command: str, option: str) -> None:
    """The rendering itself leaves nothing out (the test above only compares)."""
    section = clidoc.render().split(f"## `phasewatch {command}`\n", 1)[1].split("\n## ", 1)[0]
    assert f"`{option}`" in section


NOTIFIER_FIELDS = sorted(
    {
        *WebhookConfig.model_fields,
        *AlertmanagerConfig.model_fields,
        *SlackConfig.model_fields,
        *BasicAuth.model_fields,
    }
)


@pytest.mark.parametrize("field", NOTIFIER_FIELDS)
def test_every_notifier_field_is_documented(field: str) -> None:
    notifiers = README.split("### Notifiers", 1)[1].split("\n## ", 1)[0]
    assert f"`{field}`" in notifiers


def test_the_idempotency_key_is_documented_where_notifications_are() -> None:
    written = (ROOT / "docs" / "notifications.md").read_text()
    for name in (IDEMPOTENCY_HEADER, "idempotencyKey", "idempotency_key", "at least once"):
        assert name in written, name
    assert "docs/notifications.md" in README


DETECTION = (ROOT / "docs" / "detection.md").read_text()
API = (ROOT / "docs" / "api.md").read_text()


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


def readme_targets_files() -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", README, flags=re.DOTALL)
    return [block for block in blocks if "targets:" in block]


@pytest.mark.parametrize("text", readme_targets_files())
def test_every_targets_file_in_the_readme_is_valid(text: str, tmp_path: Path) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    names = re.findall(r"\$\{(\w+)\}", text)
    loaded = load_targets(path, environ=dict.fromkeys(names, "https://secret.example"))
    assert loaded.targets


def test_the_targets_file_limits_are_the_loaders_own() -> None:
    section = README.split("## The targets file", 1)[1].split("\n## ", 1)[0]
    for limit in (f"{MAX_FILE_BYTES:,} bytes", f"{MAX_DEPTH} levels", f"{MAX_ALIAS_NODES:,} nodes"):
        assert limit in section
