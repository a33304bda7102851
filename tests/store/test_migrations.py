"""The migrations build exactly the schema the models describe, both ways, on both databases."""

from __future__ import annotations

import logging
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

from app.store.db import make_engine
from app.store.migrate import (
    alembic_config,
    current_revision,
    downgrade,
    head_revision,
    is_current,
    migrations_dir,
    objects_of,
    upgrade,
)
from app.store.models import CHART_COLUMNS, CHART_INDEX, Base

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def empty_engine(empty_db_url: str) -> Iterator[Engine]:
    engine = make_engine(empty_db_url)
    yield engine
    engine.dispose()


def schema(engine: Engine) -> dict[str, Any]:
    """Everything reflection sees of the schema, in a form that compares with ==."""
    inspector = inspect(engine)
    return {
        table: {
            "columns": [
                (c["name"], repr(c["type"]), c["nullable"], c.get("default"))
                for c in inspector.get_columns(table)
            ],
            "primary_key": inspector.get_pk_constraint(table),
            "foreign_keys": sorted(map(repr, inspector.get_foreign_keys(table))),
            "indexes": sorted(map(repr, inspector.get_indexes(table))),
            "unique": sorted(map(repr, inspector.get_unique_constraints(table))),
            "checks": sorted(map(repr, inspector.get_check_constraints(table))),
        }
        for table in sorted(inspector.get_table_names())
    }


def model_differences(engine: Engine) -> list[Any]:
    options = {
        "compare_type": True,
        "compare_server_default": True,
        "include_object": objects_of(engine.dialect.name),
    }
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts=options)
        return list(compare_metadata(context, Base.metadata))


def test_upgraded_schema_is_exactly_the_models(empty_db_url: str, empty_engine: Engine) -> None:
    upgrade(empty_db_url)

    assert model_differences(empty_engine) == []


def test_each_migration_downgrades_and_upgrades_back_to_the_same_schema(
    empty_db_url: str, empty_engine: Engine
) -> None:
    script = ScriptDirectory.from_config(alembic_config(empty_db_url))
    oldest_first = list(reversed(list(script.walk_revisions())))
    assert oldest_first, "no migrations found"
    for revision in oldest_first:
        upgrade(empty_db_url, revision.revision)
        before = schema(empty_engine)
        downgrade(empty_db_url, "-1")
        assert current_revision(empty_engine) != revision.revision
        upgrade(empty_db_url, revision.revision)
        assert schema(empty_engine) == before, f"{revision.revision} does not round-trip"


def test_downgrading_to_base_leaves_no_table_of_ours(
    empty_db_url: str, empty_engine: Engine
) -> None:
    upgrade(empty_db_url)
    downgrade(empty_db_url, "base")

    assert set(inspect(empty_engine).get_table_names()) <= {"alembic_version"}


def test_database_is_current_only_once_upgraded_to_head(
    empty_db_url: str, empty_engine: Engine
) -> None:
    assert current_revision(empty_engine) is None
    assert not is_current(empty_engine)

    upgrade(empty_db_url)

    assert current_revision(empty_engine) == head_revision()
    assert is_current(empty_engine)


def test_database_behind_head_is_not_current(empty_db_url: str, empty_engine: Engine) -> None:
    upgrade(empty_db_url)
    downgrade(empty_db_url, "-1")

    assert not is_current(empty_engine)


def test_the_test_database_fixture_is_at_head(engine: Engine) -> None:
    assert is_current(engine)
    assert model_differences(engine) == []


def test_env_takes_the_url_from_the_environment_when_none_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'from-env.db'}"
    monkeypatch.setenv("PHASEWATCH_DATABASE_URL", url)
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))

    command.upgrade(config, "head")

    engine = make_engine(url)
    assert is_current(engine)
    engine.dispose()


def test_a_percent_sign_in_the_url_survives_the_alembic_config() -> None:
    url = "postgresql://phasewatch:p%40ss%25word@db.example/phasewatch"

    config = alembic_config(url)

    assert config.get_main_option("sqlalchemy.url") == url.replace(
        "postgresql://", "postgresql+psycopg://"
    )


def test_offline_mode_writes_the_schema_as_sql_without_connecting(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = alembic_config("postgresql://nobody@unreachable.invalid/phasewatch")

    command.upgrade(config, "head", sql=True)

    sql = capsys.readouterr().out
    assert "CREATE TABLE samples" in sql
    assert "JSONB" in sql


def test_upgrading_logs_nothing_below_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    upgrade(f"sqlite:///{tmp_path / 'quiet.db'}")

    assert [r for r in caplog.records if r.name.startswith("alembic")] == []
    assert logging.getLogger("alembic").level == logging.NOTSET


def test_the_wheel_ships_every_file_of_the_migrations_folder() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data_files: dict[str, list[str]] = pyproject["tool"]["setuptools"]["data-files"]
    shipped = {
        Path(target) / found.name
        for target, patterns in data_files.items()
        for pattern in patterns
        for found in ROOT.glob(pattern)
    }
    folder = ROOT / "migrations"
    present = {
        Path("share/phasewatch") / path.relative_to(ROOT)
        for path in folder.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }

    assert shipped == present


def test_runs_carry_the_covering_chart_index_in_each_databases_own_form(engine: Engine) -> None:
    (chart,) = [i for i in inspect(engine).get_indexes("runs") if i["name"] == CHART_INDEX]

    if engine.dialect.name == "postgresql":
        assert chart["column_names"] == ["target_id", "started_at"]
        assert chart["dialect_options"]["postgresql_include"] == list(CHART_COLUMNS)
    else:
        assert chart["column_names"] == ["target_id", "started_at", *CHART_COLUMNS]


def test_comparison_leaves_out_only_the_other_databases_form_of_an_index() -> None:
    runs = Base.metadata.tables["runs"]
    chart = [i for i in runs.indexes if i.name == CHART_INDEX]

    for dialect in ("sqlite", "postgresql"):
        kept = [i for i in chart if objects_of(dialect)(i, i.name, "index", False, None)]
        assert [i.info["only_on"] for i in kept] == [dialect]
    assert all(
        objects_of("sqlite")(i, i.name, "index", False, None)
        for i in runs.indexes
        if "only_on" not in i.info
    )
