"""CPU time per sample: phasewatch's probe against a bare httpx streaming read.

Both read the same response from the sim (its own process, so its CPU is not counted)
through clients of the same settings (``make_client``), one pooled connection each. The
sim answers at once (no delays, 200 tokens as fast as it can write them), so the client is
busy all the time. ``time.process_time()`` of this process is summed over blocks of
sequential requests, the two kinds taking turns block by block.

    .venv/bin/python -m bench.probe_cpu [--samples 300] [--repeats 3] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import json
import pstats
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import httpx

from app.demo.sim.app import SimConfig
from app.demo.sim.process import SimProcess
from app.probe.client import make_client, probe_once
from app.probe.kinds.openai import read_openai_event
from app.probe.readers import Findings, StreamReader
from app.probe.sample import Marks, Status
from app.probe.servertiming import timing_from_usage, tokens_from_usage
from app.probe.spec import ProbeSpec
from app.probe.sse import SSEDecoder
from bench.common import (
    STREAM_BODY,
    RunClock,
    bounded,
    chat_spec,
    median,
    print_header,
    print_table,
)

FAST = SimConfig(
    one_way_ms=0,
    queue_median_ms=0,
    queue_sigma=0,
    prefill_ms=0,
    tokens=200,
    tokens_per_s=1e9,
    server_timing="usage",
    seed=7,
)
_BLOCK = 50
_WARMUP = 30
_BUDGET_S = 150.0
_GOAL = 1.2

Request = Callable[[], Awaitable[int]]  # one request; returns how many chunks it read


def bare_request(client: httpx.AsyncClient, url: str) -> Request:
    async def request() -> int:
        chunks = 0
        async with client.stream("POST", url, json=STREAM_BODY) as response:
            async for _ in response.aiter_bytes():
                chunks += 1
        return chunks

    return request


def probe_request(client: httpx.AsyncClient, spec: ProbeSpec) -> Request:
    async def request() -> int:
        sample = await probe_once(client, spec)
        if sample.status is not Status.OK:
            raise RuntimeError(f"probe failed: {sample.error_class}: {sample.error}")
        return 0  # the probe does not say how many chunks it read

    return request


@dataclass
class Tally:
    cpu_s: float = 0.0
    samples: int = 0
    chunks: int = 0
    per_repeat_us: list[float] = field(default_factory=list)


async def _block(request: Request, count: int, tally: Tally) -> None:
    gc.collect()  # outside the measurement: each block starts from the same heap state
    start = time.process_time()
    chunks = 0
    for _ in range(count):
        chunks += await request()
    tally.cpu_s += time.process_time() - start
    tally.samples += count
    tally.chunks += chunks


async def _measure(requests: dict[str, Request], samples: int, repeats: int) -> dict[str, Tally]:
    tallies = {name: Tally() for name in requests}
    for request in requests.values():
        for _ in range(_WARMUP):
            await request()
    for repeat in range(repeats):
        before = {name: (t.cpu_s, t.samples) for name, t in tallies.items()}
        for block in range(max(1, samples // _BLOCK)):
            order = list(requests) if (repeat + block) % 2 == 0 else list(requests)[::-1]
            for name in order:
                await _block(requests[name], _BLOCK, tallies[name])
        for name, tally in tallies.items():
            cpu, n = tally.cpu_s - before[name][0], tally.samples - before[name][1]
            tally.per_repeat_us.append(cpu / n * 1e6)
    return tallies


def _report(tallies: dict[str, Tally]) -> None:
    rows = []
    for name, tally in tallies.items():
        per_repeat = " / ".join(f"{us:.0f}" for us in tally.per_repeat_us)
        chunks = f"{tally.chunks / tally.samples:.1f}" if tally.chunks else "—"
        cpu = f"{median(tally.per_repeat_us):.0f}"
        rows.append([name, str(tally.samples), cpu, per_repeat, chunks])
    headers = ["client", "samples", "µs CPU/sample (p50)", "each repeat", "chunks/response"]
    print_table(headers, rows)
    probe, bare = tallies["probe"].per_repeat_us, tallies["bare httpx"].per_repeat_us
    ratios = [p / b for p, b in zip(probe, bare, strict=True)]
    ratio = median(ratios)
    verdict = "met" if ratio <= _GOAL else "NOT met"
    each = " / ".join(f"{r:.2f}" for r in ratios)
    print(f"\nratio probe / bare: {ratio:.2f}× (each repeat: {each}); goal ≤ {_GOAL}×: {verdict}")
    print(f"the probe's own CPU: {median(probe) - median(bare):.0f} µs per sample")


async def _profile(request: Request, count: int) -> None:
    """Where the probe's own CPU goes: functions of app/probe, per sample."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(count):
        await request()
    profiler.disable()
    rows = []
    for (path, line, function), row in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
        _, calls, own, cumulative, _ = row
        if "/app/probe/" in path:
            where = f"{path.split('/app/probe/')[1]}:{line} {function}"
            rows.append((cumulative, own, calls, where))
    rows.sort(reverse=True)
    print(f"\n## cProfile of {count} probe samples: app/probe functions by cumulative time")
    print("(wall clock; the profiler inflates times about threefold: compare rows with each other)")
    table = [
        [where, f"{calls / count:.1f}", f"{own / count * 1e6:.0f}", f"{cum / count * 1e6:.0f}"]
        for cum, own, calls, where in rows[:20]
    ]
    print_table(["function", "calls/sample", "own µs/sample", "cumulative µs/sample"], table)


