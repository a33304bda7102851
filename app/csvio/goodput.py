"""The CSV's goodput columns: ``good`` and ``met_<metric>``, each ``true``, ``false`` or empty.

``good``: the sample met every objective of its target at once (goodput is the column's
share of ``true`` among its non-empty cells); ``met_<metric>``: it met that objective (empty
where the target has no such objective or the objective does not count the sample). Empty
everywhere for a target without objectives. An export judges a sample by its target's
objectives as stored now (app.analysis.verdicts); an imported sample keeps the verdicts its
file gave (``details["goodput"]``), since the marks they were made from did not travel with
it, so export → import → export is byte-identical.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.analysis.verdicts import VERDICT_METRICS

GOODPUT_COLUMNS = ("good", *(f"met_{metric}" for metric in VERDICT_METRICS))
_TEXT = {True: "true", False: "false", None: ""}
_FLAGS = {"true": True, "false": False, "": None}

Flags = tuple[bool | None, ...]  # ``good``, then each ``met_<metric>``, in the columns' order


def flag_cells(flags: Flags) -> list[str]:
    return [_TEXT[flag] for flag in flags]


def parse_flag(text: str) -> bool | None:
    if text not in _FLAGS:
        raise ValueError(f"{text!r} is not true, false or empty")
    return _FLAGS[text]


def stored_flags(details: Mapping[str, Any]) -> Flags | None:
    """The verdicts an import stored with the sample; None when it has none."""
    stored = details.get("goodput")
    if not isinstance(stored, Mapping):
        return None
    met = stored.get("met")
    met = met if isinstance(met, Mapping) else {}
    return (_flag(stored.get("good")), *(_flag(met.get(name)) for name in VERDICT_METRICS))


def flags_details(flags: Sequence[bool | None]) -> dict[str, Any]:
    """What an import stores of a row's cells (``details["goodput"]``); {} when all empty."""
    if all(flag is None for flag in flags):
        return {}
    pairs = zip(VERDICT_METRICS, flags[1:], strict=True)
    return {"goodput": {"good": flags[0], "met": {k: v for k, v in pairs if v is not None}}}


def _flag(value: object) -> bool | None:
    return value if isinstance(value, bool) else None
