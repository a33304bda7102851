"""The demo's story as data: configs by hour, run times, and the targets file it implies."""

from __future__ import annotations

import pytest

from app.demo import story
from app.demo.replay import demo_targets
from app.demo.sim.core import SimConfig

PROD = story.endpoint("translate-prod")
EDGE = story.endpoint("translate-edge")


@pytest.mark.parametrize(
    ("hour", "expected"),
    [
        (0.0, story.PROD_REASONING),
        (story.SWITCH_H - 0.01, story.PROD_REASONING),
        (story.SWITCH_H, story.PROD_DIRECT),
        (story.BUSY_H - 0.01, story.PROD_DIRECT),
        (story.BUSY_H, story.PROD_BUSY),
        (story.END_H, story.PROD_BUSY),
    ],
)
def test_prod_config_follows_the_story_by_hour(hour: float, expected: SimConfig) -> None:
    assert PROD.config_at(hour) == expected


@pytest.mark.parametrize(
    ("endpoint", "hour", "probed"),
    [
        (PROD, 0.0, True),
        (EDGE, 0.0, False),
        (EDGE, story.EDGE_FROM_H - 0.01, False),
        (EDGE, story.EDGE_FROM_H, True),
        (EDGE, story.EDGE_UNTIL_H - 0.01, True),
        (EDGE, story.EDGE_UNTIL_H, False),
        (PROD, story.END_H - 0.01, True),
    ],
)
def test_each_endpoint_is_probed_from_its_hour(
    endpoint: story.Endpoint, hour: float, probed: bool
) -> None:
    assert endpoint.probed_at(hour) is probed


@pytest.mark.parametrize(
    ("offset_s", "interval_s", "start_h", "end_h", "expected"),
    [
        (0.0, 1800.0, 0.0, 2.0, [0.0, 0.5, 1.0, 1.5]),
        (900.0, 1800.0, 0.0, 1.5, [0.25, 0.75, 1.25]),
        (900.0, 1800.0, 1.0, 2.0, [1.25, 1.75]),
        (0.0, 3600.0, 2.5, 2.6, []),
    ],
)
def test_run_hours(
    offset_s: float, interval_s: float, start_h: float, end_h: float, expected: list[float]
) -> None:
    assert story.run_hours(offset_s, interval_s, start_h, end_h) == expected


def share(config: SimConfig, phase: str) -> float:
    """A phase's share of the medians, as the detectors compute shares."""
    generation_ms = 1000 * (config.reasoning_tokens + config.tokens - 1) / config.tokens_per_s
    medians = {
        "network": 2 * config.one_way_ms,
        "queue": config.queue_median_ms,
        "prefill": config.prefill_ms,
        "generation": generation_ms,
    }
    return medians[phase] / sum(medians.values())


def test_the_story_configs_tell_the_story() -> None:
    """Generation leads with reasoning on, falls to about 10 % without; busy hours raise the
    queue median but leave the round trip ahead (a tail change, not another leader)."""
    reasoning, direct, busy = story.PROD_REASONING, story.PROD_DIRECT, story.PROD_BUSY
    assert 2 * reasoning.one_way_ms == 275.0
    assert share(reasoning, "generation") > share(reasoning, "network") + 0.15
    assert 0.08 < share(direct, "generation") < 0.15
    assert busy.queue_median_ms > direct.queue_median_ms
    assert share(busy, "network") > share(busy, "queue")
    assert 2 * story.EDGE.one_way_ms == 25.0
    assert story.EDGE.tokens_per_s == pytest.approx(reasoning.tokens_per_s / 1.5)
    assert story.EDGE.cold_start_ms > story.DEADLINE_MS


def test_the_demo_targets_file_is_valid_and_points_at_the_sims() -> None:
    urls = {"translate-prod": "http://127.0.0.1:1001", "translate-edge": "http://127.0.0.1:1002"}
    targets = {t.name: t for t in demo_targets(urls).targets}
    assert targets["translate-prod"].url == "http://127.0.0.1:1001/v1/chat/completions"
    assert targets["translate-edge"].deadline_ms == story.DEADLINE_MS
    assert targets["translate-prod"].deadline_ms is None
    for target in targets.values():
        assert target.samples == story.SAMPLES == 38
        assert target.interval == story.INTERVAL_S
        assert target.alerts.min_reference_runs == 4
