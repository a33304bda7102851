"""The what-if change language, both ways in (command-line tokens and the API's JSON)."""

from __future__ import annotations

from typing import Any

import pytest

from app.analysis.whatif import (
    ChangeError,
    ColdStarts,
    Deadline,
    ScalePhase,
    SetPhase,
    TakePhase,
    changes_from_json,
    changes_to_json,
    parse_changes,
)
from app.analysis.whatif.changes import Change

PARSED: list[tuple[str, Change]] = [
    ("network=15ms", SetPhase("network", 15.0)),
    ("network=1.5s", SetPhase("network", 1500.0)),
    ("queue=0", SetPhase("queue", 0.0)),
    ("queue=0ms", SetPhase("queue", 0.0)),
    ("generation*1.5", ScalePhase("generation", 1.5)),
    ("generation*0", ScalePhase("generation", 0.0)),
    ("generation=@translate-edge", TakePhase("generation", "translate-edge", None)),
    ("generation=@translate-edge/eu-west", TakePhase("generation", "translate-edge", "eu-west")),
    ("generation=@group/api/eu", TakePhase("generation", "group/api", "eu")),
    ("cold=12%:800-2500ms", ColdStarts(0.12, 800.0, 2500.0)),
    ("cold=5%:800ms", ColdStarts(0.05, 800.0, 800.0)),
    ("cold=100%:0.8-2.5s", ColdStarts(1.0, 800.0, 2500.0)),
    ("cold=1%:800ms-2s", ColdStarts(0.01, 800.0, 2000.0)),
    ("deadline=1500ms", Deadline(1500.0)),
    ("deadline=2s", Deadline(2000.0)),
    ("server*2", ScalePhase("server", 2.0)),
]


@pytest.mark.parametrize(("token", "change"), PARSED, ids=[t for t, _ in PARSED])
def test_each_change_reads_as_written(token: str, change: Change) -> None:
    assert parse_changes([token]) == [change]


@pytest.mark.parametrize(("token", "change"), PARSED, ids=[t for t, _ in PARSED])
def test_a_change_written_back_reads_the_same(token: str, change: Change) -> None:
    assert parse_changes([change.token()]) == [change]
    assert changes_from_json(changes_to_json([change])) == [change]


BAD: list[tuple[list[str], str, str]] = [
    (["netwrk=15ms"], "netwrk=15ms", "no phase 'netwrk'"),
    (["network=15"], "network=15", "needs a unit"),
    (["network=fast"], "network=fast", "is not a duration"),
    (["network=-5ms"], "network=-5ms", "is not a duration"),
    (["generation*"], "generation*", "expected PHASE=VALUE"),
    (["generation*x"], "generation*x", "expected PHASE=VALUE"),
    (["generation/2"], "generation/2", "expected PHASE=VALUE"),
    (["generation=@"], "generation=@", "TARGET or TARGET/VANTAGE"),
    (["generation=@edge/"], "generation=@edge/", "TARGET or TARGET/VANTAGE"),
    (["cold=12%"], "cold=12%", "PERCENT%:MIN-MAXms"),
    (["cold=0%:800ms"], "cold=0%:800ms", "above 0 and at most 100%"),
    (["cold=120%:800ms"], "cold=120%:800ms", "above 0 and at most 100%"),
    (["cold=12%:2500-800ms"], "cold=12%:2500-800ms", "from a minimum up to a maximum"),
    (["cold=12%:800-2500"], "cold=12%:800-2500", "needs a unit"),
    (["deadline=0"], "deadline=0", "above 0"),
    (["deadline=soon"], "deadline=soon", "is not a duration"),
    (["queue=0", "deadline=1s", "deadline=2s"], "deadline=2s", "a second deadline"),
    (["cold=1%:1s", "cold=2%:1s"], "cold=2%:1s", "a second cold-start mixture"),
    ([""], "", "expected PHASE=VALUE"),
    (["network=86400001ms"], "network=86400001ms", "at most 86,400,000 ms (a day)"),
    (["deadline=86401s"], "deadline=86401s", "at most 86,400,000 ms (a day)"),
    (["generation*1000.5"], "generation*1000.5", "the factor must be at most 1,000"),
    (["queue*" + "9" * 400], "queue*" + "9" * 400, "the factor must be at most 1,000; it is inf"),
    (["cold=5%:1-86401s"], "cold=5%:1-86401s", "the cold start's maximum must be at most"),
]


