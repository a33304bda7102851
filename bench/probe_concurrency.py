"""Accuracy with many probes at once: 50 ``probe_run`` tasks, each with its own client.

All run concurrently against one sim (its own process, acceptance configuration), 10
samples each, so the probes' event loop is shared by 50 streams at a time; the whole
thing is done ``--rounds`` times. The per-phase error table is the one of
``bench.probe_accuracy``; event-loop contention shows in the tail (p95, max) first, so
both processes' loop lag is reported too.

    .venv/bin/python -m bench.probe_concurrency [--probes 50] [--samples 10] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

from app.demo.sim.app import Truth
from app.demo.sim.process import SimProcess
from app.probe.run import probe_run
from app.probe.sample import Sample
from bench.common import (
    ACCEPTANCE,
    PHASE_ERROR_HEADERS,
    LoopLag,
    RunClock,
    bounded,
    chat_spec,
    median,
    paired,
    pct,
    phase_error_rows,
    print_header,
    print_table,
)

_BUDGET_S = 45.0  # per round; a round takes ~5 s

Pairs = list[tuple[Sample, Truth]]


async def _run_all(url: str, probes: int, samples: int, collected: list[Sample]) -> None:
    spec = chat_spec(url)
    async with asyncio.TaskGroup() as group:
        for _ in range(probes):
            group.create_task(probe_run(spec, samples, on_sample=collected.append))


class GcPauses:
    """Full (generation 2) garbage collections while the block runs, and how long each took."""

    def __init__(self) -> None:
        self.pauses_ms: list[float] = []
        self._started = 0.0

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses_ms.append((time.perf_counter() - self._started) * 1000)

    def summary(self) -> str:
        pauses = ", ".join(f"{ms:.0f}" for ms in self.pauses_ms) or "none"
        return f"full GC pauses (ms): {pauses}"


async def _round(sim: SimProcess, probes: int, samples: int, number: int) -> Pairs:
    collected: list[Sample] = []
    with GcPauses() as gc_pauses:
        async with LoopLag() as lag:
            work = _run_all(sim.url, probes, samples, collected)
            await bounded(_BUDGET_S, lambda: work, f"round {number}")
    pairs = paired(collected, sim.truths())
    network = [s.phases["network"] - t.network_ms for s, t in pairs]
    print(
        f"round {number}: {len(pairs)} of {probes * samples} samples ok and paired; "
        f"network error p50 {median(network):+.3f} ms, p95 {pct(network, 95):+.3f} ms; "
        f"probe loop lag {lag.summary()}; {gc_pauses.summary()}"
    )
    return pairs


def _tables(pairs: Pairs) -> None:
    groups = {
        "all samples": pairs,
        "first sample of each run (new connection, other clients still being made)": [
            (s, t) for s, t in pairs if s.index == 0
        ],
        "the rest (pooled connections)": [(s, t) for s, t in pairs if s.index > 0],
    }
    for title, group in groups.items():
        print(f"\n## {title}: {len(group)} samples")
        print_table(PHASE_ERROR_HEADERS, phase_error_rows([(s.phases, t) for s, t in group]))


async def main(probes: int, samples: int, rounds: int) -> None:
    print_header(
        "probe_concurrency",
        f"{probes} probe_run tasks at once, {samples} samples each, {rounds} rounds: "
        "per-phase error (ms)",
    )
    clock = RunClock()
    pairs: Pairs = []
    with SimProcess(ACCEPTANCE) as sim:
        for number in range(1, rounds + 1):
            pairs += await _round(sim, probes, samples, number)
        sim_lag = sim.loop_lag()
    print(
        f"sim process loop lag on 5 ms sleeps, whole run: p50 {sim_lag['p50']:.2f} ms, "
        f"p99 {sim_lag['p99']:.2f} ms, max {sim_lag['max']:.2f} ms"
    )
    _tables(pairs)
    print(f"\nfinished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--samples", type=int, default=10, help="per probe")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.probes, args.samples, args.rounds))
