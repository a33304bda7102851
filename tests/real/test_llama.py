"""phasewatch against llama.cpp's own account of each request (its perf block on stderr)
and against an independent raw-socket client.

The server serves one request at a time and reports every one in order, so the n-th
request after a count of its blocks is the n-th block after it.

Tolerances are relative to llama.cpp's total (prompt processing and generation on its own
clock) and generous enough for a loaded 2-core machine, where the same request takes
100-170 ms: what phasewatch calls the server's time also holds the server's HTTP handling
(request parsing, chat template, tokenising, the JSON answer: 1-9 ms here), which
llama.cpp's total leaves out. The exact numbers are bench/real_servers.py's.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from app.analysis.notes import first_sample_outlier
from app.analysis.summary import summarize
from app.probe.run import probe_run
from app.probe.sample import Sample, Status
from app.probe.spec import Kind, ProbeSpec
from tests.helpers import ThreadLag
from tests.real.llama import LlamaServer, Perf, chat_body, prompt
from tests.real.rawclient import RawAnswer, RawClient

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

SERVER_SIDE = ("queue", "prefill", "generation", "server")


@dataclass
class Timed:
    """llama.cpp's account of a request, as the notes read a sample."""

    status: str
    total_ms: float
    phases: dict[str, float]


def spec(server: LlamaServer, body: object, **fields: object) -> ProbeSpec:
    return ProbeSpec(  # type: ignore[arg-type]
        url=server.chat_url, kind=Kind.OPENAI, method="POST", body=body, **fields
    )


def server_side(sample: Sample) -> float:
    return sum(ms for name, ms in sample.phases.items() if name in SERVER_SIDE)


async def probed(server: LlamaServer, probe_spec: ProbeSpec, n: int) -> list[tuple[Sample, Perf]]:
    """``n`` samples, each with llama.cpp's block for it."""
    before = len(server.drain())
    samples = await probe_run(probe_spec, n)
    return list(zip(samples, server.wait_for(before + n)[before:], strict=True))


async def test_a_whole_answer_is_server_time_not_queue(llama: LlamaServer) -> None:
    """The issue's row: llama.cpp evaluated for 383 of 401 ms and phasewatch said queue."""
    body = chat_body(prompt(8), 256, stream=False)
    await probe_run(spec(llama, body), 1)  # the first request of a process is slower
    pairs = await probed(llama, spec(llama, body), 6)
    excess = []
    for sample, perf in pairs:
        assert sample.status is Status.OK
        assert list(sample.phases) == ["connect", "network", "server", "transfer"]
        server = sample.phases["server"]
        processing = sample.server_timing.raw["openai-processing-ms"]
        # All the engine's work and all of the server's own account of its time
        # (openai-processing-ms) on every sample.
        assert server >= perf.total_ms - 2.0, (server, perf)
        assert server >= processing - 2.0, (server, processing)
        excess.append((server - processing, processing))
    # Beyond that, only the handling the server's timer leaves out: a few ms on the run's
    # median sample. One sample's can be tens of ms when the server's process is
    # descheduled beside CPU-bound neighbours — the machine, not the breakdown — so the
    # run is judged, as phasewatch judges it.
    over = statistics.median(e for e, _ in excess)
    processing = statistics.median(p for _, p in excess)
    assert over <= max(8.0, 0.08 * processing), excess
    assert summarize([s for s, _ in pairs]).dominant == "server"


async def test_a_stream_splits_its_time_as_llama_spent_it(llama: LlamaServer) -> None:
    """Each sample holds at least llama.cpp's time after the network, and the run puts it
    where llama.cpp spent it: generation. The shares are the run's (its median sample):
    with both cores busy, the server's own process is sometimes descheduled mid-stream and
    its tokens reach any client bunched, so one sample's generation can be a fifth of
    llama.cpp's total while its head is the rest."""
    pairs = await probed(llama, spec(llama, chat_body(prompt(8), 128, stream=True)), 6)
    for sample, perf in pairs:
        assert sample.status is Status.OK and sample.tokens.completion is None  # no usage
        # Its total runs on past the last token (the finishing chunk, [DONE]): transfer.
        after_network = server_side(sample) + sample.phases["transfer"]
        assert after_network >= perf.total_ms - 2.0, (sample.phases, perf)
        # llama.cpp's openai-processing-ms on a stream is 0-5 ms: never taken as its time.
        assert sample.phases["network"] <= 2 * (sample.rtt_ms or 0) + 1
    assert summarize([s for s, _ in pairs]).dominant == "generation"
    over = statistics.median(server_side(s) - p.total_ms for s, p in pairs)
    assert over <= max(20.0, 0.15 * statistics.median(p.total_ms for _, p in pairs)), pairs
    share = statistics.median(s.phases["generation"] / p.total_ms for s, p in pairs)
    assert share > 0.8, pairs


def _overheads(
    pairs: Sequence[tuple[float, Perf]],
) -> float:
    """The median of a client's time minus llama.cpp's total for the same request."""
    return statistics.median(ms - perf.total_ms for ms, perf in pairs)