@pytest.mark.parametrize(("tokens", "token", "reason"), BAD, ids=[" ".join(b[0]) for b in BAD])
def test_a_bad_change_names_its_token_and_the_reason(
    tokens: list[str], token: str, reason: str
) -> None:
    with pytest.raises(ChangeError) as caught:
        parse_changes(tokens)
    assert caught.value.token == token
    assert reason in caught.value.reason
    assert repr(token) in str(caught.value)


def test_each_json_change_reads_as_the_token_that_says_the_same() -> None:
    items: list[dict[str, Any]] = [
        {"phase": "network", "set_ms": 15},
        {"phase": "generation", "scale": 1.5},
        {"phase": "queue", "set_ms": 0},
        {"phase": "generation", "from": "translate-edge", "vantage": None},
        {"cold": {"fraction": 0.12, "min_ms": 800, "max_ms": 2500}},
        {"deadline_ms": 1500},
    ]
    tokens = [
        "network=15ms",
        "generation*1.5",
        "queue=0",
        "generation=@translate-edge",
        "cold=12%:800-2500ms",
        "deadline=1500ms",
    ]
    assert changes_from_json(items) == parse_changes(tokens)


BAD_JSON: list[tuple[Any, str]] = [
    ({"phase": "netwrk", "set_ms": 1}, "no phase 'netwrk'"),
    ({"phase": "network"}, "exactly one of"),
    ({"phase": "network", "set_ms": 1, "scale": 2}, "exactly one of"),
    ({"phase": "network", "set_ms": "15ms"}, "is not a number"),
    ({"phase": "network", "set_ms": True}, "is not a number"),
    ({"phase": "network", "set_ms": -1}, "must not be negative"),
    ({"phase": "network", "scale": -1}, "must not be negative"),
    ({"phase": "generation", "from": ""}, "must name a target"),
    ({"phase": "generation", "from": "edge", "vantage": 3}, "a name or null"),
    ({"cold": {"fraction": 0.12}}, "needs 'fraction', 'min_ms' and 'max_ms'"),
    ({"cold": {"fraction": 2, "min_ms": 1, "max_ms": 2}}, "at most 100%"),
    ({"deadline_ms": 0}, "above 0"),
    ({"deadline_ms": None}, "is not a number"),
    ({"speed": "fast"}, "needs 'phase'"),
    ("network=15ms", "a change is a JSON object"),
    ({"phase": "network", "set_ms": 1e300}, "'set_ms' must be at most 86,400,000 ms (a day)"),
    ({"phase": "network", "set_ms": -1e300}, "must not be negative"),
    ({"phase": "network", "set_ms": float("nan")}, "'set_ms': nan is not a number"),
    ({"phase": "network", "set_ms": float("inf")}, "'set_ms': inf is not a number"),
    ({"phase": "generation", "scale": 1e300}, "'scale' must be at most 1,000"),
    ({"deadline_ms": 1e300}, "'deadline_ms' must be at most 86,400,000 ms"),
    ({"cold": {"fraction": 0.1, "min_ms": 1, "max_ms": 1e300}}, "'max_ms' must be at most"),
    ({"cold": {"fraction": 0.1, "min_ms": 1e300, "max_ms": 1}}, "'min_ms' must be at most"),
    ({"cold": {"fraction": float("nan"), "min_ms": 1, "max_ms": 2}}, "'fraction': nan is not"),
]


@pytest.mark.parametrize(("item", "reason"), BAD_JSON, ids=[str(b[0]) for b in BAD_JSON])
def test_a_bad_json_change_names_itself_and_the_reason(item: Any, reason: str) -> None:
    with pytest.raises(ChangeError) as caught:
        changes_from_json([{"phase": "queue", "set_ms": 0}, item])
    assert reason in caught.value.reason
    assert caught.value.token.startswith(("{", '"'))


def test_changes_must_be_a_list() -> None:
    with pytest.raises(ChangeError, match="must be a list"):
        changes_from_json({"phase": "queue", "set_ms": 0})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("items", "tokens"),
    [
        ([{"phase": "network", "set_ms": 86_400_000}], ["network=86400s"]),
        ([{"phase": "generation", "scale": 1000}], ["generation*1000"]),
        ([{"deadline_ms": 86_400_000}], ["deadline=86400000ms"]),
        ([{"cold": {"fraction": 1, "min_ms": 0, "max_ms": 86_400_000}}], ["cold=100%:0-86400s"]),
    ],
    ids=["set", "scale", "deadline", "cold"],
)
def test_the_bounds_themselves_are_allowed(items: list[dict[str, Any]], tokens: list[str]) -> None:
    assert changes_from_json(items) == parse_changes(tokens)
