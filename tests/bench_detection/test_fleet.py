"""The fleet corpus: its size and proportions, names per kind, its split for scoring, and
the CSV writer that makes its text a chunk at a time."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench.detection import fleet
from bench.detection.generate import add_params, params_from, scenario_names, write_csv
from bench.detection.labels import Alert
from bench.detection.model import draw
from bench.detection.scenario import Context, Params, Scenario


@pytest.fixture(scope="module")
def built() -> Scenario:
    params = Params(seed=1)
    ctx = Context(fleet.NAME, "", params, params.fleet_days)
    fleet.fleet(ctx)
    return ctx.scenario


def kinds(scenario: Scenario) -> Counter[str]:
    return Counter(fleet.kind_of(t.name) for t in scenario.targets)


def test_the_fleet_has_two_hundred_targets_most_quiet_most_at_one_vantage(
    built: Scenario,
) -> None:
    targets = built.targets
    assert len(targets) >= 200
    one = sum(len(t.vantages) == 1 for t in targets) / len(targets)
    assert 0.6 <= one <= 0.8
    no_event = {t.name for t in targets} - {e.target for e in built.events}
    assert len(no_event) / len(targets) >= 0.85
    assert (built.end - built.start).days == 21


@pytest.mark.parametrize(
    ("kind", "targets", "events"),
    [
        ("quiet", 170, 0),
        ("near_tie", 15, 0),
        ("correlated_runs", 10, 0),
        ("uniform_slowdown", 3, 3),
        ("phase_slowdown", 3, 3),
        ("slow_queue_tail_degradation", 5, 5),
        ("slow_generation_growth", 5, 5),
        ("abrupt_generation_collapse", 3, 3),
        ("queue_growth", 3, 3),
        ("one_vantage_route", 3, 3),
    ],
)
def test_each_kind_has_its_targets_and_labelled_events(
    built: Scenario, kind: str, targets: int, events: int
) -> None:
    assert kinds(built)[kind] == targets
    found = [e for e in built.events if e.id.startswith(f"{kind}:")]
    assert len(found) == events
    assert all(fleet.kind_of(e.target) == kind and e.group == e.id for e in found)
    assert all(built.start < e.start < built.end for e in found)


def test_quiet_targets_mix_four_profiles_and_near_ties_keep_seoul(built: Scenario) -> None:
    quiet = [t for t in built.targets if fleet.kind_of(t.name) == "quiet"]
    assert Counter(t.note for t in quiet) == {
        "quiet chat": 43,
        "quiet reasoning": 43,
        "quiet queue": 42,
        "quiet http": 42,
    }
    assert all(t.deadline_ms is not None for t in quiet if t.note == "quiet reasoning")
    ties = [t for t in built.targets if fleet.kind_of(t.name) == "near_tie"]
    assert all("seoul-1" in t.vantages for t in ties)


def test_slow_degradations_fit_in_the_fleet(built: Scenario) -> None:
    for event in built.events:
        if not event.abrupt:
            assert event.window == (event.start, built.end)
            assert 5.0 <= (event.start - built.start).total_seconds() / 86400 <= 6.0


def test_split_gives_each_kind_its_targets_events_and_alerts(built: Scenario) -> None:
    labels = built.labels()
    parts = fleet.split(labels)
    assert set(parts) == {f"fleet/{kind}" for kind in kinds(built)}
    assert sum(len(p.targets) for p in parts.values()) == len(labels.targets)
    assert sum(len(p.events) for p in parts.values()) == len(labels.events)
    assert sum(p.target_months for p in parts.values()) == pytest.approx(labels.target_months)
    route = parts["fleet/one_vantage_route"]
    at = labels.start
    alerts = [Alert("dominant_shift", t.name, None, at) for t in labels.targets[::7]]
    mine = fleet.alerts_of(route, alerts)
    assert {a.target for a in mine} == {t.name for t in route.targets} & {a.target for a in alerts}


def test_fleet_flag_asks_for_the_fleet_alone_with_ten_samples() -> None:
    parser = argparse.ArgumentParser()
    add_params(parser)
    args = parser.parse_args(["--fleet"])
    assert scenario_names(args) == ["fleet"]
    assert params_from(args).samples == 10
    plain = parser.parse_args(["--untuned", "--scenarios", "quiet"])
    assert scenario_names(plain) == ["quiet", "retrieval_prompts", "weekly_batch_window"]
    assert params_from(plain).samples == 20


@pytest.mark.parametrize("chunk", [1, 7, 1000])
def test_the_csv_is_the_same_whatever_the_chunk(tmp_path: Path, chunk: int) -> None:
    params = Params(seed=1, days=0.5)
    ctx = Context("quiet", "", params, params.days)
    ctx.target("a", fleet.QUEUE_BOUND)
    ctx.target("b", fleet.HOMEPAGE)
    rng = np.random.default_rng(1)
    drawn = [draw(s, 3, 1.0, rng) for s in ctx.scenario.series]
    whole, parts = tmp_path / "whole.csv", tmp_path / "parts.csv"
    rows = write_csv(whole, drawn, chunk=10**9)
    assert write_csv(parts, drawn, chunk=chunk) == rows == sum(d.total.size for d in drawn)
    assert parts.read_text() == whole.read_text()
    stamps = [line.split(",")[0] for line in whole.read_text().splitlines()[1:]]
    assert stamps == sorted(stamps)
