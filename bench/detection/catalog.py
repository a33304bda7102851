"""The catalogue of scenarios: name → builder and description, and ``build``.

The first nine are in bench/detection/scenarios.py, the ones from real history in
bench/detection/history.py, the slowdowns and slow degradations in degradations.py; the
fleet (fleet.py) and the untuned kinds (heldout.py) are run only when asked for
(``DEFAULT`` leaves them out); ``build`` adds every deadline target's SLO episodes
(bench/detection/slo.py) to the builder's labels.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.detection import degradations, fleet, heldout, history, slo
from bench.detection.scenario import Context, Params, Scenario
from bench.detection.scenarios import (
    abrupt_generation_collapse,
    daily_busy_hours,
    edge_switch,
    generation_drift,
    isolated_bad_runs,
    near_tie,
    one_vantage_route,
    queue_tail_blowup,
    quiet,
)

Builder = Callable[[Context], None]
SCENARIOS: dict[str, tuple[Builder, str]] = {
    "abrupt_generation_collapse": (
        abrupt_generation_collapse,
        "Reasoning turned off: generation drops from ~60 % to ~10 %; queue or network leads.",
    ),
    "generation_drift": (
        generation_drift,
        "Generation shrinks linearly over half the scenario until the runner-up leads.",
    ),
    "queue_tail_blowup": (
        queue_tail_blowup,
        "A share of samples gets a heavy queue tail; the queue's median barely moves.",
    ),
    "daily_busy_hours": (
        daily_busy_hours,
        "Queue median and tail rise a few hours every day from the start: nothing changes.",
    ),
    "near_tie": (near_tie, "Two phases within 1-2 pp; noise swaps them run to run: no change."),
    "one_vantage_route": (
        one_vantage_route,
        "One vantage's round trip lengthens; the other sees nothing.",
    ),
    "edge_switch": (
        edge_switch,
        "Switch to an edge service: short RTT, slower generation, cold starts, missed deadline.",
    ),
    "isolated_bad_runs": (
        isolated_bad_runs,
        "A few isolated runs with huge latency or many failures: no change.",
    ),
    "quiet": (quiet, "Stationary targets for the false-alarm rate."),
    "steady_slo_violation": (
        history.steady_slo_violation,
        "A deadline target missing 3-5 % all along: one SLO episode per vantage from the start.",
    ),
    "persistent_violation_after_tail_change": (
        history.persistent_violation_after_tail_change,
        "A tail blow-up takes deadline misses from under the SLO to well over it, and stays.",
    ),
    "correlated_runs": (
        history.correlated_runs,
        "Whole runs slow together (strong shared load): no change.",
    ),
    "quiet_weekends": (
        history.quiet_weekends,
        "Weekends a third as loaded, over three weeks and more: no change.",
    ),
    "probing_gap": (
        history.probing_gap,
        "One vantage's probe fails for an hour, then no runs for hours, then normal.",
    ),
    "generation_regrowth": (
        history.generation_regrowth,
        "Reasoning switched back on: generation grows past the network and queue.",
    ),
    "queue_growth": (history.queue_growth, "The shared queue grows past the network."),
    "heavy_tail_steady": (history.heavy_tail_steady, "A steady, very heavy queue tail."),
    "uniform_slowdown": (
        degradations.uniform_slowdown,
        "Every phase × 1.25 at once; the leader stays: a level shift and nothing else.",
    ),
    "phase_slowdown": (
        degradations.phase_slowdown,
        "Prefill or transfer × 2 (end-to-end +15-20 %); generation still leads.",
    ),
    "slow_queue_tail_degradation": (
        degradations.slow_queue_tail_degradation,
        "A steady week, then the queue's tail share 2 % → 12 % over three weeks.",
    ),
    "slow_generation_growth": (
        degradations.slow_generation_growth,
        "A steady week, then generation × 1.6 over three weeks, never leading.",
    ),
    "fleet": (
        fleet.fleet,
        "220 targets, 70 % at one vantage, 10 samples a run, most quiet (see fleet.py).",
    ),
    "retrieval_prompts": (heldout.retrieval_prompts, "Untuned: see bench/detection/heldout.py."),
    "weekly_batch_window": (
        heldout.weekly_batch_window,
        "Untuned: see bench/detection/heldout.py.",
    ),
}
UNTUNED = ("retrieval_prompts", "weekly_batch_window")  # reported apart, not in the default
DEFAULT = tuple(name for name in SCENARIOS if name not in (*UNTUNED, fleet.NAME))
LONG = {
    "quiet": "quiet_days",
    "quiet_weekends": "weekends_days",
    "slow_queue_tail_degradation": "degradation_days",
    "slow_generation_growth": "degradation_days",
    "fleet": "fleet_days",
    "weekly_batch_window": "heldout_days",
}  # scenarios with their own length


def build(name: str, params: Params) -> Scenario:
    """The scenario with its labels: the builder's events, then the SLO episodes."""
    builder, description = SCENARIOS[name]
    days = float(getattr(params, LONG[name])) if name in LONG else params.days
    ctx = Context(name, description, params, days)
    builder(ctx)
    slo.label(ctx.scenario, params.seed)
    return ctx.scenario
