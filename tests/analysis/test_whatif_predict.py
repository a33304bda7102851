"""The what-if engine on plain arrays: changes sample by sample, resampling run by run."""

from __future__ import annotations

import numpy as np
import pytest

from app.analysis.whatif import (
    ChangeError,
    SampleSet,
    levers,
    parse_changes,
    predict,
    sample_set,
)
from app.analysis.whatif.levers import headline
from app.analysis.whatif.resample import QUANTILES, resampled_quantiles, run_counts

PHASES = ("connect", "network", "queue", "prefill", "generation", "transfer")


def measured(runs: int = 60, per_run: int = 20, seed: int = 1) -> SampleSet:
    """Sim-like samples: a lognormal queue that shares each run's moment (its load)."""
    rng = np.random.default_rng(seed)
    rows = []
    for r in range(runs):
        load = rng.lognormal(0, 0.3)
        for _ in range(per_run):
            phases = {
                "connect": rng.uniform(0, 0.5),
                "network": 100 + rng.normal(0, 2),
                "queue": 100 * load * rng.lognormal(0, 0.5),
                "prefill": 20 + rng.normal(0, 1),
                "generation": 95 + rng.normal(0, 3),
                "transfer": rng.uniform(0, 1),
            }
            rows.append((f"run-{r}", "ok", phases))
    return sample_set(rows)


def quantiles(values: np.ndarray) -> list[float]:
    return [float(v) for v in np.quantile(values, QUANTILES, method="inverted_cdf")]


def points(outcome_json: dict[str, dict[str, object]]) -> list[object]:
    return [outcome_json[k]["value"] for k in ("p50_ms", "p90_ms", "p99_ms")]


def test_the_identity_change_reproduces_the_measured_quantiles_within_their_intervals() -> None:
    samples = measured()
    prediction = predict(samples, [])
    totals = samples.totals
    for estimate, q in zip(
        (prediction.after.p50_ms, prediction.after.p90_ms, prediction.after.p99_ms),
        QUANTILES,
        strict=True,
    ):
        truth = float(np.quantile(totals, q))
        assert estimate.lo <= truth <= estimate.hi
        assert estimate.lo < estimate.value < estimate.hi
    assert prediction.after == prediction.before
    assert prediction.after.miss_rate.value == 0.0


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (["queue=0"], lambda ms, col: ms.sum(1) - ms[:, col["queue"]]),
        (["network=15ms"], lambda ms, col: ms.sum(1) - ms[:, col["network"]] + 15),
        (["generation*1.5"], lambda ms, col: ms.sum(1) + 0.5 * ms[:, col["generation"]]),
        (
            ["queue=0", "network*0.5"],
            lambda ms, col: ms.sum(1) - ms[:, col["queue"]] - 0.5 * ms[:, col["network"]],
        ),
    ],
    ids=["remove", "set", "scale", "two"],
)
def test_a_phase_change_is_that_change_made_sample_by_sample(tokens, expected) -> None:  # type: ignore[no-untyped-def]
    samples = measured()
    columns = {phase: j for j, phase in enumerate(samples.phases)}
    after = predict(samples, parse_changes(tokens), resamples=50).after
    changed = expected(samples.ms, columns)
    assert [after.p50_ms.value, after.p90_ms.value, after.p99_ms.value] == pytest.approx(
        quantiles(changed), abs=1e-9
    )


def test_removing_the_queue_moves_the_lead_and_the_shares_add_up() -> None:
    prediction = predict(measured(), parse_changes(["queue=0"]), resamples=50)
    assert prediction.before.dominant == "queue"
    assert prediction.after.shares["queue"] == 0.0
    assert prediction.after.dominant == "network"
    assert prediction.after.next_dominant == "generation"
    assert sum(prediction.after.shares.values()) == pytest.approx(1.0)


