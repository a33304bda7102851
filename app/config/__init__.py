"""Settings from the environment, and the targets file (YAML) with its validation.

``settings``: ``PHASEWATCH_*`` in the environment, which win over the file's global
fields. ``targets``: the file's models. ``loading``: reading, ``${ENV}`` expansion and
validation. ``errors``: every problem in the file named by file, line, target and field.
``vantages``: the agents allowed to report (``vantages:``), each with its token.
"""

from __future__ import annotations

from app.config.errors import ConfigError
from app.config.loading import load_targets
from app.config.settings import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_DATABASE_URL,
    ResolvedSettings,
    Settings,
)
from app.config.targets import NotifierName, Target, TargetsFile

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "DEFAULT_DATABASE_URL",
    "ConfigError",
    "NotifierName",
    "ResolvedSettings",
    "Settings",
    "Target",
    "TargetsFile",
    "load_targets",
]
