"""The docs keep up: every setting, targets-file field, notifier key and command is documented,
the reference tables are the models' own, and every link leads somewhere."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import pytest
import yaml
from pydantic import BaseModel, Field, TypeAdapter, create_model

from app.analysis.detectors import DetectorParams
from app.cli import every_command
from app.config import Settings, Target, TargetsFile, load_targets
from app.config.safeyaml import MAX_ALIAS_NODES, MAX_DEPTH, MAX_FILE_BYTES
from app.main import create_app
from app.notifiers import KINDS
from app.notifiers.base import IDEMPOTENCY_HEADER, BasicAuth
from tests import clidoc, modeldoc

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()


@pytest.mark.parametrize("field", list(Settings.model_fields))
def test_every_environment_variable_is_documented(field: str) -> None:
    assert f"PHASEWATCH_{field.upper()}" in CONFIGURATION


@pytest.mark.parametrize("field", [*TargetsFile.model_fields, *Target.model_fields])
def test_every_targets_file_field_is_documented(field: str) -> None:
    assert f"`{field}`" in CONFIGURATION


def command_names() -> list[str]:
    return list(every_command())


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
    {field for kind in KINDS.values() for field in kind.config_model.model_fields}
    | set(BasicAuth.model_fields)
)


@pytest.mark.parametrize("field", NOTIFIER_FIELDS)
def test_every_notifier_field_is_documented(field: str) -> None:
    notifiers = CONFIGURATION.split("## Notifiers", 1)[1].split("\n## ", 1)[0]
    assert f"`{field}`" in notifiers


def test_the_idempotency_key_is_documented_where_notifications_are() -> None:
    written = (ROOT / "docs" / "notifications.md").read_text()
    for name in (IDEMPOTENCY_HEADER, "idempotencyKey", "idempotency_key", "at least once"):
        assert name in written, name
    assert "docs/notifications.md" in README


INTEGRATIONS = (ROOT / "docs" / "integrations.md").read_text()
DASHBOARD = json.loads((ROOT / "docs" / "grafana" / "phasewatch.json").read_text())
SHIPPED_ALERTS = [
    rule["alert"]
    for group in yaml.safe_load((ROOT / "docs" / "prometheus" / "alerts.yml").read_text())["groups"]
    for rule in group["rules"]
]


@pytest.mark.parametrize("panel", [p["title"] for p in DASHBOARD["panels"] if p["type"] != "row"])
def test_every_dashboard_panel_is_described(panel: str) -> None:
    assert f"* **{panel}**: " in INTEGRATIONS


@pytest.mark.parametrize("alert", SHIPPED_ALERTS)
def test_every_shipped_alerting_rule_is_described(alert: str) -> None:
    assert f"| `{alert}` " in INTEGRATIONS


def test_the_integrations_are_linked_where_notifiers_are_listed() -> None:
    assert "docs/integrations.md" in README
    assert "integrations.md" in (ROOT / "docs" / "notifications.md").read_text()


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


DOCS = {"README.md": README} | {
    f"docs/{path.name}": path.read_text() for path in sorted((ROOT / "docs").glob("*.md"))
}


def documented_targets_files() -> list[tuple[str, dict[str, str]]]:
    """Each targets file the docs show, with the environment its page serves it in (a page
    that starts serve with ``PHASEWATCH_VANTAGE=…`` names the server's own vantage)."""
    found = []
    for text in DOCS.values():
        vantage = re.search(r"PHASEWATCH_VANTAGE=(\S+)", text)
        environ = {"PHASEWATCH_VANTAGE": vantage[1]} if vantage else {}
        blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.DOTALL)
        # A targets file has ``targets:`` or ``notifiers:`` at its top (a Prometheus
        # config's ``targets:`` are nested).
        found += [
            (block, environ) for block in blocks if re.search(r"(?m)^(targets|notifiers):", block)
        ]
    return found


def test_the_readme_has_a_targets_file() -> None:
    assert "targets:" in "".join(re.findall(r"```yaml\n(.*?)```", README, flags=re.DOTALL))