def test_weighted_resample_quantiles_are_those_of_the_resample_written_out() -> None:
    rng = np.random.default_rng(5)
    values = np.round(rng.lognormal(3, 1, 300), 1)  # ties too
    run = np.repeat(np.arange(30), 10)
    counts = run_counts(30, 40, rng)
    found = resampled_quantiles(values, run, counts)
    for row, weights in zip(found, counts, strict=True):
        written_out = np.repeat(values, weights[run].astype(int))
        assert list(row) == quantiles(written_out)


def test_the_run_is_the_unit_of_resampling() -> None:
    """Samples of a run share its moment: the interval over runs is wider than one that
    treats every sample as its own run."""
    samples = measured(runs=40, per_run=25)
    alone = SampleSet(
        samples.phases, samples.ms, np.arange(samples.n), samples.censored, samples.deadline_ms
    )
    by_run, by_sample = (predict(s, []).after.p50_ms for s in (samples, alone))
    assert (by_run.hi - by_run.lo) > 1.5 * (by_sample.hi - by_sample.lo)


def test_a_deadline_cuts_the_tail_at_itself_and_counts_the_misses() -> None:
    samples = measured()
    deadline = float(np.quantile(samples.totals, 0.95))
    prediction = predict(samples, parse_changes([f"deadline={deadline}ms"]), resamples=50)
    expected = float(np.mean(samples.totals > deadline))
    assert prediction.after.miss_rate.value == pytest.approx(expected)
    assert prediction.before.miss_rate.value == pytest.approx(expected)  # judged alike
    assert prediction.after.p99_ms.value == deadline
    assert prediction.after.p50_ms.value == prediction.before.p50_ms.value


def test_cold_starts_reach_exactly_their_share_and_beyond_a_deadline_are_misses() -> None:
    samples = measured()
    changes = parse_changes(["cold=5%:5s", "deadline=3s"])
    prediction = predict(samples, changes, resamples=50)
    assert prediction.after.miss_rate.value == pytest.approx(0.05, abs=1e-12)
    assert prediction.after.p99_ms.value == 3000.0
    assert prediction.after.p50_ms.value > prediction.before.p50_ms.value
    assert prediction.after.miss_rate.lo <= 0.05 <= prediction.after.miss_rate.hi


def test_another_targets_phase_replaces_this_ones() -> None:
    samples, donor = measured(), measured(seed=2)
    donor.ms[:, donor.column("generation")] = 300.0
    changes = parse_changes(["generation=@edge"])
    after = predict(samples, changes, donors={"edge": donor}, resamples=50).after
    gen = samples.column("generation")
    assert [after.p50_ms.value, after.p90_ms.value, after.p99_ms.value] == pytest.approx(
        quantiles(samples.totals - samples.ms[:, gen] + 300.0)
    )
    assert after.dominant == "generation"


@pytest.mark.parametrize(
    ("token", "donors", "reason"),
    [
        ("server*2", {}, "the samples have no phase 'server'"),
        ("generation=@edge", {}, "no measured samples of edge"),
        ("generation=@edge/eu", {"edge": measured()}, "no measured samples of edge/eu"),
    ],
)
def test_a_change_the_samples_cannot_take_names_its_token(
    token: str, donors: dict[str, SampleSet], reason: str
) -> None:
    with pytest.raises(ChangeError) as caught:
        predict(measured(), parse_changes([token]), donors=donors, resamples=10)
    assert caught.value.token == token
    assert reason in caught.value.reason


def censored_set() -> SampleSet:
    """Runs whose slow samples were cut at a 500 ms deadline: their totals are the cut."""
    rows = []
    for r in range(30):
        for i in range(10):
            queue = 400.0 if i == 0 else 50.0 + i
            phases = {"network": 100.0, "queue": queue, "generation": 100.0}
            if sum(phases.values()) > 500:
                rows.append((r, "deadline_exceeded", {"network": 100.0, "queue": 400.0}))
            else:
                rows.append((r, "ok", phases))
    return sample_set(rows)


