"""The probe against the simulated endpoint, whose true phase durations are logged.

The sim runs in a process of its own, as a real endpoint would: served from a thread of
this process, it would share the probe's interpreter lock, and under load the waits for
that lock showed up as milliseconds of network that neither side had spent on the wire.

The accuracy goal, every phase's median within max(2 ms, 3 %) of the truth, holds for a
machine that runs the probe when it asks to run. A busy one wakes both event loops late,
and a late wake-up lands in some phase: so each bound here adds the lag that the probe's
loop and the sim's loop measured meanwhile (p99 of 5 ms sleeps, ``LoopLag``; a median moves
that far only when most samples are hit), under a millisecond on a quiet machine. The goal
itself, on a quiet machine, is ``bench.probe_accuracy``'s.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from app.analysis.summary import summarize
from app.demo.sim.app import SimConfig, Truth
from app.demo.sim.process import LoopLag, SimProcess
from app.probe.run import probe_run
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec, RttMethod

pytestmark = [pytest.mark.process, pytest.mark.anyio]

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
STREAM_BODY = {"model": "sim", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
TRUTH_PHASES = ("network", "queue", "prefill", "generation", "transfer")


def chat_spec(url: str, **overrides: object) -> ProbeSpec:
    fields: dict[str, object] = {
        "url": f"{url}/v1/chat/completions",
        "kind": Kind.OPENAI,
        "method": "POST",
        "body": STREAM_BODY,
    }
    return ProbeSpec(**(fields | overrides))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Probed:
    samples: list[Sample]
    truths: list[Truth]
    lag_ms: float  # p99 of the probe's loop's lag plus the sim's, while it ran


async def probed(
    sim: SimProcess, spec: ProbeSpec, n: int, on_sample: Callable[[Sample], None] | None = None
) -> Probed:
    """``probe_run`` with both event loops' lag watched."""
    async with LoopLag() as lag:
        samples = await probe_run(spec, n, on_sample=on_sample)
    return Probed(samples, sim.truths(), lag.percentiles()["p99"] + sim.loop_lag()["p99"])


def assert_close(measured: float, truth: float, what: str, lag_ms: float) -> None:
    goal = max(2.0, 0.03 * truth)
    error = abs(measured - truth)
    assert error <= goal + lag_ms, f"{what}: {measured} vs {truth}, goal {goal} + lag {lag_ms}"


def assert_medians_match_truth(run: Probed) -> None:
    truths = {truth.request_id: truth for truth in run.truths}
    paired = [(s, truths[s.request_id]) for s in run.samples if s.request_id in truths]
    assert len(paired) == len(run.samples)
    for phase in TRUTH_PHASES:
        measured = statistics.median(s.phases[phase] for s, _ in paired)
        truth = statistics.median(getattr(t, f"{phase}_ms") for _, t in paired)
        assert_close(measured, truth, phase, run.lag_ms)


@pytest.fixture
def sim() -> Iterator[SimProcess]:
    with SimProcess(ACCEPTANCE) as server:
        yield server


async def test_each_phase_median_matches_the_logged_truth(sim: SimProcess) -> None:
    run = await probed(sim, chat_spec(sim.url), 20)
    assert all(s.status is Status.OK for s in run.samples)
    for sample in run.samples:
        assert abs(sum(sample.phases.values()) - sample.total_ms) < 0.01
        assert sample.provenance["queue"] == "server"
        assert sample.tokens.completion == 20
    assert_medians_match_truth(run)


async def test_server_timing_header_gives_the_same_split(sim: SimProcess) -> None:
    sim.reconfigure(server_timing="header")
    run = await probed(sim, chat_spec(sim.url), 10)
    assert all(s.server_timing.queue_ms is not None for s in run.samples)
    assert_medians_match_truth(run)


