"""The data flow is a dependency order where it matters: the pure analysis core imports
neither alerts, nor the store, nor the web (a value type two layers share lives with the
layer that produces it: ``Signal`` is the detectors')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parent.parent / "app" / "analysis"
FORBIDDEN = ("app.alerts", "app.store", "app.web", "app.probe.client", "app.service")


def imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


@pytest.mark.parametrize("path", sorted(ANALYSIS.rglob("*.py")), ids=lambda p: p.name)
def test_analysis_imports_no_later_layer(path: Path) -> None:
    bad = {name for name in imported(path) if name.startswith(FORBIDDEN)}
    assert not bad, f"{path.name} imports {sorted(bad)}"
