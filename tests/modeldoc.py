"""The reference tables of docs/configuration.md and docs/detection.md, rendered from the
pydantic models themselves.

Each table sits between ``<!-- rendered: NAME -->`` and ``<!-- end rendered -->``; the
prose around it is written by hand. A row is a field: its name, type (with its bounds),
default and ``Field(description=...)``. ``tests/test_docs.py`` fails when a table and its
model disagree; after changing a model, write the tables anew with
``.venv/bin/python -m tests.modeldoc``.
"""

from __future__ import annotations

import enum
import re
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo

from app.config import Settings, Target, TargetsFile
from app.durations import parse_duration
from app.probe.headername import HeaderName

ROOT = Path(__file__).parent.parent
DOCS = (ROOT / "docs" / "configuration.md", ROOT / "docs" / "detection.md")


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds: inside unions, ``Annotated``, maps, lists."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in get_args(annotation) for model in models_in(arg)]


def _field_model(model: type[BaseModel], field: str) -> type[BaseModel]:
    (found,) = models_in(model.model_fields[field].annotation)
    return found


# Reached from the three models the config package exports, wherever the others live.
NOTIFIERS = {
    get_args(config.model_fields["type"].annotation)[0]: config
    for config in models_in(TargetsFile.model_fields["notifiers"].annotation)
}
BASIC_AUTH = _field_model(NOTIFIERS["alertmanager"], "basic_auth")
DETECTOR_PARAMS = _field_model(Target, "alerts")
EXPECT = _field_model(Target, "expect")
SLO_PARAMS = _field_model(DETECTOR_PARAMS, "slo")
BURN_WINDOW = _field_model(SLO_PARAMS, "page")
OBJECTIVE = _field_model(DETECTOR_PARAMS, "objectives")
MAINTENANCE = _field_model(TargetsFile, "maintenance")
WEEKLY_SPAN = _field_model(MAINTENANCE, "weekly")


def _named(name: str) -> str:
    return f"`{name}`"


# name in the doc → (model, how a field is named in its first column)
TABLES: dict[str, tuple[type[BaseModel], Callable[[str], str]]] = {
    "settings": (Settings, lambda name: f"`PHASEWATCH_{name.upper()}`"),
    "targets-file": (TargetsFile, _named),
    "target": (Target, _named),
    "expect": (EXPECT, _named),
    **{f"notifier-{kind}": (config, _named) for kind, config in NOTIFIERS.items()},
    "basic-auth": (BASIC_AUTH, _named),
    "alerts": (DETECTOR_PARAMS, _named),
    "alerts-slo": (SLO_PARAMS, lambda name: f"`slo.{name}`"),
    "burn-window": (BURN_WINDOW, _named),
    "objective": (OBJECTIVE, _named),
    "maintenance": (MAINTENANCE, _named),
    "weekly-span": (WEEKLY_SPAN, _named),
}
# Models a field may hold, by the name the doc gives them (a link or a section below).
MODEL_NAMES: dict[type[BaseModel], str] = {
    Target: "target (below)",
    EXPECT: "answer checks (below)",
    DETECTOR_PARAMS: "detector settings ([detection.md](detection.md))",
    BASIC_AUTH: "`{username, password}` (below)",
    SLO_PARAMS: "SLO settings (below)",
    BURN_WINDOW: "window pair (below)",
    OBJECTIVE: "objective (below)",
    MAINTENANCE: "maintenance window (below)",
    WEEKLY_SPAN: "weekly span (below)",
    **{config: f"`{kind}`" for kind, config in NOTIFIERS.items()},
}
_BLOCK = re.compile(r"(<!-- rendered: ([\w-]+) -->\n)(.*?)(<!-- end rendered -->)", re.DOTALL)
HEADER = ("| {first} | type | default | what |", "|---|---|---|---|")


def update(text: str) -> str:
    """``text`` with every rendered block written anew from its model."""
    return _BLOCK.sub(lambda m: m[1] + table(m[2]) + m[4], text)


def table(name: str) -> str:
    model, label = TABLES[name]
    first = "environment variable" if model is Settings else "field"
    lines = [HEADER[0].format(first=first), HEADER[1]]
    lines += [row(label(info.alias or field), info) for field, info in model.model_fields.items()]
    return "\n".join(lines) + "\n"