async def test_without_server_timing_ttfb_rtt_gives_network_and_queue_keeps_prefill(
    sim: SimProcess,
) -> None:
    sim.reconfigure(server_timing="none", queue_sigma=0)
    spec = chat_spec(sim.url, rtt_method=RttMethod.TTFB, rtt_url=f"{sim.url}/health")
    run = await probed(sim, spec, 6)
    samples = run.samples
    truths = {truth.request_id: truth for truth in run.truths}
    paired = [truths[s.request_id] for s in samples if s.request_id is not None]
    network = statistics.median(s.phases["network"] for s in samples)
    queue = statistics.median(s.phases["queue"] for s in samples)
    true_network = statistics.median(t.network_ms for t in paired)
    true_queue = statistics.median(t.queue_ms + t.prefill_ms for t in paired)
    assert len(paired) == len(samples)
    what = "network from the fastest /health round trip"
    assert_close(network, true_network, what, run.lag_ms)
    assert_close(queue, true_queue, "queue holds queue + prefill", run.lag_ms)
    assert all(s.unsplit == ("queue", "prefill") for s in samples)
    assert all(s.provenance["network"] == "estimated" for s in samples)


async def test_deadline_misses_are_counted_exactly_and_kept_censored(sim: SimProcess) -> None:
    # Every third request queues for two seconds: e2e ≈ 2.2 s against a 1 s deadline;
    # the others take ≈ 0.3 s. Nothing sits near the line (0.7 s either side, far beyond
    # a busy machine's lag), so the count is exact.
    slow = {2, 5, 8}
    sim.reconfigure(queue_sigma=0, queue_median_ms=50)

    def next_config(sample: Sample) -> None:
        sim.reconfigure(queue_median_ms=2000 if sample.index + 1 in slow else 50)

    spec = chat_spec(sim.url, deadline_ms=1000)
    run = await probed(sim, spec, 10, on_sample=next_config)
    samples = run.samples
    missed = {s.index for s in samples if s.status is Status.DEADLINE_EXCEEDED}
    assert missed == slow, run.lag_ms
    assert all(s.total_ms == 1000 for s in samples if s.index in slow)
    summary = summarize(samples)
    assert summary.deadline_exceeded == 3
    assert summary.n == 10  # censored samples stay in the percentiles
    assert summary.total["p99"] == pytest.approx(1000)


async def test_http11_marks_are_in_order_and_the_connection_is_reused(sim: SimProcess) -> None:
    run = await probed(sim, chat_spec(sim.url), 3)
    first, second = run.samples[0], run.samples[1]
    assert first.http_version == "HTTP/1.1"
    assert first.cold_start and not second.cold_start
    assert not first.connection_reused and second.connection_reused
    assert_marks_in_order(first, tls=False)
    assert second.marks.connect_start is None
    assert second.phases["connect"] < 1.0 + run.lag_ms  # a pool checkout, no connect
    assert first.remote_address is not None and first.remote_address.startswith("127.0.0.1:")


def assert_marks_in_order(sample: Sample, *, tls: bool) -> None:
    names = ["connect_start", "connect_end"]
    names += ["tls_start", "tls_end"] if tls else []
    names += ["request_start", "request_sent", "response_headers", "first_byte"]
    names += ["first_answer_token", "last_answer_token", "stream_end"]
    values = [getattr(sample.marks, name) for name in names]
    assert None not in values, dict(zip(names, values, strict=True))
    assert values == sorted(values)


@pytest.fixture
def tls_files(tls_ca: trustme.CA, tmp_path: Path) -> tuple[str, str]:
    cert = tls_ca.issue_cert("127.0.0.1")
    certfile, keyfile = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.cert_chain_pems[0].write_to_path(str(certfile))
    cert.private_key_pem.write_to_path(str(keyfile))
    return str(certfile), str(keyfile)


@pytest.mark.parametrize("http2", [True, False], ids=["h2", "http/1.1-over-tls"])
async def test_tls_marks_and_phases_over_http2_and_http11(
    tls_files: tuple[str, str], ca_file: str, http2: bool
) -> None:
    certfile, keyfile = tls_files
    with SimProcess(ACCEPTANCE, certfile=certfile, keyfile=keyfile) as server:
        spec = chat_spec(server.url, http2=http2, verify=ca_file)
        run = await probed(server, spec, 8)
    samples = run.samples
    assert {s.http_version for s in samples} == {"HTTP/2" if http2 else "HTTP/1.1"}
    assert_marks_in_order(samples[0], tls=True)
    assert all(s.connection_reused for s in samples[1:])
    assert_medians_match_truth(run)
