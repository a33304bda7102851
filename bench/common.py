"""Shared by the benchmarks: specs, TLS files, statistics, reports.

Every benchmark talks to loopback only; every load loop in them is bounded in count and
in time.
"""

from __future__ import annotations

import asyncio
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import trustme

from app.demo.sim import process as simproc
from app.demo.sim.app import SimConfig, Truth
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec

REPO_ROOT = Path(__file__).resolve().parent.parent
STREAM_BODY: dict[str, Any] = {
    "model": "sim",
    "stream": True,
    "messages": [{"role": "user", "content": "hi"}],
}
# The acceptance configuration of tests/probe/test_accuracy.py: RTT 100 ms.
ACCEPTANCE = SimConfig(
    one_way_ms=50,
    queue_median_ms=100,
    queue_sigma=0.5,
    prefill_ms=20,
    tokens=20,
    tokens_per_s=200,
    server_timing="usage",
    seed=7,
)
TRUTH_PHASES = ("network", "queue", "prefill", "generation", "transfer")


@dataclass(frozen=True)
class TlsFiles:
    certfile: str
    keyfile: str
    ca_file: str


def make_tls_files(directory: Path) -> TlsFiles:
    """A throw-away CA and a certificate for 127.0.0.1 signed by it."""
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = TlsFiles(*(str(directory / name) for name in ("cert.pem", "key.pem", "ca.pem")))
    cert.cert_chain_pems[0].write_to_path(files.certfile)
    cert.private_key_pem.write_to_path(files.keyfile)
    ca.cert_pem.write_to_path(files.ca_file)
    return files


def chat_spec(url: str, **overrides: Any) -> ProbeSpec:
    """A streaming chat completion, as the acceptance tests probe it."""
    fields: dict[str, Any] = {
        "url": f"{url}/v1/chat/completions",
        "kind": Kind.OPENAI,
        "method": "POST",
        "body": STREAM_BODY,
        "timeout_s": 10.0,  # no single sample can hold a benchmark up for long
    }
    return ProbeSpec(**(fields | overrides))


# --- statistics -------------------------------------------------------------------------


def pct(values: Iterable[float], q: float) -> float:
    """Percentile with linear interpolation, as phasewatch's summaries compute it."""
    return float(np.percentile(np.fromiter(values, dtype=float), q))


def median(values: Iterable[float]) -> float:
    return pct(values, 50)


def within_goal(measured: float, truth: float) -> bool:
    """The acceptance rule: within max(2 ms, 3 %) of the truth."""
    return abs(measured - truth) <= max(2.0, 0.03 * abs(truth))


def paired(samples: Sequence[Sample], truths: Sequence[Truth]) -> list[tuple[Sample, Truth]]:
    """Samples that finished ok, each with the truth the sim logged for it."""
    by_request = {truth.request_id: truth for truth in truths}
    pairs = []
    for sample in samples:
        truth = by_request.get(sample.request_id or "")
        if sample.status is Status.OK and truth is not None:
            pairs.append((sample, truth))
    return pairs


def phase_error_rows(pairs: Sequence[tuple[Mapping[str, float], Truth]]) -> list[list[str]]:
    """Per phase: truth and measured medians, signed bias, |error| p50/p95/max, verdict.

    ``pairs`` holds each sample's phases (ms) with the truth the sim logged for it.
    """
    rows = []
    for phase in TRUTH_PHASES:
        measured = [phases[phase] for phases, _ in pairs]
        truth = [getattr(t, f"{phase}_ms") for _, t in pairs]
        errors = [m - t for m, t in zip(measured, truth, strict=True)]
        absolute = [abs(e) for e in errors]
        med_truth, med_measured = median(truth), median(measured)
        rows.append(
            [
                phase,
                f"{med_truth:.3f}",
                f"{med_measured:.3f}",
                f"{median(errors):+.3f}",
                f"{median(absolute):.3f}",
                f"{pct(absolute, 95):.3f}",
                f"{max(absolute):.3f}",
                "yes" if within_goal(med_measured, med_truth) else "NO",
            ]
        )
    return rows


PHASE_ERROR_HEADERS = [
    "phase",
    "truth p50",
    "measured p50",
    "err p50 (signed)",
    "|err| p50",
    "|err| p95",
    "|err| max",
    "p50 within max(2ms,3%)",
]


def print_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A Markdown table, so it pastes into bench/README.md as it is."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    print(line(headers))
    print("|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|")
    for row in rows:
        print(line(row))


# --- the machine and the clock ------------------------------------------------------------


def machine_info() -> str:
    return (
        f"date {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; nproc {os.cpu_count()}; "
        f"cpu {_cpu_model()}; Python {platform.python_version()}; "
        f"httpx {metadata.version('httpx')}, httpcore {metadata.version('httpcore')}, "
        f"hypercorn {metadata.version('hypercorn')}; "
        f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}; niceness {os.nice(0)}"
    )


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def print_header(title: str, what: str) -> None:
    print(f"# {title}\n{what}\n{machine_info()}\n")


class LoopLag(simproc.LoopLag):
    """How late this process's event loop wakes from short sleeps, while a benchmark runs."""

    def summary(self) -> str:
        lags = self.lags_ms or [0.0]
        return f"p50 {median(lags):.2f} ms, p99 {pct(lags, 99):.2f} ms, max {max(lags):.2f} ms"


async def bounded(budget_s: float, work: Callable[[], Any], what: str) -> bool:
    """Run ``await work()`` for at most ``budget_s``; False (and a note) if it was cut."""
    try:
        async with asyncio.timeout(budget_s):
            await work()
    except TimeoutError:
        print(f"!! {what}: time budget of {budget_s:g} s reached, stopped early")
        return False
    return True


def _busy_ticks() -> int:
    """CPU ticks the whole machine spent busy since boot (Linux ``/proc/stat``)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields[:8]) - idle  # guest time is already counted in user


class RunClock:
    """Wall time of a benchmark, and how busy other processes kept the machine meanwhile.

    Other work on a 2-core machine disturbs timing; this says how much there was: the
    machine's busy CPU minus this process's and its waited-for children's (the sim, curl).
    """

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.busy = _busy_ticks()
        self.times = os.times()

    def report(self) -> str:
        wall = time.monotonic() - self.start
        now = os.times()
        ours = sum(now[:4]) - sum(self.times[:4])  # user, system, children user/system
        machine = (_busy_ticks() - self.busy) / os.sysconf("SC_CLK_TCK")
        others = max(0.0, machine - ours) / wall if wall > 0 else 0.0
        return f"{wall:.1f} s; other processes kept {others:.2f} of {os.cpu_count()} cores busy"