def row(label: str, info: FieldInfo) -> str:
    description = " ".join((info.description or "").split())
    cells = (label, type_name(info.annotation, info.metadata), default(info), description)
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "its own defaults"
    if value is None:
        return "none"
    return f"`{literal(value, is_duration(info.metadata))}`"


def literal(value: Any, duration: bool = False) -> str:
    """``value`` as one would write it in the targets file (YAML), or in the environment."""
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return str(value).lower()
    if duration:
        return duration_text(float(value))
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, BaseModel):
        return _model_literal(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return str(value)


def _model_literal(value: BaseModel) -> str:
    """A model as a YAML flow mapping of its fields: ``{long: 1h, short: 5m, burn: 14.4}``."""
    fields = type(value).model_fields.items()
    written = (f"{k}: {literal(getattr(value, k), is_duration(f.metadata))}" for k, f in fields)
    return "{" + ", ".join(written) + "}"


def duration_text(seconds: float) -> str:
    """The shortest duration literal for ``seconds``: ``15m``, ``1d``, ``500ms``, ``0``."""
    if seconds == 0:
        return "0"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds * 1000:g}ms"


def is_duration(metadata: Iterable[Any]) -> bool:
    return any(getattr(item, "func", None) is parse_duration for item in metadata)


def type_name(annotation: Any, metadata: Iterable[Any] = ()) -> str:
    """A field's type in words, with the bounds its metadata sets: ``integer ≥ 1, ≤ 10000``."""
    metadata = list(metadata)
    if get_origin(annotation) is Annotated:
        inner, *extra = get_args(annotation)
        if annotation == HeaderName:
            return "header name"
        return type_name(inner, [*extra, *metadata])
    name = "duration" if is_duration(metadata) else _plain_type(annotation)
    return " ".join([name, *bounds(metadata)])


def _plain_type(annotation: Any) -> str:
    if annotation is Any:
        return "any JSON"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        kinds = [type_name(arg) for arg in args if arg is not type(None)]
        return " or ".join(kinds)
    if origin is Literal:
        return " or ".join(f"`{arg}`" for arg in args)
    if origin is dict:
        return f"map of {type_name(args[0])} → {type_name(args[1])}"
    if origin in (list, tuple):
        return f"list of {type_name(args[0])}"
    if isinstance(annotation, type):
        return _class_name(annotation)
    return str(annotation)


def _class_name(cls: type) -> str:
    if issubclass(cls, enum.Enum):
        return " or ".join(f"`{member.value}`" for member in cls)
    if issubclass(cls, BaseModel):
        return MODEL_NAMES.get(cls, f"`{cls.__name__}`")
    words = {bool: "boolean", int: "integer", float: "number", str: "string", Path: "path"}
    return words.get(cls) or ("secret string" if cls is SecretStr else cls.__name__)


_BOUNDS = ("gt", "ge", "lt", "le", "min_length", "max_length", "pattern")


def bounds(metadata: Iterable[Any]) -> list[str]:
    """``> 0``, ``≤ 120``, ``1–200 characters``, ``matching `^https?://` ``; a ``> x``
    makes a ``≥ x`` of the same field (from a shared type) go unsaid."""
    found: dict[str, Any] = {}
    for item in _flat(metadata):
        for attribute in _BOUNDS:
            if getattr(item, attribute, None) is not None:
                found.setdefault(attribute, getattr(item, attribute))
    if "gt" in found and found.get("ge", found["gt"]) <= found["gt"]:
        found.pop("ge", None)
    signs = {"gt": ">", "ge": "≥", "lt": "<", "le": "≤"}
    words = [f"{signs[k]} {literal(found[k])}" for k in signs if k in found]
    if "min_length" in found or "max_length" in found:
        words.append(f"{found.get('min_length', 0)}–{found.get('max_length', '…')} characters")
    if "pattern" in found:
        words.append(f"matching `{found['pattern']}`")
    return [word + "," for word in words[:-1]] + words[-1:]


def _flat(metadata: Iterable[Any]) -> Iterable[Any]:
    """Constraints, with those of a ``Field(...)`` inside an ``Annotated`` unpacked."""
    for item in metadata:
        yield from item.metadata if isinstance(item, FieldInfo) else (item,)


if __name__ == "__main__":
    for doc in DOCS:
        text = doc.read_text()
        doc.write_text(update(text))
        sys.stdout.write(f"{doc}: {len(_BLOCK.findall(text))} tables written\n")