@pytest.mark.parametrize(("text", "environ"), documented_targets_files())
def test_every_targets_file_in_the_readme_is_valid(
    text: str, environ: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "phasewatch.yaml"
    path.write_text(text)
    names = re.findall(r"\$\{(\w+)\}", text)
    variables = dict.fromkeys(names, "https://secret.example")
    loaded = load_targets(path, environ=variables | environ)
    assert loaded.targets or loaded.notifiers


def test_the_targets_file_limits_are_the_loaders_own() -> None:
    section = CONFIGURATION.split("## The targets file", 1)[1].split("\n## ", 1)[0]
    for limit in (f"{MAX_FILE_BYTES:,} bytes", f"{MAX_DEPTH} levels", f"{MAX_ALIAS_NODES:,} nodes"):
        assert limit in section


@pytest.mark.parametrize("doc", modeldoc.DOCS, ids=lambda doc: doc.name)
def test_the_reference_tables_are_the_models_own(doc: Path) -> None:
    """Every field's name, type, default and description, as the model has them."""
    written = doc.read_text()
    assert written == modeldoc.update(written), (
        f"docs/{doc.name} is out of date: .venv/bin/python -m tests.modeldoc"
    )


def test_every_model_has_its_table() -> None:
    blocks = [
        name
        for doc in modeldoc.DOCS
        for name in re.findall(r"<!-- rendered: ([\w-]+) -->", doc.read_text())
    ]
    assert sorted(blocks) == sorted(modeldoc.TABLES)


MODEL_FIELDS = [
    (name, field) for name, (model, _) in modeldoc.TABLES.items() for field in model.model_fields
]


@pytest.mark.parametrize(("table", "field"), MODEL_FIELDS)
def test_every_field_says_what_it_is(table: str, field: str) -> None:
    model = modeldoc.TABLES[table][0]
    assert model.model_fields[field].description, f"{model.__name__}.{field}: Field(description=)"


def test_a_changed_default_changes_the_table() -> None:
    """The comparison above would miss a default the rendering left out; this would not."""
    changed = create_model(
        "Changed", __base__=Target, samples=(int, Field(21, ge=1, description="x"))
    )
    rows = [line for line in modeldoc.table("target").splitlines() if "`samples`" in line]
    assert "`20`" in rows[0]
    modeldoc.TABLES["changed"] = (changed, lambda name: f"`{name}`")
    try:
        rows = [line for line in modeldoc.table("changed").splitlines() if "`samples`" in line]
    finally:
        del modeldoc.TABLES["changed"]
    assert "`21`" in rows[0] and "`20`" not in rows[0]


def written_default(table: str, field: str) -> bool:
    """Whether the table writes the field's default as a value (not required, none, or a
    model's own defaults)."""
    info = modeldoc.TABLES[table][0].model_fields[field]
    if info.is_required():
        return False
    value = info.get_default(call_default_factory=True)
    return value is not None and not isinstance(value, BaseModel)


@pytest.mark.parametrize(
    ("table", "field"), [pair for pair in MODEL_FIELDS if written_default(*pair)]
)
def test_every_rendered_default_reads_back_as_the_default(table: str, field: str) -> None:
    """A default as the table writes it (``15m``, ``false``, ``[{long: 1h, …}]``) is what
    the model reads from a targets file."""
    info = modeldoc.TABLES[table][0].model_fields[field]
    written = modeldoc.default(info).strip("`")
    annotation = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    read = TypeAdapter(annotation).validate_python(yaml.safe_load(written))
    assert read == info.get_default(call_default_factory=True)


def test_the_readme_is_a_map_not_a_manual() -> None:
    assert len(README.splitlines()) <= 150
    quick = README.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert quick.splitlines() == [
        "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/phasewatch demo",
        ".ci/test",
    ]
    for step in ("config", "scheduler", "probe", "runs", "store", "analysis", "alerts", "web"):
        assert f"| {step} | `app/" in README, step


def test_the_readme_maps_every_folder_of_app_in_one_row() -> None:
    where = README.split("## Where things live", 1)[1].split("\n\n|", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ")[1] for line in where.splitlines()[2:]]
    folders = sorted(p.name for p in (ROOT / "app").iterdir() if (p / "__init__.py").exists())
    assert sorted(row.strip("`/").removeprefix("app/") for row in rows) == folders


@pytest.mark.parametrize(
    ("doc", "target"),
    [
        (doc, link)
        for doc, text in DOCS.items()
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    ],
)
def test_every_link_leads_to_a_file(doc: str, target: str) -> None:
    assert ((ROOT / doc).parent / target).exists(), f"{doc} links to {target}"


@pytest.mark.parametrize("path", re.findall(r"`((?:app|tests|bench)/[\w/.]+)`", README))
def test_every_path_the_readme_names_exists(path: str) -> None:
    assert (ROOT / path).exists(), path