async def test_phasewatch_sees_what_a_raw_socket_client_sees(
    llama: LlamaServer, lag: ThreadLag
) -> None:
    """The same stream, turn about from phasewatch and from a raw socket. Each request's
    own time varies by half from one to the next here, so each client's end-to-end time is
    compared less llama.cpp's total for that request: what is left is the client's view of
    the same server's handling and the wire. They agree within 1-2 ms on a quiet machine;
    with both cores busy the Python client waits longer for the CPU than the blocking one
    (CI once saw transfers 3.27 ms apart against 3.10 allowed), hence max(3 ms, 10 % of the
    end-to-end) and the typical lateness of this process's wake-ups meanwhile."""
    body = chat_body(prompt(8), 64, stream=True)
    raw, probe_spec = RawClient(llama.url), spec(llama, body)
    ours: list[Sample] = []
    theirs: list[RawAnswer] = []
    try:
        before = len(llama.drain())
        for _ in range(6):
            ours += await probe_run(probe_spec, 1)
            theirs.append(await asyncio.to_thread(raw.post_json, "/v1/chat/completions", body))
    finally:
        raw.close()
    perf = llama.wait_for(before + 12)[before:]
    after_connect = [s.total_ms - s.phases["connect"] for s in ours]
    mine = _overheads(list(zip(after_connect, perf[::2], strict=True)))
    other = _overheads([(a.end_ms, p) for a, p in zip(theirs, perf[1::2], strict=True)])
    end_to_end = statistics.median(a.end_ms for a in theirs)
    late = lag.typical_ms()
    assert abs(mine - other) <= max(3.0, 0.1 * end_to_end) + late, (mine, other, late)
    transfer = statistics.median(s.phases["transfer"] for s in ours)
    raw_transfer = statistics.median(a.end_ms - (a.last_token_ms or 0) for a in theirs)
    near = max(2.0, 0.05 * end_to_end) + late
    assert abs(transfer - raw_transfer) <= near, (transfer, raw_transfer, late)


async def test_two_callers_at_once_queue_behind_each_other(llama: LlamaServer) -> None:
    """llama.cpp serves one request at a time: with two callers, each request waits about
    one of the other's, and phasewatch reports that wait as queue, not generation."""
    probe_spec = spec(llama, chat_body(prompt(8), 96, stream=True))
    before = len(llama.drain())
    runs = await asyncio.gather(probe_run(probe_spec, 6), probe_run(probe_spec, 6))
    perf = llama.wait_for(before + 12)[before:]
    samples = [s for run in runs for s in run]
    busy = statistics.median(p.total_ms for p in perf)
    # Alone, the queue is the server's handling: a few ms (the stream test above).
    assert statistics.median(s.phases["queue"] for s in samples) > 0.3 * busy
    for sample in samples:
        assert sample.phases["generation"] < 1.25 * max(p.total_ms for p in perf)


async def test_a_nonce_at_the_prompts_start_measures_prefill_on_every_sample(
    llama: LlamaServer,
) -> None:
    """A 1,200-token prompt sent again is a prefix-cache hit: prefill in sample 0 only, and
    the run's note says so. With ``{{nonce}}`` first, every sample evaluates it whole, and
    the note is there only when llama.cpp's own totals show such an outlier too (on a busy
    machine it once took 1,442 ms for the first of five, then 119-151 ms)."""
    text = prompt(400, seed=11)
    same = await probed(llama, spec(llama, chat_body(text, 8, stream=True)), 5)
    fresh = await probed(llama, spec(llama, chat_body("{{nonce}} " + text, 8, stream=True)), 5)
    assert [perf.cached_prefix > 1000 for _, perf in same] == [False] + [True] * 4
    notes = summarize([s for s, _ in same]).notes
    assert [note.kind for note in notes] == ["first_sample_outlier"]
    assert "in queue" in notes[0].text  # prefill, unsplit from queue on these streams
    for sample, perf in fresh:
        assert perf.prompt_tokens > 1000 and perf.cached_prefix < 10
        # The head holds the prefill: the first token cannot come before llama.cpp's own
        # prompt eval ends. (Not a share of its total time: that total also holds the
        # Python server's work between tokens, which a busy machine stretches.)
        head = sample.phases["queue"] + sample.phases["prefill"]
        assert head >= perf.prompt_ms > 0, (sample.phases, perf)
    own = [Timed("ok", perf.total_ms, {"server": perf.total_ms}) for _, perf in fresh]
    expected = first_sample_outlier(own) is not None
    assert bool(summarize([s for s, _ in fresh]).notes) is expected, [p for _, p in fresh]


@pytest.mark.parametrize("cooldown", [0.0, 8.0], ids=["no-cooldown", "cooldown"])
async def test_a_cool_down_keeps_a_cancelled_answer_off_the_next_sample(
    llama: LlamaServer, cooldown: float
) -> None:
    """llama.cpp finishes a whole answer whose client left at the 250 ms deadline: a new
    6,000-token prompt, 0.7 s of prefill on a quiet machine, 2.5 s beside two busy cores.
    The next sample sends it again, a cache hit of 10-35 ms (40-100 ms end to end), but
    without a cool-down it waits behind the cancelled answer and is cut too. After a
    cool-down long enough its server time is its own. The margins are wide both ways
    because a busy CI machine once took 60 ms end to end for a 3 ms cache hit."""
    body = chat_body(prompt(2000, seed=20 + int(cooldown)), 4, stream=False)
    probe_spec = spec(llama, body, deadline_ms=250, cooldown_s=cooldown)
    before = len(llama.drain())
    cut, after = await probe_run(probe_spec, 2)
    assert cut.status is Status.DEADLINE_EXCEEDED
    assert after.marks.request_start is not None  # the pool gave it a connection at once
    if not cooldown:
        assert after.status is Status.DEADLINE_EXCEEDED, after.phases
        return
    cancelled, own = llama.wait_for(before + 2)[before:]
    # Behind the cancelled answer it would have been cut as without a cool-down; within the
    # deadline it was served on its own, from the cache the cancelled answer left.
    assert cancelled.total_ms > 2 * 250 and cancelled.cached_prefix < 10, cancelled
    assert after.status is Status.OK and own.cached_prefix > 1000, (after, own)
