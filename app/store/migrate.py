"""Schema migrations (Alembic), for the CLI and for ``serve``: upgrade, downgrade, check.

The migration scripts live in the repository's top-level ``migrations/``; a wheel ships
them as data files under ``<prefix>/share/phasewatch/migrations`` (see pyproject.toml),
because setuptools cannot map a folder outside ``app/`` into a package found by
``packages.find``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from app.store.db import normalize_url
from app.store.partitions import is_partition

DISTRIBUTION = "phasewatch"
INSTALLED_PARTS = ("share", "phasewatch", "migrations", "env.py")


class MigrationsNotFound(RuntimeError):
    """Neither a source checkout nor the installed distribution has the migrations."""


@cache
def migrations_dir() -> Path:
    """The folder holding ``env.py``: the checkout's ``migrations/``, else the installed copy."""
    root = Path(__file__).resolve().parents[2]
    # pyproject.toml tells a checkout (or editable install) from site-packages, where some
    # other distribution might have left a top-level ``migrations`` folder.
    if (root / "pyproject.toml").is_file() and (root / "migrations" / "env.py").is_file():
        return root / "migrations"
    installed = _installed_migrations_dir()
    if installed is None:
        raise MigrationsNotFound(f"no migrations in {root} nor in the {DISTRIBUTION} install")
    return installed


def _installed_migrations_dir() -> Path | None:
    # Every distribution of that name, not the first: an editable install's metadata found
    # earlier on sys.path lists no data files.
    for distribution in metadata.distributions(name=DISTRIBUTION):
        for file in distribution.files or ():
            if file.parts[-len(INSTALLED_PARTS) :] == INSTALLED_PARTS:
                return Path(str(file.locate())).resolve().parent
    return None


def alembic_config(url: str) -> Config:
    """An Alembic config for this database, without any ini file."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    # The config is a ConfigParser: a literal % (as in a URL-encoded password) must be doubled.
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    with _quiet_alembic():
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    with _quiet_alembic():
        command.downgrade(alembic_config(url), revision)


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at; None for a database never migrated."""
    with _quiet_alembic(), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    head = ScriptDirectory.from_config(config).get_current_head()
    if head is None:
        raise MigrationsNotFound(f"{migrations_dir()} has no revisions")
    return head


def is_current(engine: Engine) -> bool:
    """Whether the database's schema is the one this code expects."""
    return current_revision(engine) == head_revision()


@dataclass
class _Quiet:
    """How many upgrades are keeping alembic quiet, and its level before the first: threads
    (a migration in the background beside a command's) must not restore each other's."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    depth: int = 0
    level: int = logging.NOTSET


_QUIET = _Quiet()


@contextmanager
def _quiet_alembic() -> Iterator[None]:
    # Alembic logs every step at INFO; the CLI's own logging should not show them.
    logger = logging.getLogger("alembic")
    with _QUIET.lock:
        if _QUIET.depth == 0:
            _QUIET.level = logger.level
            logger.setLevel(logging.WARNING)
        _QUIET.depth += 1
    try:
        yield
    finally:
        with _QUIET.lock:
            _QUIET.depth -= 1
            if _QUIET.depth == 0:
                logger.setLevel(_QUIET.level)


def objects_of(dialect: str) -> Callable[[Any, str | None, str, bool, Any], bool]:
    """Alembic's ``include_object``: leave out the model's objects meant for another database,
    and the partitions of ``samples`` (tables of the database's own, not of the models)."""

    def include(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
        if reflected:
            return not (type_ == "table" and name is not None and is_partition(name))
        return bool(obj.info.get("only_on", dialect) == dialect)

    return include
