"""End-to-end time of the probe against curl's ``time_total`` on the same endpoint.

curl is a new process, so a new connection, every time; the probe is given a new client
(``make_client`` + ``probe_once``) per sample to compare like with like. The probe on its
pooled connection is measured too, and a fresh probe on httpcore's own (anyio) network
backend, to show what the probe's asyncio backend changes under the same load. The sim's
latency is constant (``queue_sigma=0``) and the four kinds of request take turns in every
round, their order alternating, so drift hits all alike. Differences are paired within a
round.

    .venv/bin/python -m bench.probe_vs_curl [--rounds 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import httpx
from httpcore._backends.auto import AutoBackend

from app.demo.sim.process import SimProcess
from app.probe.client import make_client, probe_once
from app.probe.sample import Sample, Status
from app.probe.spec import ProbeSpec
from bench.common import (
    ACCEPTANCE,
    STREAM_BODY,
    RunClock,
    bounded,
    chat_spec,
    median,
    pct,
    print_header,
    print_table,
)

CONSTANT = replace(ACCEPTANCE, queue_sigma=0.0)
_WARMUP_ROUNDS = 5
_BUDGET_S = 240.0
_CURL_TIMEOUT_S = 10.0

# Three points on each request's time line, in ms from its start:
# the connection is ready, the response headers are in, the response is complete.
POINTS = ("connected", "headers", "total")
ANYIO = "probe, fresh, anyio backend"
CLIENTS = ("curl", "probe, fresh", "probe, pooled", ANYIO)
Timeline = dict[str, float]
Measure = Callable[[], Awaitable[Timeline]]
_CURL_FORMAT = "%{time_connect} %{time_starttransfer} %{time_total}"


def curl_measure(url: str, body_file: Path) -> Measure:
    command = [
        "curl", "-sS", "-o", "/dev/null", "-w", _CURL_FORMAT,
        "-H", "content-type: application/json", "-d", f"@{body_file}", url,
    ]  # fmt: skip

    async def measure() -> Timeline:
        # Blocking on purpose: nothing else runs on the loop meanwhile.
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=_CURL_TIMEOUT_S, check=True
        )
        seconds = [float(value) for value in done.stdout.split()]
        return {point: s * 1000 for point, s in zip(POINTS, seconds, strict=True)}

    return measure


def fresh_probe(spec: ProbeSpec, *, anyio: bool = False) -> Measure:
    async def measure() -> Timeline:
        client = make_client(spec)  # outside the timed window, as curl's start-up is
        if anyio:  # httpcore's default backend, as the probe had it before its own
            client._transport._pool._network_backend = AutoBackend()  # type: ignore[attr-defined]
        try:
            return _timeline(await probe_once(client, spec))
        finally:
            await client.aclose()

    return measure


def pooled_probe(spec: ProbeSpec, client: httpx.AsyncClient) -> Measure:
    async def measure() -> Timeline:
        return _timeline(await probe_once(client, spec))

    return measure


def _timeline(sample: Sample) -> Timeline:
    marks = sample.marks
    if sample.status is not Status.OK or marks.response_headers is None:
        raise RuntimeError(f"probe failed: {sample.error_class}: {sample.error}")
    # request_start: the connection is ours, as curl's time_connect (TCP done).
    connected = (marks.request_start or 0) / 1e6
    timeline = {"connected": connected, "headers": marks.response_headers / 1e6}
    timeline["total"] = sample.total_ms
    if marks.connect_start is not None and marks.connect_end is not None:
        timeline["to connect_start"] = marks.connect_start / 1e6
        timeline["connect_tcp"] = (marks.connect_end - marks.connect_start) / 1e6
        timeline["to request_start"] = connected - marks.connect_end / 1e6
    return timeline


async def _rounds(
    measures: dict[str, Measure], rounds: int, results: dict[str, list[Timeline]]
) -> None:
    names = list(measures)
    for index in range(_WARMUP_ROUNDS + rounds):
        order = names if index % 2 == 0 else names[::-1]
        values = {name: await measures[name]() for name in order}
        if index >= _WARMUP_ROUNDS:
            for name in names:
                results[name].append(values[name])


def _report(results: dict[str, list[Timeline]]) -> None:
    n = min(len(v) for v in results.values())
    print(f"## end to end, {n} rounds (x − curl: paired within a round)")
    _end_to_end(results, n)
    print("\n## where the difference sits: medians of the paired differences (ms)")
    print_table(["client", *(f"Δ {p}" for p in POINTS)], _where_rows(results, n))
    steps = ("to connect_start", "connect_tcp", "to request_start")
    for name in ("probe, fresh", ANYIO):
        fresh = results[name][:n]
        fresh_steps = ", ".join(f"{step} {median(t[step] for t in fresh):.3f}" for step in steps)
        print(f"\n{name}, up to its connection (ms, p50): {fresh_steps}")
    curl_connect = median(t["connected"] for t in results["curl"][:n])
    print(f"curl time_connect p50: {curl_connect:.3f} ms\n")
    for name in CLIENTS[1:]:
        pairs = zip(results[name][:n], results["curl"][:n], strict=True)
        difference = median(x["total"] - c["total"] for x, c in pairs)
        verdict = "met" if abs(difference) <= 1.0 else "NOT met"
        print(f"goal |median({name} − curl)| ≤ 1 ms: {verdict} ({difference:+.3f} ms)")


def _end_to_end(results: dict[str, list[Timeline]], n: int) -> None:
    curl = [t["total"] for t in results["curl"][:n]]
    rows = []
    for name, timelines in results.items():
        totals = [t["total"] for t in timelines[:n]]
        diffs = [v - c for v, c in zip(totals, curl, strict=True)]
        rows.append([name, f"{median(totals):.3f}", f"{pct(totals, 90):.3f}", *_diff_cells(diffs)])
    headers = ["client", "p50 ms", "p90 ms", "p50 of (x − curl)", "p10 / p90 of (x − curl)"]
    print_table([*headers, "p90 of |x − curl|"], rows)


def _diff_cells(diffs: list[float]) -> list[str]:
    if not any(diffs):
        return ["—", "—", "—"]
    return [
        f"{median(diffs):+.3f}",
        f"{pct(diffs, 10):+.3f} / {pct(diffs, 90):+.3f}",
        f"{pct([abs(d) for d in diffs], 90):.3f}",
    ]


def _where_rows(results: dict[str, list[Timeline]], n: int) -> list[list[str]]:
    curl = results["curl"][:n]
    rows = []
    for name in CLIENTS[1:]:
        pairs = list(zip(results[name][:n], curl, strict=True))
        rows.append([name, *(f"{median(x[p] - c[p] for x, c in pairs):+.3f}" for p in POINTS)])
    return rows


async def main(rounds: int) -> None:
    print_header("probe_vs_curl", "end-to-end ms, probe vs curl -w %{time_total}")
    curl = shutil.which("curl")
    if curl is None:
        raise SystemExit("curl is not installed")
    clock = RunClock()
    results: dict[str, list[Timeline]] = {name: [] for name in CLIENTS}
    with tempfile.TemporaryDirectory() as directory, SimProcess(CONSTANT) as sim:
        body_file = Path(directory) / "body.json"
        # The bytes httpx sends for json=: compact separators.
        body_file.write_text(json.dumps(STREAM_BODY, separators=(",", ":")))
        spec = chat_spec(sim.url)
        async with make_client(spec) as pooled:
            measures = {
                "curl": curl_measure(spec.url, body_file),
                "probe, fresh": fresh_probe(spec),
                "probe, pooled": pooled_probe(spec, pooled),
                ANYIO: fresh_probe(spec, anyio=True),
            }
            await bounded(_BUDGET_S, lambda: _rounds(measures, rounds, results), "rounds")
    _report(results)
    print(f"finished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(main(args.rounds))
