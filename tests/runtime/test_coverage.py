"""What the targets file asks for and nobody probes: the server's refusals, the agents'
(only for targets still assigned to them), a refused reload; logged once, scraped."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from app.config import TargetsFile
from app.runtime.coverage import Coverage, CoverageCollector, Unprobed

FILE = TargetsFile.model_validate(
    {
        "targets": [
            {"name": "here", "url": "http://a.example/", "vantages": ["srv", "fra"]},
            {"name": "away", "url": "http://b.example/", "vantages": ["fra"]},
            {"name": "plain", "url": "http://c.example/"},
        ],
        "vantages": {"fra": {"token": "x" * 32}},
    }
)


def coverage(agents: Mapping[str, Mapping[str, str]]) -> Coverage:
    return Coverage("srv", lambda: FILE, lambda: agents)


@pytest.mark.parametrize(
    ("here", "agents", "expected"),
    [
        ({}, {}, []),
        ({"here": "no X"}, {}, [Unprobed("here", "srv", "no X")]),
        ({}, {"fra": {"away": "no Y"}}, [Unprobed("away", "fra", "no Y")]),
        # An agent's report about a target no longer assigned to it, or gone, is old news.
        ({}, {"fra": {"plain": "no Y", "gone": "no Z"}}, []),
        ({}, {"nyc": {"away": "no Y"}}, []),
        (
            {"here": "no X"},
            {"fra": {"here": "no X", "away": "no Y"}},
            [Unprobed("away", "fra", "no Y"), Unprobed("here", "fra", "no X"),
             Unprobed("here", "srv", "no X")],
        ),
    ],
    ids=["none", "server", "agent", "stale-agent-report", "unknown-vantage", "sorted"],
)  # fmt: skip
def test_unprobed_lists_each_target_and_vantage_nobody_probes(
    here: dict[str, str], agents: dict[str, dict[str, str]], expected: list[Unprobed]
) -> None:
    seen = coverage(agents)
    seen.refused_here(here)
    assert seen.unprobed() == expected
    assert seen.problems() == [one.line() for one in expected]


def test_a_refusal_is_logged_once_and_again_only_when_its_reason_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seen = coverage({})
    with caplog.at_level(logging.ERROR, "app.runtime.coverage"):
        for refused in ({"here": "no X"}, {"here": "no X"}, {"here": "no W"}, {}, {"here": "no W"}):
            seen.refused_here(refused)
    assert [r.getMessage() for r in caplog.records] == [
        "target here not probed at srv: no X",
        "target here not probed at srv: no W",
        "target here not probed at srv: no W",  # gone, then back: news again
    ]


def test_a_refused_reload_is_a_problem_until_a_reload_succeeds() -> None:
    seen = coverage({})
    seen.reload_refused("phasewatch.yaml:3: targets[0].url: not a URL")
    assert seen.problems() == [
        "reload refused, keeping the running targets: phasewatch.yaml:3: targets[0].url: not a URL"
    ]
    seen.reloaded()
    assert seen.problems() == []


def test_the_collector_scrapes_each_unprobed_target_and_the_refused_reload() -> None:
    seen = coverage({"fra": {"away": "no Y"}})
    registry = CollectorRegistry()
    registry.register(CoverageCollector(seen))
    text = generate_latest(registry).decode()
    assert 'phasewatch_target_unprobed{target="away",vantage="fra"} 1.0' in text
    assert "phasewatch_reload_refused 0.0" in text
    seen.reload_refused("bad")
    assert "phasewatch_reload_refused 1.0" in generate_latest(registry).decode()