def test_a_cut_sample_stays_a_miss_when_a_change_shortens_it_and_the_bound_is_given() -> None:
    samples = censored_set()
    assert samples.deadline_ms == 500.0
    prediction = predict(samples, parse_changes(["network=10ms"]), resamples=50)
    assert prediction.before.miss_rate.value == pytest.approx(0.1)
    assert prediction.after.miss_rate.value == pytest.approx(0.1)  # pessimistic: unknown
    assert prediction.after.p99_ms.value == 500.0
    assert prediction.optimistic is not None
    assert prediction.optimistic.miss_rate == 0.0  # each ends at 10 + 400 ms, known so far
    assert prediction.optimistic.p99_ms == 410.0
    assert any("cut at the 500 ms deadline" in note for note in prediction.notes)


def test_the_identity_change_keeps_cut_samples_where_they_were() -> None:
    prediction = predict(censored_set(), [], resamples=50)
    assert prediction.after == prediction.before


def test_failed_samples_are_left_out_and_the_json_has_quantiles_shares_and_dominant() -> None:
    rows = [(0, "ok", {"network": 10.0, "queue": 5.0}), (0, "error", {"network": 1.0})]
    rows += [(1, "ok", {"network": 12.0, "queue": 7.0}), (1, "http_error", {"network": 1.0})]
    samples = sample_set(rows)
    assert samples.n == 2
    body = predict(samples, parse_changes(["queue=0"]), resamples=20).to_json()
    for side in ("before", "after"):
        assert {"p50_ms", "p90_ms", "p99_ms", "miss_rate", "shares", "dominant"} <= set(body[side])
        assert set(body[side]["p99_ms"]) == {"value", "interval"}
    assert points(body["after"]) == [10.0, 12.0, 12.0]
    assert body["changes"] == [{"phase": "queue", "set_ms": 0.0}]


def test_the_biggest_lever_is_the_phase_the_tail_lives_in() -> None:
    samples = measured()
    found = levers(samples)
    assert [lever.phase for lever in found][:2] == ["queue", "network"]
    queue = found[0]
    by_predict = predict(samples, parse_changes(["queue*0.5"]), resamples=10).after
    assert queue.halved.p99_ms == by_predict.p99_ms.value
    assert queue.removed.p50_ms < queue.halved.p50_ms
    assert queue.share == pytest.approx(predict(samples, [], resamples=10).before.shares["queue"])


def test_where_misses_hold_the_tail_no_lever_claims_it_and_the_median_ranks_them() -> None:
    samples = censored_set()  # 10 % cut at 500 ms: the p99 is the deadline whatever happens
    found = levers(samples)
    assert [lever.tail_moves for lever in found] == [False] * len(found)
    assert {lever.phase: lever.median_moves for lever in found} == {
        "network": True, "queue": True, "generation": True
    }  # fmt: skip
    # Equal tails: the median decides, network and generation (100 ms) before queue (~55).
    assert [lever.phase for lever in found][-1] == "queue"
    now = predict(samples, [], resamples=10).before
    sentence = headline(found, now.p99_ms.value, now.p50_ms.value)
    assert sentence.startswith("no lever moves the p99: its samples are cut at the deadline")
    assert "by the median the biggest is" in sentence and "halved, p50 " in sentence


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # A phase holding none of the time is no lever at all.
        ([(r, "ok", {"connect": 0.001, "queue": 100.0 + r}) for r in range(20)], ["queue"]),
        # Every sample cut, nothing a phase does moves either end: said, not ranked.
        ([(r, "deadline_exceeded", {"queue": 500.0}) for r in range(20)], ["queue"]),
    ],
    ids=["no-share", "all-cut"],
)
def test_levers_leave_out_what_holds_no_time(
    rows: list[tuple[int, str, dict[str, float]]], expected: list[str]
) -> None:
    samples = sample_set(rows)
    found = levers(samples, deadline_ms=500.0)
    assert [lever.phase for lever in found] == expected
    if rows[0][1] == "deadline_exceeded":
        assert not found[0].tail_moves and not found[0].median_moves
        assert headline(found, 500.0, 500.0) == (
            "no lever moves the p99: its samples are cut at the deadline and stay misses,"
            " nor the median"
        )
