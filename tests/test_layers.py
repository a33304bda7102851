"""The data flow is a dependency order where it matters: the pure analysis core imports
neither alerts, nor the store, nor the web (a value type two layers share lives with the
layer that produces it: ``Signal`` is the detectors')."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ANALYSIS = Path(__file__).resolve().parent.parent / "app" / "analysis"
FORBIDDEN = ("app.alerts", "app.store", "app.web", "app.probe.client", "app.runtime")


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


APP = ANALYSIS.parent


def unit_of(module: str) -> str | None:
    """The top-level package or module of app/ that ``module`` belongs to (app.store, app.clock)."""
    parts = module.split(".")
    if parts[0] != "app" or len(parts) < 2:
        return None
    top = APP / parts[1]
    return f"app.{parts[1]}" if top.is_dir() or top.with_suffix(".py").exists() else None


def import_graph() -> dict[str, set[str]]:
    """Unit -> the units it imports (any import: at the top, in a function, for types only)."""
    graph: dict[str, set[str]] = {}
    for path in APP.rglob("*.py"):
        source = unit_of(".".join(("app", *path.relative_to(APP).with_suffix("").parts)))
        if source is None:
            continue
        targets = {unit_of(name) for name in imported(path)}
        graph.setdefault(source, set()).update(t for t in targets if t and t != source)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one unit, sorted (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while (top := stack.pop()) != node:
                component.append(top)
            component.append(node)
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
        ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
    ],
)
def test_cycles_finds_every_strongly_connected_set(
    graph: dict[str, set[str]], expected: list[list[str]]
) -> None:
    assert sorted(cycles(graph)) == expected


def test_the_graph_sees_the_imports_that_made_the_old_cycle() -> None:
    graph = import_graph()
    # The edges that stay: the service wires the store; alerts read and write through it.
    assert {"app.store", "app.config", "app.notifiers"} <= graph["app.runtime"]
    assert "app.store" in graph["app.alerts"]
    assert "app.notifiers" in graph["app.config"]


def test_no_cycle_between_the_packages_and_modules_of_app() -> None:
    graph = import_graph()
    found = {
        " <-> ".join(group): sorted(f"{a} -> {b}" for a in group for b in graph[a] if b in group)
        for group in cycles(graph)
    }
    assert not found, f"import cycles: {found}"


def module_graph(package: Path) -> dict[str, set[str]]:
    """Module of ``package`` -> the modules of ``package`` it imports (any import; ``from
    app.alerts import silent`` imports app.alerts.silent)."""
    modules = {
        ".".join(("app", *path.relative_to(APP).with_suffix("").parts)).removesuffix(".__init__")
        for path in package.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for path in package.rglob("*.py"):
        source = ".".join(("app", *path.relative_to(APP).with_suffix("").parts))
        names = imported_with_members(path)
        graph[source.removesuffix(".__init__")] = (names & modules) - {source}
    return graph


def imported_with_members(path: Path) -> set[str]:
    """``imported``, and ``module.name`` for each ``from module import name``."""
    found = imported(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_the_module_graph_sees_a_module_imported_from_its_package() -> None:
    graph = module_graph(APP / "alerts")
    assert "app.alerts.silent" in graph["app.alerts.evaluate"]  # from app.alerts import silent
    assert "app.alerts.history" in graph["app.alerts.crossvantage"]


def test_no_cycle_between_the_modules_of_alerts() -> None:
    """The evaluator's helpers read it through a Protocol handed in with each call
    (app.alerts.memory.EvaluatorView), never by importing it back."""
    graph = module_graph(APP / "alerts")
    assert not cycles(graph), f"import cycles: {cycles(graph)}"


ABOVE_THE_STORE = ("alerts", "analysis", "web")


def is_sqlalchemy(name: str) -> bool:
    return name == "sqlalchemy" or name.startswith("sqlalchemy.")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("sqlalchemy", True),
        ("sqlalchemy.orm", True),
        ("sqlalchemy.exc", True),
        ("sqlalchemy_utils", False),
        ("app.store.db", False),
    ],
)
def test_sqlalchemy_is_told_by_the_package_and_its_modules(name: str, expected: bool) -> None:
    assert is_sqlalchemy(name) is expected


@pytest.mark.parametrize(
    "path",
    sorted(path for unit in ABOVE_THE_STORE for path in (APP / unit).rglob("*.py")),
    ids=lambda p: p.relative_to(APP).as_posix(),
)
def test_layers_above_the_store_import_no_sqlalchemy(path: Path) -> None:
    """SQLAlchemy stays in app/store: alerts, analysis and the web hold at most a store
    ``Session`` (app.store.db), and call store functions with it."""
    bad = {name for name in imported(path) if is_sqlalchemy(name)}
    assert not bad, f"{path.name} imports {sorted(bad)}"


@pytest.mark.parametrize(
    "path",
    sorted(path for unit in ("alerts", "analysis") for path in (APP / unit).rglob("*.py")),
    ids=lambda p: p.relative_to(APP).as_posix(),
)
def test_alerts_and_analysis_reach_the_tables_through_store_functions_only(path: Path) -> None:
    """The ORM rows stay in app/store: alerts and analysis read and write plain values."""
    assert "app.store.models" not in imported(path), f"{path.name} imports app.store.models"


MODULE_LINES_MAX = 300
ROOT_MODULES = {"__init__", "__main__", "main", "clock", "durations", "envvars"}


def test_the_root_of_app_holds_the_wiring_and_the_leaves_every_layer_reads() -> None:
    """main (the wiring), the clock, durations and the ${ENV} expansion; every other module
    lives in the folder of its role."""
    assert {path.stem for path in APP.glob("*.py")} == ROOT_MODULES


@pytest.mark.parametrize(
    "path", sorted(APP.rglob("*.py")), ids=lambda p: p.relative_to(APP).as_posix()
)
def test_no_module_is_over_the_size_that_asks_for_a_split(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MODULE_LINES_MAX, f"{path.relative_to(APP)}: {lines} lines"