async def _record_chunks(client: httpx.AsyncClient, url: str) -> list[bytes]:
    async with client.stream("POST", url, json=STREAM_BODY) as response:
        return [chunk async for chunk in response.aiter_bytes()]


def _per_sample_us(work: Callable[[], object], repeats: int = 200) -> float:
    start = time.process_time()
    for _ in range(repeats):
        work()
    return (time.process_time() - start) / repeats * 1e6


def _parts(chunks: list[bytes]) -> None:
    """The probe's body reading, piece by piece, on one recorded response, unprofiled."""
    decoder = SSEDecoder()
    events = [event for chunk in chunks for event in decoder.feed(chunk)]
    data = [event.data for event in events if event.data != "[DONE]"]
    payloads = [json.loads(text) for text in data]

    def stream_reader() -> None:
        reader = StreamReader(read_openai_event, Marks(), Findings(), 1 << 24)
        for chunk in chunks:
            reader.feed(chunk, 0)
        reader.close(0)

    def decode() -> None:
        fresh = SSEDecoder()
        for chunk in chunks:
            fresh.feed(chunk)

    def usage() -> None:
        for payload in payloads:
            tokens_from_usage(payload)
            timing_from_usage(payload)

    parts: list[tuple[str, Callable[[], object]]] = [
        ("readers.StreamReader.feed + close, whole body", stream_reader),
        ("  streams.SSEDecoder.feed", decode),
        (
            "  streams.read_openai_event, every event",
            lambda: [read_openai_event(e) for e in events],
        ),
        ("    json.loads of every event (inside it)", lambda: [json.loads(d) for d in data]),
        ("    servertiming.tokens_/timing_from_usage, every event (inside it)", usage),
    ]
    print(f"\n## body reading, unprofiled, CPU: {len(chunks)} chunks, {len(events)} events")
    rows = [[name, f"{_per_sample_us(work):.0f}"] for name, work in parts]
    print_table(["part", "µs per response"], rows)


async def main(samples: int, repeats: int, profile: bool) -> None:
    print_header("probe_cpu", "CPU time of this process per sample (sim in its own process)")
    clock = RunClock()
    with SimProcess(FAST) as sim:
        spec = chat_spec(sim.url)
        async with make_client(spec) as probe_client, make_client(spec) as bare_client:
            requests = {
                "bare httpx": bare_request(bare_client, spec.url),
                "probe": probe_request(probe_client, spec),
            }
            result: dict[str, dict[str, Tally]] = {}

            async def work() -> None:
                result["tallies"] = await _measure(requests, samples, repeats)

            if await bounded(_BUDGET_S, work, "CPU measurement"):
                _report(result["tallies"])
            if profile:
                _parts(await _record_chunks(bare_client, spec.url))
                await bounded(60, lambda: _profile(requests["probe"], 300), "profile")
    print(f"finished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=300, help="per kind and repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="then cProfile the probe")
    args = parser.parse_args()
    asyncio.run(main(args.samples, args.repeats, args.profile))
