"""Per-phase error of the probe against the sim's logged truth, acceptance configuration.

~200 sequential samples over HTTP/1.1 and ~100 over HTTP/2 + TLS, each run on one pooled
client as ``probe_run`` uses it in production. The sim runs in its own process. Over
HTTP/1.1 a bare-socket reference client (``bench.rawclient``) then probes the same sim:
what error it shows too is the sim's and the kernel's, not the probe's.

    .venv/bin/python -m bench.probe_accuracy [--h1 200] [--h2 100] [--raw 50]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from app.demo.sim.process import SimProcess
from app.probe.run import probe_run
from app.probe.sample import Sample
from bench.common import (
    ACCEPTANCE,
    PHASE_ERROR_HEADERS,
    RunClock,
    bounded,
    chat_spec,
    make_tls_files,
    median,
    paired,
    pct,
    phase_error_rows,
    print_header,
    print_table,
)
from bench.rawclient import RawClient, RawSample

_BUDGET_S = 75.0  # per run; a sample takes ~0.33 s


async def _collect(sim: SimProcess, samples: int, **spec_fields: object) -> list[Sample]:
    collected: list[Sample] = []
    spec = chat_spec(sim.url, **spec_fields)

    async def work() -> None:
        await probe_run(spec, samples, on_sample=collected.append)

    await bounded(_BUDGET_S, work, f"{samples} samples from {sim.url}")
    return collected


def _report(title: str, samples: list[Sample], sim: SimProcess) -> None:
    pairs = paired(samples, sim.truths())
    versions = sorted({s.http_version or "?" for s in samples})
    print(f"## {title}: {len(pairs)} of {len(samples)} samples ok and paired, {versions}")
    print_table(PHASE_ERROR_HEADERS, phase_error_rows([(s.phases, t) for s, t in pairs]))
    fresh = [s.phases["connect"] for s in samples if not s.connection_reused]
    pooled = [s.phases["connect"] for s in samples if s.connection_reused]
    lag = sim.loop_lag()
    print(
        f"connect (no truth): fresh {median(fresh):.3f} ms (n={len(fresh)}); "
        f"pooled p50 {median(pooled):.3f} ms, p95 {pct(pooled, 95):.3f} ms (n={len(pooled)})\n"
        f"sim loop lag on 5 ms sleeps: p50 {lag['p50']:.2f} ms, p99 {lag['p99']:.2f} ms, "
        f"max {lag['max']:.2f} ms\n"
    )


def _raw_reference(sim: SimProcess, samples: int) -> None:
    client, collected, deadline = RawClient(sim.url), list[RawSample](), time.monotonic() + 30
    try:
        client.probe()  # the first request opens the connection: not a pooled sample
        while len(collected) < samples and time.monotonic() < deadline:
            collected.append(client.probe())
    finally:
        client.close()
    truths = {truth.request_id: truth for truth in sim.truths()}
    pairs = [(s.phases, truths[s.request_id]) for s in collected]
    print(f"## reference: bare socket, HTTP/1.1, same sim: {len(pairs)} samples")
    print_table(PHASE_ERROR_HEADERS, phase_error_rows(pairs))
    print()


async def main(h1: int, h2: int, raw: int) -> None:
    print_header("probe_accuracy", "per-phase error against the sim's truth (ms)")
    clock = RunClock()
    with SimProcess(ACCEPTANCE) as sim:
        _report("probe, HTTP/1.1", await _collect(sim, h1), sim)
        if raw:
            _raw_reference(sim, raw)
    with tempfile.TemporaryDirectory() as directory:
        tls = make_tls_files(Path(directory))
        with SimProcess(ACCEPTANCE, certfile=tls.certfile, keyfile=tls.keyfile) as sim:
            samples = await _collect(sim, h2, http2=True, verify=tls.ca_file)
            _report("probe, HTTP/2 over TLS", samples, sim)
    print(f"finished in {clock.report()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--h1", type=int, default=200, help="probe samples over HTTP/1.1")
    parser.add_argument("--h2", type=int, default=100, help="probe samples over HTTP/2 + TLS")
    parser.add_argument("--raw", type=int, default=50, help="reference samples (0: none)")
    args = parser.parse_args()
    asyncio.run(main(args.h1, args.h2, args.raw))
